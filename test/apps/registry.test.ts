import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { AppRegistry, DEFAULT_USER_DAYS, type AppRecord } from '../../src/apps/registry.js';
import { appIdOf, Keys } from '../../src/redis/keys.js';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { redisUrl } from '../setup/redis-url.js';

const prefix = testPrefix();
const keys = new Keys(prefix);
let redis: Redis;

const record = (origin: string, change: Partial<AppRecord> = {}): AppRecord => ({
  origin,
  appId: appIdOf(origin),
  name: 'Cached',
  appKey: null,
  push: 'LegacyKey1111111111111111111111111111111111',
  environment: 'staging',
  verified: true,
  manifest: 'jws',
  verifiedAt: 123,
  pushMuted: false,
  audienceDays: 7,
  userDays: DEFAULT_USER_DAYS,
  ...change,
});

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('AppRegistry', () => {
  it('stores and reads back every field of a record', async () => {
    const registry = new AppRegistry(redis, keys, 0);
    const stored = record('https://fields.example');
    await registry.put(stored);
    expect(await registry.fetch(stored.origin)).toEqual(stored);
    expect((await registry.list()).map((r) => r.origin)).toContain(stored.origin);
    expect(await registry.fetch('https://unknown.example')).toBeNull();
  });

  it('serves a replica from its cache, and a change made elsewhere reaches it once the cache time passes', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const origin = 'https://cache.example';
    const operator = new AppRegistry(redis, keys, 0);
    const replica = new AppRegistry(redis, keys, 2000);
    await operator.put(record(origin));
    expect((await replica.get(origin))?.verified).toBe(true);

    await operator.update(origin, { verified: false });
    vi.advanceTimersByTime(1999);
    expect((await replica.get(origin))?.verified).toBe(true); // still cached: no round trip
    vi.advanceTimersByTime(2);
    expect((await replica.get(origin))?.verified).toBe(false);
  });

  it('caches unknown origins too, briefly', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const origin = 'https://later.example';
    const replica = new AppRegistry(redis, keys, 2000);
    expect(await replica.get(origin)).toBeNull();
    await new AppRegistry(redis, keys, 0).put(record(origin));
    expect(await replica.get(origin)).toBeNull();
    vi.advanceTimersByTime(2001);
    expect((await replica.get(origin))?.origin).toBe(origin);
  });
});
