/**
 * Shared pieces of the fault tests: one matchmaking request that never throws (a network
 * failure or a missing answer is an outcome of its own), a full app-wide listing, an app
 * registered straight into a given Redis, and bounded polling.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { AppRegistry } from '../../src/apps/registry.js';
import { appIdOf, Keys } from '../../src/redis/keys.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { signToken, testPrefix, verifiedAppRecord } from '../helpers/harness.js';
import { spawnApi, type SpawnedApi } from '../helpers/processes.js';
import { directClient, RedisServer } from '../helpers/redis-server.js';

/** What a client got: an HTTP answer, or no answer at all (connection refused or reset, or no reply before the guard). */
export type Reply = { status: number; body: unknown; text: string } | { failure: string };

/**
 * Generous: a guard against a hang, never a speed assertion. The API's own Redis bounds
 * (1 s connect, 1.5 s per command) answer far sooner.
 */
export const GUARD_MS = 5000;

export function answered(reply: Reply): reply is { status: number; body: unknown; text: string } {
  return 'status' in reply;
}

export async function send(baseUrl: string, path: string, init: { token?: string; body?: unknown; method?: string } = {}): Promise<Reply> {
  try {
    const res = await fetch(`${baseUrl}${path}`, {
      method: init.method ?? 'POST',
      headers: { 'content-type': 'application/json', ...(init.token ? { authorization: `Bearer ${init.token}` } : {}) },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(GUARD_MS),
    });
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text };
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return { failure: `${(error as Error).name}: ${(error as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ''}` };
  }
}

/** POST /api/matchmaking. */
export function operate(baseUrl: string, token: string, operation: string, input?: unknown): Promise<Reply> {
  return send(baseUrl, '/api/matchmaking', { token, body: input === undefined ? { operation } : { operation, input } });
}

/** Every ticket of the app, page by page; throws on anything but 200. */
export async function listAll(baseUrl: string, token: string): Promise<unknown[]> {
  const tickets: unknown[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const reply = await operate(baseUrl, token, 'listTickets', cursor === null ? {} : { cursor });
    if (!answered(reply) || reply.status !== 200) throw new Error(`listTickets page ${pages}: ${JSON.stringify(reply)}`);
    const page = reply.body as { tickets: unknown[]; nextCursor: string | null };
    tickets.push(...page.tickets);
    cursor = page.nextCursor;
    if (cursor === null) return tickets;
  }
  throw new Error('listTickets: more than 1000 pages');
}

export interface RegisteredApp {
  origin: string;
  appId: string;
  token(): Promise<string>;
}

/** A verified app stored straight into `redis` under `prefix` (what `versus apps register` would store). */
export async function registerApp(redis: Redis, prefix: string, name: string): Promise<RegisteredApp> {
  const keyPair = generateKeyPair();
  const record = verifiedAppRecord(keyPair.publicKey, { name, push: false });
  await new AppRegistry(redis, new Keys(prefix), 0).put(record);
  return { origin: record.origin, appId: appIdOf(record.origin), token: () => signToken(keyPair.secretKey, record.origin) };
}

/** Polls `check` every 100 ms until it is true; throws after `ms` with `what` in the message. */
/**
 * The setting of most fault tests: a redis-server of the test's own (started with
 * `redisArgs`), an app registered in it, and one API process on it with the test clock.
 * Whatever fails half way is stopped before the error is thrown.
 */
export async function apiOnOwnRedis(prefix: string, appName: string, redisArgs: string[] = []): Promise<{ server: RedisServer; app: RegisteredApp; api: SpawnedApi }> {
  const server = await RedisServer.start(redisArgs);
  try {
    const admin = directClient(server.url);
    let app: RegisteredApp;
    try {
      await admin.connect();
      app = await registerApp(admin, prefix, appName);
    } finally {
      admin.disconnect();
    }
    const api = await spawnApi({ REDIS_URL: server.url, VERSUS_KEY_PREFIX: prefix, VERSUS_TEST_CLOCK: '1', LOG_LEVEL: 'silent' });
    return { server, app, api };
  } catch (error) {
    await server.remove();
    throw error;
  }
}

/** What ownRedisSuite gives a describe block's tests (set once its beforeAll has run). */
export interface OwnRedisSuite {
  prefix: string;
  server: RedisServer;
  app: RegisteredApp;
  api: SpawnedApi;
  /** A direct client of the server, for the test's own checks (a test may replace it). */
  admin: Redis;
}

/**
 * apiOnOwnRedis for a whole describe block, with a direct admin client: started before its
 * tests, and stopped after them (resumed first, should a test have left it frozen).
 */
export function ownRedisSuite(appName: string, redisArgs: string[] = []): OwnRedisSuite {
  const suite = { prefix: testPrefix() } as OwnRedisSuite;
  beforeAll(async () => {
    Object.assign(suite, await apiOnOwnRedis(suite.prefix, appName, redisArgs));
    suite.admin = directClient(suite.server.url);
    await suite.admin.connect();
  }, 60_000);
  afterAll(async () => {
    suite.admin?.disconnect();
    suite.server?.resume();
    await suite.api?.stop();
    await suite.server?.remove();
  }, 30_000);
  return suite;
}

export async function waitUntil(what: string, check: () => Promise<boolean> | boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
}
