import { Cluster, Redis } from 'ioredis';
import { inject } from 'vitest';
import { waitForReady, type RedisClient } from '../../src/redis/connection.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    /** Set only in the `cluster` project (test/setup/redis-cluster.ts): comma list of host:port. */
    redisClusterNodes: string;
  }
}

function provided(key: 'redisUrl' | 'redisClusterNodes'): string | undefined {
  try {
    return inject(key) || undefined;
  } catch {
    // Outside a vitest worker (a child process of a test): fall through to the environment.
    return undefined;
  }
}

/** The Redis URL chosen by the global setup (test/setup/redis.ts). */
export function redisUrl(): string {
  return provided('redisUrl') ?? process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
}

/** The cluster's nodes (REDIS_CLUSTER_NODES) when the test runs in the `cluster` project, else null. */
export function redisClusterNodes(): string | null {
  return provided('redisClusterNodes') ?? null;
}

/**
 * The variables that point Versus at the tests' Redis: REDIS_URL, plus REDIS_CLUSTER_NODES in
 * the `cluster` project (for testConfig and for API processes a test spawns).
 */
export function redisEnv(): Record<string, string> {
  const nodes = redisClusterNodes();
  return nodes === null ? { REDIS_URL: redisUrl() } : { REDIS_URL: redisUrl(), REDIS_CLUSTER_NODES: nodes };
}

/** A client of the tests' Redis: a Cluster client in the `cluster` project, else a plain one. Resolves once it is ready. */
export async function testRedis(): Promise<RedisClient> {
  const nodes = redisClusterNodes();
  const client: RedisClient = nodes === null
    ? new Redis(redisUrl())
    : new Cluster(nodes.split(',').map((node) => {
        const [host, port] = [node.slice(0, node.lastIndexOf(':')), Number(node.slice(node.lastIndexOf(':') + 1))];
        return { host, port };
      }));
  await waitForReady(client, 10_000);
  return client;
}
