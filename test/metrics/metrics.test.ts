import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { startServer } from '../../src/http/server.js';
import { Harness, testConfig, type TestApp } from '../helpers/harness.js';
import { KNOWN, playKnownSequence, T0 } from '../helpers/known-sequence.js';
import { ticket } from '../helpers/tickets.js';
import { fetchMetrics, parseScrape, valueOf } from './prometheus.js';

/**
 * GET /metrics on the API: the per-app matchmaking numbers after a known sequence (read from
 * the stats hash the scripts keep), the same on every replica, Redis command errors, the
 * optional bearer token, and a scrape while Redis is unreachable.
 */
let h: Harness;
let app: TestApp;
let other: TestApp;

beforeAll(async () => {
  h = await Harness.start();
  app = await h.registerApp();
  other = await h.registerApp();
  await playKnownSequence(h, app);
  await h.setClock(other, T0);
  expect((await h.call(other, 'createTicket', ticket())).body.state).toBe('waiting');
});
afterAll(async () => {
  await h?.stop();
});

async function scrape(url = h.url) {
  const res = await fetchMetrics(url);
  expect(res.status).toBe(200);
  expect(res.type).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseScrape(res.text);
}

const MATCHMAKING = {
  versus_matchmaking_admissions_total: 'admissions',
  versus_matchmaking_matches_total: 'matches',
  versus_matchmaking_cancellations_total: 'cancellations',
  versus_matchmaking_expirations_total: 'expirations',
  versus_matchmaking_tombstones_total: 'tombstones',
} as const;

describe('GET /metrics: matchmaking per app', () => {
  it('shows the exact counts of a known sequence of admissions, matches, cancels, expiries and tombstones, per app', async () => {
    const s = await scrape();
    for (const [name, field] of Object.entries(MATCHMAKING)) {
      expect(s.types.get(name), name).toBe('counter');
      expect(valueOf(s, name, { app: app.origin }), name).toBe(KNOWN.events[field]);
    }
    expect(s.types.get('versus_matchmaking_waiting_tickets')).toBe('gauge');
    expect(valueOf(s, 'versus_matchmaking_waiting_tickets', { app: app.origin })).toBe(KNOWN.tickets.waiting);

    expect(valueOf(s, 'versus_matchmaking_admissions_total', { app: other.origin })).toBe(1);
    expect(valueOf(s, 'versus_matchmaking_matches_total', { app: other.origin })).toBe(0);
    expect(valueOf(s, 'versus_matchmaking_waiting_tickets', { app: other.origin })).toBe(1);
    expect(valueOf(s, 'versus_stats_up')).toBe(1);
    // Only this server's registered apps: the label set is bounded by the registry.
    const apps = new Set(s.samples.filter((x) => x.name === 'versus_matchmaking_admissions_total').map((x) => x.labels['app']));
    expect(apps).toEqual(new Set([app.origin, other.origin]));
  });

  it('follows new events at the next scrape: a match takes a waiting ticket, a cancel of an expired one counts an expiry', async () => {
    expect((await h.call(other, 'createTicket', ticket())).body.state).toBe('matched');
    const expiring = ticket({ expiresAt: T0 + 10 });
    expect((await h.call(other, 'createTicket', expiring)).body.state).toBe('waiting');
    await h.setClock(other, T0 + 10);
    expect((await h.call(other, 'cancelTicket', { id: expiring.id })).body.reason).toBe('expired');
    const s = await scrape();
    expect(valueOf(s, 'versus_matchmaking_admissions_total', { app: other.origin })).toBe(3);
    expect(valueOf(s, 'versus_matchmaking_matches_total', { app: other.origin })).toBe(1);
    expect(valueOf(s, 'versus_matchmaking_expirations_total', { app: other.origin })).toBe(1);
    expect(valueOf(s, 'versus_matchmaking_cancellations_total', { app: other.origin })).toBe(0);
    expect(valueOf(s, 'versus_matchmaking_waiting_tickets', { app: other.origin })).toBe(0);
  });

  it('is cluster-wide: a second replica on the same Redis reports the same values (max, not sum, across replicas)', async () => {
    const replica = await startServer(h.config, { port: 0, host: '127.0.0.1' });
    try {
      const [one, two] = [await scrape(), await scrape(replica.url)];
      for (const name of [...Object.keys(MATCHMAKING), 'versus_matchmaking_waiting_tickets']) {
        expect(valueOf(two, name, { app: app.origin }), name).toBe(valueOf(one, name, { app: app.origin }));
      }
    } finally {
      await replica.close();
    }
  });

  it('serves the process metrics and the push queue depth', async () => {
    const s = await scrape();
    expect(s.types.get('process_cpu_user_seconds_total')).toBe('counter');
    expect(s.types.get('nodejs_eventloop_lag_seconds')).toBe('gauge');
    for (const state of ['waiting', 'prioritized', 'active', 'delayed']) expect(valueOf(s, 'versus_push_queue_jobs', { state }), state).toBe(0);
  });
});

