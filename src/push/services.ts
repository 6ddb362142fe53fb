import type { Logger } from 'pino';
import type { Config } from '../config.js';
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

export function createPushServices(config: Config, keys: Keys, logger: Logger, role: PushRole, tuning: PushWorkerTuning = {}): PushServices {
  const producer = role === 'worker' ? null : new PushProducer(config, keys, logger);
  const worker = role === 'api' ? null : new PushWorker(config, keys, logger, tuning);
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
