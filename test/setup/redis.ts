import { redisAnswers } from '../../src/redis/connection.js';
import type { TestProject } from 'vitest/node';

/**
 * Finds the Redis the tests use: REDIS_URL when set, else 127.0.0.1:6379 when it answers,
 * else a testcontainers Redis where a Docker engine runs; else it stops with one line that
 * says how to get Redis. Tests read the URL with redisUrl() (test/setup/redis-url.ts).
 */

const HOW_TO = 'No Redis for the tests: install redis-server (apt-get install redis-server) and start it, or run `docker compose up redis`, or set REDIS_URL.';

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | void> {
  const candidates = [process.env['REDIS_URL'], 'redis://127.0.0.1:6379'].filter((u): u is string => Boolean(u));
  for (const url of candidates) {
    if (await redisAnswers(url)) {
      process.env['REDIS_URL'] = url;
      project.provide('redisUrl', url);
      return;
    }
  }
  let container: { getHost(): string; getMappedPort(port: number): number; stop(): Promise<unknown> } | null = null;
  try {
    const { GenericContainer } = await import('testcontainers');
    container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
  } catch (error) {
    console.log(`testcontainers Redis skipped: ${(error as Error).message.split('\n')[0]}`);
    throw new Error(HOW_TO);
  }
  const url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
  process.env['REDIS_URL'] = url;
  project.provide('redisUrl', url);
  return async () => {
    await container?.stop();
  };
}
