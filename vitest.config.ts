import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Finds a Redis (REDIS_URL, 127.0.0.1:6379, testcontainers) or stops with one line.
    globalSetup: ['test/setup/redis.ts'],
    pool: 'forks',
    // Modest parallelism: the machines that run this have two cores, and many tests spawn
    // child processes (API servers, the CLI) of their own; more workers only made it slower.
    maxWorkers: Math.max(1, Math.min(2, availableParallelism())),
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
