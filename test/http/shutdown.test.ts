import { request } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppRegistry } from '../../src/apps/registry.js';
import { Keys } from '../../src/redis/keys.js';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { spawnApi } from '../helpers/processes.js';
import { redisUrl } from '../setup/redis-url.js';
import { Harness } from '../helpers/harness.js';

const prefix = testPrefix();
let redis: Redis;
let harness: Harness;

beforeAll(async () => {
  redis = new Redis(redisUrl());
  // A harness only to register an app under the child's prefix.
  harness = await Harness.start({ VERSUS_KEY_PREFIX: prefix });
});
afterAll(async () => {
  await harness.stop();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('SIGTERM', () => {
  it('stops accepting, finishes the in-flight request, and exits 0', async () => {
    const app = await harness.registerApp();
    const api = await spawnApi({ REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, LOG_LEVEL: 'silent' });
    const url = new URL(`${api.url}/api/matchmaking`);
    const body = JSON.stringify({ operation: 'createTicket', input: { id: 'in-flight', player: 'p', queue: { key: 'q', size: 2 }, payload: null } });
    const token = await app.token();

    // Send the headers and half of the body, so the request is in flight when the signal lands.
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization: `Bearer ${token}` },
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.write(body.slice(0, 40));
      req.on('socket', (socket) => {
        socket.once('connect', () => {
          // The server has the connection; now ask it to stop, then finish the request.
          const exited = api.stop();
          setTimeout(() => req.end(body.slice(40)), 200);
          void exited;
        });
      });
    });
    const { status, text } = await answer;
    expect(status).toBe(200);
    expect(JSON.parse(text)).toMatchObject({ id: 'in-flight', state: 'waiting' });
    expect(await api.stop()).toBe(0);
    // New connections are refused once it stopped.
    await expect(fetch(`${api.url}/healthz`)).rejects.toThrow();
    // The admission it acknowledged is stored.
    const stored = await new AppRegistry(redis, new Keys(prefix), 0).fetch(app.origin);
    expect(stored?.origin).toBe(app.origin);
    expect(await redis.hget(new Keys(prefix).ticket(app.appId, 'in-flight'), 's')).toBe('w');
  });
});
