import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config.js';

export type RedisClient = Redis | Cluster;

/** Bounds that make a request fail fast (then 503) instead of queueing while Redis is away. */
const FAIL_FAST: RedisOptions = {
  enableOfflineQueue: false,
  connectTimeout: 1000,
  commandTimeout: 1500,
  maxRetriesPerRequest: 0,
  retryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
};

export interface ConnectOptions {
  /** Connection name shown by CLIENT LIST. */
  name?: string;
  /** BullMQ wants blocking commands without per-command limits and with an offline queue. */
  forBullmq?: boolean;
}

export function createRedis(config: Config, options: ConnectOptions = {}): RedisClient {
  const base: RedisOptions = options.forBullmq
    ? { maxRetriesPerRequest: null, enableOfflineQueue: true, retryStrategy: (n: number) => Math.min(100 * n, 1000) }
    : { ...FAIL_FAST };
  if (options.name) base.connectionName = options.name;
  if (config.redisClusterNodes) {
    return new Cluster(config.redisClusterNodes, {
      redisOptions: base,
      enableOfflineQueue: base.enableOfflineQueue ?? false,
      clusterRetryStrategy: (n: number) => Math.min(100 * n, 1000),
      slotsRefreshTimeout: 1000,
      scaleReads: 'master',
    });
  }
  return new Redis(config.redisUrl, base);
}

/** Resolves once the client is ready, or rejects after `timeoutMs`. */
export function waitForReady(client: RedisClient, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis did not become ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
    };
    client.on('ready', onReady);
  });
}

/**
 * Redis failures (down, timed out, refused, or BUSY: running another client's script past
 * busy-reply-threshold) that mean "unavailable" rather than a bug. The
 * cluster client words its own: "Cluster isn't ready and enableOfflineQueue options is false"
 * while no slot map is known, "Cluster is disconnected", "Node is disconnected", "Too many
 * Cluster redirections" while slots move.
 */
export function isRedisUnavailableError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const text = `${error.name} ${error.message}`;
  return /Connection is closed|Stream isn't writeable|Command timed out|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|MaxRetriesPerRequest|Reached the max retries|LOADING|CLUSTERDOWN|TRYAGAIN|None of startup nodes|Failed to refresh slots|MASTERDOWN|READONLY|NOSCRIPT|BUSY Redis is busy|Cluster isn't ready|Cluster is (disconnected|disconnecting|ended)|Node is disconnected|Too many Cluster redirections/.test(text);
}

/**
 * The master nodes' own connections (every node of a cluster that serves slots), or the one
 * client. A cluster client knows its masters only once its slot map is loaded: empty before.
 */
export function masters(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/** True when a Redis answers PING at `url` within about a second and a half. */
export async function redisAnswers(url: string): Promise<boolean> {
  const probe = new Redis(url, { lazyConnect: true, connectTimeout: 1500, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}
