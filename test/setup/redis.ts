import { redisAnswers } from '../../src/redis/connection.js';
import type { TestProject } from 'vitest/node';

/**
 * Finds the Redis the tests use: REDIS_URL when set and it answers PING, else 127.0.0.1:6379
 * when it answers, else a testcontainers Redis where a Docker engine runs; else it stops with
 * one line that says how to get Redis. Tests read the URL with redisUrl()
 * (test/setup/redis-url.ts); child processes of tests get it through REDIS_URL.
 */

const LOCAL = 'redis://127.0.0.1:6379';
const HOW_TO =
  'No Redis for the tests: install redis-server (apt-get install redis-server) and start it, or run `docker compose up redis`, or set REDIS_URL.';

/** The URL without its password, for log lines. */
function shown(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

function use(project: TestProject, url: string): void {
  process.env['REDIS_URL'] = url;
  project.provide('redisUrl', url);
}

/** An Error whose report is its one line: no stack, no code frame of this file. */
function oneLine(message: string): Error {
  const error = new Error(message);
  error.stack = `Error: ${message}`;
  return error;
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | void> {
  const fromEnv = process.env['REDIS_URL'];
  if (fromEnv) {
    if (await redisAnswers(fromEnv)) return use(project, fromEnv);
    console.log(`REDIS_URL=${shown(fromEnv)} does not answer PING; trying ${LOCAL}`);
  }
  if (fromEnv !== LOCAL && (await redisAnswers(LOCAL))) return use(project, LOCAL);

  let container: { getHost(): string; getMappedPort(port: number): number; stop(): Promise<unknown> };
  try {
    const { GenericContainer } = await import('testcontainers');
    container = await new GenericContainer('redis:7-alpine').withExposedPorts(6379).start();
  } catch (error) {
    console.log(`testcontainers Redis skipped: ${String((error as Error)?.message ?? error).split('\n')[0]}`);
    throw oneLine(HOW_TO);
  }
  const url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
  if (!(await redisAnswers(url))) {
    await container.stop().catch(() => {});
    throw oneLine(`The testcontainers Redis at ${url} does not answer PING. ${HOW_TO}`);
  }
  console.log(`Tests use a testcontainers Redis at ${url}`);
  use(project, url);
  return async () => {
    await container.stop();
  };
}
