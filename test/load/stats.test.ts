import { describe, expect, it } from 'vitest';
import { classifyTicketReply } from '../../src/load/http.js';
import type { LoadOptions } from '../../src/load/options.js';
import { buildReport, formatProgress, formatReport } from '../../src/load/report.js';
import { LatencyHistogram, LoadStats, Tally } from '../../src/load/stats.js';
import { RATING_POLICY, Workload } from '../../src/load/workload.js';

const options: LoadOptions = {
  url: 'http://127.0.0.1:8080',
  origin: 'https://game.example',
  key: 'unused',
  model: { kind: 'concurrency', workers: 4 },
  durationMs: 2000,
  timeoutMs: 10_000,
  players: 10,
  queues: 2,
  rated: 0.5,
  cancel: 0.25,
  seed: 7,
  idPrefix: 'load-',
  json: false,
};

describe('latency histogram', () => {
  it('gives the percentiles of a known distribution to 3 significant digits', () => {
    const h = new LatencyHistogram();
    for (let ms = 1; ms <= 1000; ms++) h.recordMs(ms);
    const s = h.summary();
    expect(s.count).toBe(1000);
    expect(s.p50).toBeCloseTo(500, -0.3); // within 1 ms
    expect(Math.abs(s.p50 - 500)).toBeLessThanOrEqual(0.5);
    expect(Math.abs(s.p95 - 950)).toBeLessThanOrEqual(1);
    expect(Math.abs(s.p99 - 990)).toBeLessThanOrEqual(1);
    expect(Math.abs(s.max - 1000)).toBeLessThanOrEqual(1);
    expect(Math.abs(s.mean - 500.5)).toBeLessThanOrEqual(0.5);
  });

  it('keeps sub-millisecond resolution and never reports a percentile above the max', () => {
    const h = new LatencyHistogram();
    for (let i = 0; i < 99; i++) h.recordMs(0.25);
    h.recordMs(82.29);
    const s = h.summary();
    expect(s.p50).toBeCloseTo(0.25, 3);
    expect(s.p95).toBeCloseTo(0.25, 3);
    expect(s.max).toBeCloseTo(82.29, 1);
    expect(s.p99).toBeLessThanOrEqual(s.max);
    expect(new LatencyHistogram().summary()).toEqual({ count: 0, p50: 0, p95: 0, p99: 0, max: 0, mean: 0 });
  });
});

describe('tallies and reply classification', () => {
  it('counts by name, most frequent first', () => {
    const t = new Tally();
    for (const code of ['network', 'timeout', 'ticket_conflict', 'network', 'timeout', 'network']) t.add(code);
    expect(t.toObject()).toEqual({ network: 3, timeout: 2, ticket_conflict: 1 });
    expect(Object.keys(t.toObject())).toEqual(['network', 'timeout', 'ticket_conflict']);
    expect(t.total).toBe(6);
  });

  it('classifies replies by state, error code, status, network and timeout', () => {
    expect(classifyTicketReply({ status: 200, body: { id: 'a', state: 'waiting' } })).toEqual({ ok: true, state: 'waiting', matchId: null });
    expect(classifyTicketReply({ status: 200, body: { id: 'a', state: 'matched', match: { id: 'm1' } } })).toEqual({ ok: true, state: 'matched', matchId: 'm1' });
    expect(classifyTicketReply({ status: 200, body: { id: 'a', state: 'cancelled' } })).toEqual({ ok: true, state: 'cancelled', matchId: null });
    expect(classifyTicketReply({ status: 409, body: { error: 'ticket_conflict' } })).toEqual({ ok: false, code: 'ticket_conflict' });
    expect(classifyTicketReply({ status: 503, body: { error: 'unavailable' } })).toEqual({ ok: false, code: 'unavailable' });
    expect(classifyTicketReply({ status: 429, body: { error: 'unavailable' } })).toEqual({ ok: false, code: 'rate_limited' });
    expect(classifyTicketReply({ status: 502, body: undefined })).toEqual({ ok: false, code: 'http_502' });
    expect(classifyTicketReply({ status: 200, body: undefined })).toEqual({ ok: false, code: 'invalid_response' });
    expect(classifyTicketReply({ status: 200, body: { state: 'matched' } })).toEqual({ ok: false, code: 'invalid_response' });
    expect(classifyTicketReply({ status: null, code: 'network' })).toEqual({ ok: false, code: 'network' });
    expect(classifyTicketReply({ status: null, code: 'timeout' })).toEqual({ ok: false, code: 'timeout' });
    expect(classifyTicketReply({ status: null, code: 'too_large' })).toEqual({ ok: false, code: 'invalid_response' });
  });
});

