import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/** Tests that run only in the `cluster` project: they need a Redis Cluster. */
const CLUSTER_ONLY = ['test/cluster/**/*.test.ts'];

export default defineConfig({
  test: {
    pool: 'forks',
    // Modest parallelism: the machines that run this have two cores, and many tests spawn
    // child processes (API servers, the CLI) of their own; more workers only made it slower.
    maxWorkers: Math.max(1, Math.min(2, availableParallelism())),
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'redis',
          include: ['test/**/*.test.ts'],
          exclude: CLUSTER_ONLY,
          // Finds a Redis (REDIS_URL, 127.0.0.1:6379, testcontainers) or stops with one line.
          globalSetup: ['test/setup/redis.ts'],
        },
      },
      {
        // The matchmaking integration suite again, against a local three-master Redis
        // Cluster started from the redis-server binary (test/setup/cluster.ts), plus the
        // cluster's own tests. Helpers switch to REDIS_CLUSTER_NODES and cluster clients
        // when the setup provides `redisClusterNodes` (test/setup/redis-url.ts).
        extends: true,
        test: {
          name: 'cluster',
          include: ['test/matchmaking/**/*.test.ts', ...CLUSTER_ONLY],
          // These drive MatchmakingStore through standalone ioredis clients (the cost test on a
          // redis-server of its own) and exercise pairing logic only, which does not depend on
          // where the app's slot lives.
          exclude: ['test/matchmaking/pairing.property.test.ts', 'test/matchmaking/pairing-cost.test.ts'],
          globalSetup: ['test/setup/redis-cluster.ts'],
        },
      },
    ],
  },
});
