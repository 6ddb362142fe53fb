import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { waitForReady } from '../redis/connection.js';
import type { Keys } from '../redis/keys.js';
import { PushProducer } from './queue.js';
import { PushWorker, type PushWorkerTuning } from './worker.js';

export type PushRole = 'api' | 'worker' | 'all';

/** The push half of one process: the API's producer, the worker, or both (role `all`). */
export interface PushServices {
  /** Enqueues accepted notifications; null in the worker role. */
  producer: PushProducer | null;
  /** Delivers them; null in the api role. */
  worker: PushWorker | null;
  /** Resolves when every queue connection of this process answers; rejects otherwise. */
  ready(): Promise<void>;
  /** Finishes the jobs in hand and closes the queue connections. */
  close(): Promise<void>;
}

/** Waits up to 3 s for the queue connection, so the first sends after a start are not refused; serves 503 until it is ready otherwise. */
export async function createPushServices(config: Config, keys: Keys, logger: Logger, role: PushRole, tuning: PushWorkerTuning = {}): Promise<PushServices> {
  const producer = role === 'worker' ? null : new PushProducer(config, keys, logger);
  const worker = role === 'api' ? null : new PushWorker(config, keys, logger, tuning);
  if (producer) {
    await waitForReady(producer.connection, 3000).catch(() => logger.warn('push queue connection not ready at start; sends answer 503 until it is'));
  }
  return {
    producer,
    worker,
    async ready() {
      await Promise.all([producer?.ready(), worker?.ready()]);
    },
    async close() {
      await worker?.close();
      await producer?.close();
    },
  };
}