describe('report', () => {
  function knownStats(): LoadStats {
    const stats = new LoadStats();
    // 10 admissions: 4 matched (pairs m1..m4), 3 waiting, 3 refused; latencies 1..10 ms.
    const results = [
      { ok: true, state: 'matched', matchId: 'm1' },
      { ok: true, state: 'waiting', matchId: null },
      { ok: true, state: 'matched', matchId: 'm2' },
      { ok: false, code: 'network' },
      { ok: true, state: 'waiting', matchId: null },
      { ok: true, state: 'matched', matchId: 'm3' },
      { ok: false, code: 'ticket_conflict' },
      { ok: true, state: 'waiting', matchId: null },
      { ok: false, code: 'network' },
      { ok: true, state: 'matched', matchId: 'm4' },
    ] as const;
    results.forEach((result, i) => {
      stats.admissions.sent += 1;
      stats.recordAdmission(result, i + 1);
    });
    // Two cancels: one won, one lost to pairing (its match m5 is a new pair), one timed out.
    stats.cancels.sent = 3;
    stats.recordCancel({ ok: true, state: 'cancelled', matchId: null }, 2);
    stats.recordCancel({ ok: true, state: 'matched', matchId: 'm5' }, 4);
    stats.recordCancel({ ok: false, code: 'timeout' }, 10_000);
    return stats;
  }

  it('builds the JSON report from known inputs', () => {
    const report = buildReport(knownStats(), options, { id: 'abcd1234', windowMs: 2000, elapsedMs: 2000.4 });
    expect(report.run).toEqual({
      id: 'abcd1234',
      seed: 7,
      url: 'http://127.0.0.1:8080',
      origin: 'https://game.example',
      model: 'concurrency',
      rate: null,
      maxInFlight: null,
      concurrency: 4,
      durationMs: 2000,
      timeoutMs: 10_000,
      players: 10,
      queues: 2,
      rated: 0.5,
      cancel: 0.25,
      idPrefix: 'load-',
    });
    expect(report.elapsedMs).toBe(2000);
    expect(report.admissions).toMatchObject({
      sent: 10,
      ok: 7,
      errors: 3,
      unsent: 0,
      perSecond: 3.5,
      states: { waiting: 3, matched: 4, cancelled: 0 },
      errorCodes: { network: 2, ticket_conflict: 1 },
    });
    expect(report.admissions.latencyMs.count).toBe(10);
    expect(report.admissions.latencyMs.p50).toBeCloseTo(5, 2);
    expect(report.admissions.latencyMs.max).toBeCloseTo(10, 2);
    expect(report.cancels).toMatchObject({ sent: 3, ok: 2, errors: 1, states: { cancelled: 1, matched: 1 }, errorCodes: { timeout: 1 } });
    expect(report.matches).toEqual({ pairs: 5, matchedAdmissions: 4 });
    expect(report.errors).toEqual({ network: 2, ticket_conflict: 1, timeout: 1 });
    // Round-trips as JSON (what --json prints).
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
  });

  it('formats the text report with every error by code', () => {
    const text = formatReport(buildReport(knownStats(), options, { id: 'abcd1234', windowMs: 2000, elapsedMs: 2000 }));
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe('versus load  run abcd1234  seed 7  http://127.0.0.1:8080 as https://game.example');
    expect(lines[1]).toBe('  concurrency 4 for 2.0s, 2.0s with draining; 10 players, 2 queues, rated 50%, cancel 25%');
    expect(text).toContain('admissions   10 sent   7 ok   3 errors   3.5/s\n');
    expect(text).toContain('  answered   matched 4   waiting 3   cancelled 0\n');
    expect(text).toContain('cancels      3 sent   2 ok   1 errors   (cancelled 1, matched 1)\n');
    expect(text).toContain('matches      5 pairs (4 admissions answered matched)\n');
    expect(text).toMatch(/latency ms {3}p50 5\.00 {3}p95 10\.00 {3}p99 10\.00 {3}max 10\.00 {3}mean 5\.50 {3}createTicket\n/);
    expect(text).toContain('errors       createTicket: network 2, ticket_conflict 1\n             cancelTicket: timeout 1\n');
    expect(text).not.toContain('unsent');
  });

  it('says "none" without errors, and names unsent admissions of the open model', () => {
    const stats = new LoadStats();
    stats.admissions.sent = 1;
    stats.recordAdmission({ ok: true, state: 'waiting', matchId: null }, 3);
    stats.unsent = 12;
    const rate: LoadOptions = { ...options, model: { kind: 'rate', perSecond: 100, maxInFlight: 8 } };
    const text = formatReport(buildReport(stats, rate, { id: 'r', windowMs: 1000, elapsedMs: 1000 }));
    expect(text).toContain('  rate 100/s (at most 8 in flight) for 1.0s');
    expect(text).toContain('  unsent     12 due but not sent: 8 in flight (the target rate was not reached)\n');
    expect(text).toContain('createTicket, from scheduled send\n');
    expect(text).toContain('errors       none\n');
    expect(text).not.toContain('cancelTicket\n'); // no cancel latency line without cancels
  });

  it('formats the progress line', () => {
    expect(formatProgress({ elapsedMs: 3000, sent: 120, ok: 110, errors: 2, inFlight: 8, ratePerSecond: 39.6, draining: false })).toBe(
      '   3.0s  sent 120  ok 110  errors 2  in flight 8  40/s',
    );
    expect(formatProgress({ elapsedMs: 10_000, sent: 1, ok: 1, errors: 0, inFlight: 0, ratePerSecond: 0, draining: true })).toMatch(/draining$/);
  });
});

