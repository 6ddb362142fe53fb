import { type Job, Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { createRedis, type RedisClient } from '../redis/connection.js';
import type { Keys } from '../redis/keys.js';
import { instrumentRedis, pushDelivered, pushDropped, pushFailed, pushJobLatency, pushJobsFailed } from '../metrics/metrics.js';
import { allowedEndpoint } from './endpoints.js';
import { CHUNK_PRIORITY, createPushQueue } from './queue.js';
import { PushSender } from './sender.js';
import { PushStore, shortHash } from './store.js';
import { type BroadcastJob, type ChunkJob, PUSH_QUEUE, type PushJob, type StoredSubscription, type UserJob } from './types.js';

/** Worker settings; the defaults are production's. Tests shorten the lock to see crash recovery quickly. */
export interface PushWorkerTuning {
  /** Jobs processed at once. */
  concurrency?: number;
  /** Sends in flight per job. */
  sendConcurrency?: number;
  /** Wallets per broadcast chunk job. */
  chunkSize?: number;
  /** A job's lock; a crashed worker's jobs are taken over after it lapses. */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** Time-out of one push service request. */
  sendTimeoutMs?: number;
}

const DEFAULTS: Required<PushWorkerTuning> = {
  concurrency: 8,
  sendConcurrency: 32,
  chunkSize: 250,
  lockDurationMs: 30_000,
  stalledIntervalMs: 15_000,
  sendTimeoutMs: 15_000,
};

/** Audience snapshot page per Redis step, and chunk jobs per addBulk. */
const SNAPSHOT_PAGE = 1000;
const ADD_BULK = 500;

interface Target {
  wallet: string;
  subscription: StoredSubscription;
}

export interface DeliveryCounts {
  sent: number;
  gone: number;
  rejected: number;
  retry: number;
  skipped: number;
}

/** Waits for `promise` at most `ms`; its failure or lateness is ignored (shutdown paths). */
async function bounded(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise.catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** Runs `fn` over items with at most `limit` in flight; stops starting new ones after a failure, and rethrows it once all have settled. */
async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  const runner = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, runner));
  if (failure !== null) throw failure;
}

/**
 * The delivery worker (`versus serve --role worker`): BullMQ jobs of three kinds.
 *  - `user`: one wallet's subscriptions, unless it muted the app.
 *  - `broadcast`: snapshots the app's audience in bounded steps and fans it out as chunk jobs
 *    (`<id>.<k>`, ranks of the snapshot); the API paid for one job only.
 *  - `chunk`: the unmuted wallets of one slice and their subscriptions.
 * No duplicates: a per-notification set of settled endpoints is checked before and written
 * right after each push service answer; a job that runs again (retry after 429/5xx, or taken
 * over after a crash) sends only to endpoints not settled yet.
 */
export class PushWorker {
  readonly connection: RedisClient;
  readonly store: PushStore;
  /** The push queue as the worker sees it (chunk jobs are added through it; /metrics reads its depth). */
  readonly queue: Queue<PushJob>;
  private readonly worker: Worker<PushJob>;
  private readonly sender: PushSender | null;
  private readonly tuning: Required<PushWorkerTuning>;

  constructor(
    private readonly config: Config,
    keys: Keys,
    private readonly logger: Logger,
    tuning: PushWorkerTuning = {},
  ) {
    this.tuning = { ...DEFAULTS, ...tuning };
    this.connection = createRedis(config, { forBullmq: true, name: 'versus-push-worker' });
    this.connection.on('error', (error: Error) => logger.debug({ err: error.message }, 'push worker redis error'));
    instrumentRedis(this.connection, 'push-worker');
    this.store = new PushStore(this.connection, keys, config.testClock);
    this.queue = createPushQueue(this.connection, keys, logger);
    this.sender = config.vapid ? new PushSender(config.vapid, this.tuning.sendTimeoutMs) : null;
    if (!this.sender) logger.warn('VAPID keys are not configured: the worker cannot deliver (the API answers push_not_enabled)');
    this.worker = new Worker<PushJob>(PUSH_QUEUE, (job) => this.process(job), {
      connection: this.connection,
      prefix: keys.bullPrefix(),
      concurrency: this.tuning.concurrency,
      lockDuration: this.tuning.lockDurationMs,
      stalledInterval: this.tuning.stalledIntervalMs,
      maxStalledCount: 10,
    });
    this.worker.on('error', (error: Error) => logger.debug({ err: error.message }, 'push worker error'));
    this.worker.on('completed', (job) => {
      pushJobLatency.observe({ kind: job.data.kind }, Math.max(0, (job.finishedOn ?? Date.now()) - job.timestamp) / 1000);
    });
    this.worker.on('failed', (job, error) => {
      if (!job) return;
      const last = job.attemptsMade >= (job.opts.attempts ?? 1);
      pushJobsFailed.inc({ kind: job.data.kind, final: String(last) });
      logger[last ? 'warn' : 'debug']({ job: job.id, kind: job.data.kind, attempt: job.attemptsMade, err: error.message }, last ? 'push job gave up' : 'push job will retry');
    });
  }

