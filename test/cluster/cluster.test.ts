import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/http/server.js';
import { masters } from '../../src/redis/connection.js';
import { appIdOf } from '../../src/redis/keys.js';
import { loadScript } from '../../src/redis/scripts.js';
import { Harness, scanKeys, testConfig, testPrefix, type TestApp } from '../helpers/harness.js';
import { ticket } from '../helpers/tickets.js';
import { redisClusterNodes } from '../setup/redis-url.js';

/**
 * Runs in the `cluster` project only (vitest.config.ts): a local three-master Redis Cluster
 * (test/setup/cluster.ts). Each app's keys carry the hash tag `{<appId>}`, so the whole app
 * lives in one slot, on one master, and its scripts run there; apps spread over the masters.
 */

let h: Harness;

beforeAll(async () => {
  expect(redisClusterNodes(), 'the cluster project provides the node list').not.toBeNull();
  h = await Harness.start();
});
afterAll(async () => {
  await h?.stop();
});

const nodeName = (node: Redis) => `${node.options.host}:${node.options.port}`;

async function keySlot(key: string): Promise<number> {
  return Number(await h.redis.call('CLUSTER', 'KEYSLOT', key));
}

/** slot -> `host:port` of the master serving it, from CLUSTER SLOTS. */
async function slotOwners(): Promise<Map<number, string>> {
  const ranges = (await h.redis.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]], ...unknown[]]>;
  const owners = new Map<number, string>();
  for (const [start, end, [host, port]] of ranges) {
    for (let slot = start; slot <= end; slot += 1) owners.set(slot, `${host}:${port}`);
  }
  return owners;
}

/** The master serving an app's slot, found from the hash tag of its scope key (never hard-coded). */
async function placeOf(appId: string, owners: Map<number, string>): Promise<{ slot: number; master: string }> {
  const slot = await keySlot(h.keys.appScope(appId));
  return { slot, master: owners.get(slot)! };
}

/** Every key of this test's prefix that one master holds and that carries the app's hash tag. */
async function appKeysOn(node: Redis, appId: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', `${h.prefix}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys.filter((key) => key.includes(`{${appId}}`)));
  } while (cursor !== '0');
  return found.sort();
}

async function pairUp(app: TestApp): Promise<{ ids: [string, string]; first: any; second: any }> {
  const a = ticket({ player: 'alice' });
  const b = ticket({ player: 'bob' });
  const first = await h.call(app, 'createTicket', a);
  const second = await h.call(app, 'createTicket', b);
  return { ids: [a.id, b.id], first, second };
}

it('/readyz is ready: the cluster answers and the scripts are loaded on every master', async () => {
  expect((await fetch(`${h.url}/readyz`)).status).toBe(200);
  const sha = loadScript('listTickets').sha;
  expect(h.server.services.matchmaking.scriptsLoaded).toBe(true);
  for (const node of masters(h.redis)) expect(await node.script('EXISTS', sha)).toEqual([1]);
});