describe('workload', () => {
  it('is a pure function of seed and index, with run-scoped names', () => {
    const a = new Workload(options, 'load-', 'run1');
    const b = new Workload(options, 'load-', 'run1');
    for (let k = 0; k < 50; k++) expect(a.admission(k)).toEqual(b.admission(k));
    const other = new Workload({ ...options, seed: 8 }, 'load-', 'run1');
    expect([...Array(50).keys()].map((k) => other.admission(k).input.player)).not.toEqual([...Array(50).keys()].map((k) => a.admission(k).input.player));
    const first = a.admission(0).input;
    expect(first.id).toBe('load-run1-t0');
    expect(first.player).toMatch(/^load-run1-p\d$/);
    expect(first.queue.key).toMatch(/^load-run1-q[01](-rated)?$/);
  });

  it('spreads admissions over players, queues, rated share and cancel share', () => {
    const w = new Workload({ ...options, players: 5, queues: 3, rated: 0.3, cancel: 0.1 }, 'x', 'r');
    const n = 20_000;
    const players = new Set<string>();
    const queues = new Set<string>();
    let rated = 0;
    let cancel = 0;
    const ids = new Set<string>();
    for (let k = 0; k < n; k++) {
      const { input, cancelIfWaiting } = w.admission(k);
      ids.add(input.id);
      players.add(input.player);
      queues.add(input.queue.key);
      if (input.rating !== undefined) {
        rated += 1;
        expect(input.queue.rating).toEqual(RATING_POLICY);
        expect(input.queue.key.endsWith('-rated')).toBe(true);
        expect(input.rating).toBe(w.rating(Number(input.player.slice('xr-p'.length))));
      } else {
        expect(input.queue.rating).toBeUndefined();
      }
      if (cancelIfWaiting) cancel += 1;
    }
    expect(ids.size).toBe(n);
    expect(players.size).toBe(5);
    expect(queues.size).toBe(6); // 3 queues, each with a rated twin
    expect(rated / n).toBeGreaterThan(0.28);
    expect(rated / n).toBeLessThan(0.32);
    expect(cancel / n).toBeGreaterThan(0.09);
    expect(cancel / n).toBeLessThan(0.11);
  });
});
