import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/http/server.js';
import { Harness, testConfig, testPrefix } from '../helpers/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.stop();
});

describe('HTTP surface', () => {
  it('answers /healthz and /readyz', async () => {
    const health = await fetch(`${h.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${h.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
  });

  it('answers unknown routes and methods with JSON 404 not_found', async () => {
    for (const [method, path] of [['GET', '/nope'], ['GET', '/api/matchmaking'], ['DELETE', '/api/matchmaking']] as const) {
      const res = await fetch(`${h.url}${path}`, { method });
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({ error: 'not_found' });
    }
  });

  it('reloads scripts after SCRIPT FLUSH (NOSCRIPT) without a restart', async () => {
    const app = await h.registerApp();
    await h.redis.script('FLUSH');
    const res = await h.call(app, 'listTickets');
    expect(res.status).toBe(200);
  });
});

describe('Redis unreachable', () => {
  it('answers 503 unavailable instead of hanging, and /readyz says so', async () => {
    // Port 1 on loopback: nothing listens there.
    const config = testConfig(testPrefix(), { REDIS_URL: 'redis://127.0.0.1:1' });
    const server = await startServer(config, { port: 0, host: '127.0.0.1' });
    try {
      const signal = AbortSignal.timeout(10_000); // a guard against hanging, not a speed assertion
      const res = await fetch(`${server.url}/api/matchmaking`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await (await h.registerApp()).token()}` },
        body: JSON.stringify({ operation: 'listTickets' }),
        signal,
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ error: 'unavailable' });
      const ready = await fetch(`${server.url}/readyz`, { signal });
      expect(ready.status).toBe(503);
      expect((await fetch(`${server.url}/healthz`, { signal })).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});