  /** The queue connection answers and the worker is running. */
  async ready(): Promise<void> {
    if (!this.worker.isRunning()) throw new Error('worker is not running');
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.connection.ping(),
        new Promise((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error('queue connection does not answer')), 1000);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Finishes the jobs in hand (at most 12 s: within runServe's 15-second drain), then closes
   * its connections. Without Redis there is nothing to finish: it stops at once.
   */
  async close(): Promise<void> {
    const connected = this.connection.status === 'ready';
    await bounded(this.worker.close(!connected), connected ? 12_000 : 500);
    await bounded(this.queue.close(), 500);
    this.sender?.close();
    if (connected) await bounded(this.connection.quit(), 1000);
    this.connection.disconnect();
  }

  private async process(job: Job<PushJob>): Promise<DeliveryCounts | { chunks: number }> {
    const data = job.data;
    switch (data.kind) {
      case 'user':
        return this.processUser(data);
      case 'broadcast':
        return this.processBroadcast(data);
      case 'chunk':
        return this.processChunk(data);
      default:
        throw new Error(`unknown push job kind ${(data as { kind?: unknown }).kind}`);
    }
  }

  private async processUser(job: UserJob): Promise<DeliveryCounts> {
    const [muted] = await this.store.mutedFlags(job.appId, [job.wallet]);
    const targets = muted ? [] : (await this.store.subscriptions(job.wallet)).map((subscription) => ({ wallet: job.wallet, subscription }));
    const counts = await this.deliver(job, targets);
    await this.store.finishUser(job.appId, job.id);
    return counts;
  }

  private async processBroadcast(job: BroadcastJob): Promise<{ chunks: number }> {
    if ((await this.store.fanoutState(job.appId, job.id)).added) return { chunks: 0 };
    let step: { done: boolean; count: number };
    do step = await this.store.snapshotStep(job.appId, job.id, job.days, SNAPSHOT_PAGE);
    while (!step.done);
    const size = this.tuning.chunkSize;
    const chunks = Math.ceil(step.count / size);
    if (chunks === 0) {
      await this.store.markFanoutFinished(job.appId, job.id);
      return { chunks };
    }
    await this.store.setChunksLeft(job.appId, job.id, chunks);
    const { id, appId, origin, payload } = job;
    for (let first = 0; first < chunks; first += ADD_BULK) {
      const batch = [];
      for (let k = first; k < Math.min(chunks, first + ADD_BULK); k++) {
        const chunk: ChunkJob = { kind: 'chunk', id, appId, origin, payload, start: k * size, stop: Math.min(step.count, (k + 1) * size) - 1 };
        batch.push({ name: 'chunk', data: chunk as PushJob, opts: { jobId: `${id}.${k}`, priority: CHUNK_PRIORITY } });
      }
      await this.queue.addBulk(batch);
    }
    await this.store.markChunksAdded(job.appId, job.id);
    this.logger.debug({ id, origin, audience: step.count, chunks }, 'broadcast fanned out');
    return { chunks };
  }

  private async processChunk(job: ChunkJob): Promise<DeliveryCounts> {
    const wallets = await this.store.audienceSlice(job.appId, job.id, job.start, job.stop);
    const muted = await this.store.mutedFlags(job.appId, wallets);
    const listening = wallets.filter((_wallet, i) => !muted[i]);
    const perWallet = await Promise.all(
      listening.map(async (wallet) => (await this.store.subscriptions(wallet)).map((subscription) => ({ wallet, subscription }))),
    );
    const counts = await this.deliver(job, perWallet.flat());
    await this.store.chunkDone(job.appId, job.id);
    return counts;
  }

  /**
   * Sends one notification to targets not settled yet. Throws (so BullMQ retries the job with
   * backoff) when some answered 429/5xx or could not be reached; everything else is settled.
   */
  private async deliver(job: PushJob, targets: Target[]): Promise<DeliveryCounts> {
    const counts: DeliveryCounts = { sent: 0, gone: 0, rejected: 0, retry: 0, skipped: 0 };
    if (targets.length === 0) return counts;
    if (!this.sender) throw new Error('VAPID keys are not configured');
    const sender = this.sender;
    const hashes = targets.map((t) => shortHash(t.subscription.endpoint));
    const settled = await this.store.settledFlags(job.appId, job.id, hashes);
    const seen = new Set<string>();
    const pending: Array<Target & { hash: string }> = [];
    targets.forEach((target, i) => {
      const hash = hashes[i]!;
      if (settled[i] || seen.has(hash)) {
        counts.skipped++;
        return;
      }
      seen.add(hash);
      pending.push({ ...target, hash });
    });

    await pool(pending, this.tuning.sendConcurrency, async (target) => {
      if (allowedEndpoint(target.subscription.endpoint, this.config.pushEndpointHosts) === null) {
        // Registered under another PUSH_ENDPOINT_HOSTS: never contacted.
        counts.rejected++;
        pushDropped.inc({ app: job.origin, reason: 'endpoint_not_allowed' });
        this.logger.warn({ id: job.id }, 'subscription endpoint no longer allowed; not contacted');
        await this.store.markSettled(job.appId, job.id, target.hash);
        return;
      }
      const result = await sender.send(target.subscription, job.payload, job.id);
      switch (result.outcome) {
        case 'sent':
          await this.store.markSettled(job.appId, job.id, target.hash);
          counts.sent++;
          pushDelivered.inc({ app: job.origin });
          return;
        case 'gone':
          await this.store.markSettled(job.appId, job.id, target.hash);
          await this.store.dropGoneSubscription(target.wallet, target.subscription);
          counts.gone++;
          pushDropped.inc({ app: job.origin, reason: 'gone' });
          return;
        case 'rejected':
          await this.store.markSettled(job.appId, job.id, target.hash);
          counts.rejected++;
          pushDropped.inc({ app: job.origin, reason: 'refused' });
          this.logger.warn({ id: job.id, status: result.status, detail: result.detail }, 'push service refused a message');
          return;
        case 'retry':
          counts.retry++;
          pushFailed.inc({ app: job.origin });
          return;
      }
    });
    if (counts.retry > 0) throw new Error(`${counts.retry} of ${pending.length} sends to retry (429, 5xx or unreachable)`);
    return counts;
  }
}
