import { randomBytes } from 'node:crypto';
import { Queue, type JobsOptions } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { ApiError, withTimeout } from '../http/errors.js';
import { createRedis, type RedisClient } from '../redis/connection.js';
import type { Keys } from '../redis/keys.js';
import { instrumentRedis, pushAccepted } from '../metrics/metrics.js';
import { PUSH_QUEUE, type PushJob } from './types.js';

/**
 * Every push job: at most 5 attempts with exponential backoff from about 0.5 s (a send that
 * answered 429 or 5xx, or a Redis failure, fails the job; its retry sends only what is still
 * unsettled). Finished jobs are kept a while, so a re-added job ID stays a no-op.
 */
export const JOB_OPTIONS: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 500, jitter: 0.2 },
  removeOnComplete: { age: 3600, count: 10_000 },
  removeOnFail: { age: 7 * 86_400, count: 10_000 },
};

/** Broadcast chunks queue behind one-user notifications (BullMQ serves unprioritized jobs first). */
export const CHUNK_PRIORITY = 10;

const ENQUEUE_TIMEOUT_MS = 2000;

/** A new notification id: `n` then 128 random bits (base64url); a valid BullMQ job ID and Web Push Topic. */
export function newNotificationId(): string {
  return `n${randomBytes(16).toString('base64url')}`;
}

export function createPushQueue(connection: RedisClient, keys: Keys, logger: Logger): Queue<PushJob> {
  const queue = new Queue<PushJob>(PUSH_QUEUE, { connection, prefix: keys.bullPrefix(), defaultJobOptions: JOB_OPTIONS });
  queue.on('error', (error: Error) => logger.debug({ err: error.message }, 'push queue connection error'));
  return queue;
}

/**
 * The API's half of delivery: adds one job per accepted notification (a broadcast is one job,
 * whatever its audience). Its own fail-fast connection: while Redis is away, a send answers
 * 503 at once instead of waiting in an offline queue.
 */
export class PushProducer {
  readonly connection: RedisClient;
  readonly queue: Queue<PushJob>;

  constructor(config: Config, keys: Keys, private readonly logger: Logger) {
    this.connection = createRedis(config, { name: 'versus-push-queue' });
    this.connection.on('error', (error: Error) => logger.debug({ err: error.message }, 'push queue redis error'));
    instrumentRedis(this.connection, 'push-queue');
    this.queue = createPushQueue(this.connection, keys, logger);
  }

  /** Adds the job under its notification id: adding an id that is still queued or kept is a no-op. */
  async enqueue(job: PushJob): Promise<void> {
    if (this.connection.status !== 'ready') throw new ApiError('unavailable', 'push queue connection is not ready');
    try {
      await withTimeout(this.queue.add(job.kind, job, { jobId: job.id }), ENQUEUE_TIMEOUT_MS, 'enqueue');
    } catch (error) {
      if (error instanceof ApiError) throw error;
      this.logger.warn({ err: (error as Error).message }, 'enqueue failed');
      throw new ApiError('unavailable', `enqueue failed: ${(error as Error).message}`);
    }
  }

  /** Counts one accepted notification in versus_push_notifications_accepted_total (the route decides when: once per notification). */
  countAccepted(job: PushJob): void {
    pushAccepted.inc({ app: job.origin, kind: job.kind });
  }

  async ready(): Promise<void> {
    await withTimeout(this.connection.ping(), 1000, 'queue ping');
  }

  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise((resolve) => (timer = setTimeout(resolve, 1000)));
    await Promise.race([this.queue.close().catch(() => {}), late]);
    if (this.connection.status === 'ready') await Promise.race([this.connection.quit().catch(() => {}), late]);
    clearTimeout(timer);
    this.connection.disconnect();
  }
}