describe('GET /metrics: Redis command errors', () => {
  it('counts an error reply and a NOSCRIPT answer of the service connection, by kind', async () => {
    const before = await scrape();
    const count = (s: ReturnType<typeof parseScrape>, kind: string) => valueOf(s, 'versus_redis_command_errors_total', { connection: 'main', kind }) ?? 0;
    const redis = h.server.services.redis;
    const key = `${h.prefix}:metrics-test-string`;
    await redis.set(key, 'x');
    await expect(redis.hget(key, 'field')).rejects.toThrow(/WRONGTYPE/);
    await expect(redis.evalsha('0'.repeat(40), 0)).rejects.toThrow(/NOSCRIPT/);
    const after = await scrape();
    expect(count(after, 'reply') - count(before, 'reply')).toBe(1);
    expect(count(after, 'noscript') - count(before, 'noscript')).toBe(1);
    expect(count(after, 'unavailable')).toBe(count(before, 'unavailable'));
  });
});

describe('GET /metrics: METRICS_TOKEN', () => {
  const TOKEN = 'scrape-me-0123456789abcdef';

  it('with a token set, answers 401 unauthenticated without it or with another, and 200 with it', async () => {
    const guarded = await startServer(testConfig(h.prefix, { METRICS_TOKEN: TOKEN }), { port: 0, host: '127.0.0.1' });
    try {
      for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }, { authorization: `Basic ${TOKEN}` }, { authorization: `Bearer ${TOKEN}x` }]) {
        const res = await fetchMetrics(guarded.url, headers);
        expect(res.status, JSON.stringify(headers)).toBe(401);
        expect(JSON.parse(res.text)).toEqual({ error: 'unauthenticated' });
      }
      const ok = await fetchMetrics(guarded.url, { authorization: `Bearer ${TOKEN}` });
      expect(ok.status).toBe(200);
      expect(valueOf(parseScrape(ok.text), 'versus_matchmaking_admissions_total', { app: app.origin })).toBe(KNOWN.events.admissions);
    } finally {
      await guarded.close();
    }
  });

  it('without a token /metrics is open; a short or spaced token stops the process with one line', () => {
    expect(h.config.metricsToken).toBeNull();
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ METRICS_TOKEN: 'has a space in it 0123456789' })).toThrow('METRICS_TOKEN: use 16 to 256 visible ASCII characters (no spaces)');
    expect(loadConfig({ METRICS_TOKEN: TOKEN }).metricsToken).toBe(TOKEN);
  });
});

describe('GET /metrics without Redis', () => {
  it('still answers 200 with the process metrics; the cluster-wide ones are absent and versus_stats_up is 0', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as { port: number };
        probe.close(() => resolve(free));
      });
    });
    const lonely = await startServer(testConfig(h.prefix, { REDIS_URL: `redis://127.0.0.1:${port}` }), { port: 0, host: '127.0.0.1' });
    try {
      const s = await scrape(lonely.url);
      expect(valueOf(s, 'versus_stats_up')).toBe(0);
      expect(s.samples.filter((x) => x.name.startsWith('versus_matchmaking_') || x.name === 'versus_push_queue_jobs')).toEqual([]);
      expect(s.types.get('process_cpu_user_seconds_total')).toBe('counter');
      expect(valueOf(s, 'versus_redis_command_errors_total', { connection: 'main', kind: 'unavailable' })).toBeGreaterThan(0);
    } finally {
      await lonely.close();
    }
  });
});