describe('two apps on two masters', () => {
  let apps: Array<{ app: TestApp; slot: number; master: string; ids: string[] }> = [];

  beforeAll(async () => {
    const owners = await slotOwners();
    const nodes = masters(h.redis);
    expect(new Set(owners.values()).size).toBe(3);
    expect(nodes.map(nodeName).sort()).toEqual([...new Set(owners.values())].sort());
    // Origins are drawn until the second app's slot is served by another master than the first's.
    const base = randomUUID().slice(0, 8);
    const chosen: Array<{ origin: string; slot: number; master: string }> = [];
    for (let i = 0; chosen.length < 2; i += 1) {
      if (i >= 200) throw new Error('no two origins on different masters among 200 candidates');
      const origin = `https://spread-${base}-${i}.example`;
      const place = await placeOf(appIdOf(origin), owners);
      if (chosen.every((c) => c.master !== place.master)) chosen.push({ origin, ...place });
    }
    apps = [];
    for (const { origin, slot, master } of chosen) apps.push({ app: await h.registerApp({ origin }), slot, master, ids: [] });
  });

  it('every key an app has (record, scope, tickets, clock) hashes to the app\'s one slot', async () => {
    for (const { app, slot } of apps) {
      const names = [h.keys.appRecord(app.origin), h.keys.appScope(app.appId), h.keys.ticket(app.appId, 'x'), h.keys.testClock(app.appId), h.keys.pushVisitors(app.appId)];
      expect(await Promise.all(names.map(keySlot))).toEqual(names.map(() => slot));
    }
    expect(apps[0]!.slot).not.toBe(apps[1]!.slot);
  });

  it('creates and pairs tickets of both apps through the API; each app\'s keys live on its own master only', async () => {
    for (const entry of apps) {
      const { app } = entry;
      const { ids, first, second } = await pairUp(app);
      entry.ids = ids;
      expect(first).toMatchObject({ status: 200, body: { state: 'waiting' } });
      expect(second).toMatchObject({ status: 200, body: { state: 'matched' } });
      expect(second.body.match.tickets.map((t: any) => t.input.id)).toEqual(ids);
      const listed = await h.call(app, 'listTickets', {});
      expect(listed.status).toBe(200);
      expect(listed.body.tickets.map((t: any) => t.state)).toEqual(['matched', 'matched']);
    }

    const nodes = masters(h.redis);
    for (const { app, slot, master, ids } of apps) {
      const home = nodes.find((node) => nodeName(node) === master)!;
      const homeKeys = await appKeysOn(home, app.appId);
      // The record, the sequence, the index, both tickets and the players' indexes at least.
      expect(homeKeys).toEqual(expect.arrayContaining([h.keys.appRecord(app.origin), h.keys.ticket(app.appId, ids[0]!), h.keys.ticket(app.appId, ids[1]!)]));
      expect(homeKeys.length).toBeGreaterThanOrEqual(6);
      // Asked directly (no redirection), the home master has the ticket; the slot counts them all.
      expect(await home.exists(h.keys.ticket(app.appId, ids[1]!))).toBe(1);
      expect(Number(await home.call('CLUSTER', 'COUNTKEYSINSLOT', slot))).toBeGreaterThanOrEqual(homeKeys.length);
      for (const other of nodes.filter((node) => node !== home)) {
        expect(await appKeysOn(other, app.appId), `${app.appId} keys on ${nodeName(other)}`).toEqual([]);
        expect(Number(await other.call('CLUSTER', 'COUNTKEYSINSLOT', slot))).toBe(0);
      }
    }
    expect(apps[0]!.master).not.toBe(apps[1]!.master);
  });

  it('survives SCRIPT FLUSH on every master: the next requests run the scripts from source, which caches them again', async () => {
    const nodes = masters(h.redis);
    const sha = loadScript('createTicket').sha;
    for (const node of nodes) {
      await node.script('FLUSH');
      expect(await node.script('EXISTS', sha)).toEqual([0]);
    }
    for (const { app, master } of apps) {
      const t = ticket({ player: 'carol' });
      expect(await h.call(app, 'createTicket', t)).toMatchObject({ status: 200, body: { state: 'waiting' } });
      expect(await h.call(app, 'cancelTicket', { id: t.id })).toMatchObject({ status: 200, body: { state: 'cancelled' } });
      const listed = await h.call(app, 'listTickets', { id: t.id });
      expect(listed).toMatchObject({ status: 200 });
      expect(listed.body.tickets).toHaveLength(1);
      const home = nodes.find((node) => nodeName(node) === master)!;
      expect(await home.script('EXISTS', sha)).toEqual([1]);
    }
  });
});

describe('key layout', () => {
  it('every key the matchmaking scripts and the registry wrote is tagged with its app (the queue with {bull}); only the apps index is not', async () => {
    const apps = await h.registry.list();
    expect(apps.length).toBeGreaterThanOrEqual(2);
    const tags = new Set([...apps.map((app) => `{${app.appId}}`), '{bull}']);
    const keys = await scanKeys(h.redis, `${h.prefix}:*`);
    const stray = keys.filter((key) => ![...tags].some((tag) => key.includes(tag)));
    expect(stray).toEqual([h.keys.appsIndex()]);
  });
});

describe('a Redis Cluster that does not answer', () => {
  it('makes the API answer 503 unavailable (not 500), and /readyz says so', async () => {
    // A loopback port nothing listens on: bound, then released.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as { port: number };
        probe.close(() => resolve(free));
      });
    });
    const down = await startServer(testConfig(testPrefix(), { REDIS_CLUSTER_NODES: `127.0.0.1:${port}` }), { port: 0, host: '127.0.0.1' });
    try {
      const app = await h.registerApp();
      const response = await fetch(`${down.url}/api/matchmaking`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await app.token()}` },
        body: JSON.stringify({ operation: 'listTickets', input: {} }),
      });
      expect(response.status).toBe(503);
      expect(await response.json()).toEqual({ error: 'unavailable' });
      expect((await fetch(`${down.url}/readyz`)).status).toBe(503);
    } finally {
      await down.close();
    }
  });
});
