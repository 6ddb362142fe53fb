/**
 * Three API processes sharing one Redis and one key prefix, serving three apps, hammered
 * concurrently with admissions to unrated and rated queues (some with cutoffs, while each
 * app's test clock moves forward), cancel-versus-join races, identical and conflicting
 * retries and queue-policy conflicts; each app's final app-wide listing and every recorded
 * response are then checked against the spec's invariants (test/helpers/invariants.ts).
 * The checker's own tests come first: it must be able to fail.
 */
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppRegistry } from '../../src/apps/registry.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { Keys } from '../../src/redis/keys.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import type { Json, TicketInput } from '../../src/shared/matchmaking-types.js';
import { deleteKeys, signToken, testPrefix, verifiedAppRecord } from '../helpers/harness.js';
import { checkInvariants, formatViolations, type Observation, type Rule } from '../helpers/invariants.js';
import { spawnApi, type SpawnedApi } from '../helpers/processes.js';
import { redisEnv, testRedis } from '../setup/redis-url.js';

// ---------------------------------------------------------------------------------------
// The checker must be able to fail.
// ---------------------------------------------------------------------------------------

describe('invariant checker', () => {
  const q = { key: 'duel', size: 2 as const };
  const input = (id: string, player: string, payload: Json): TicketInput => ({ id, player, queue: q, payload });
  const adm = (i: TicketInput, createdAt: number, payload: Json = i.payload) => ({ input: i, createdAt, payload });
  const pair = (matchId: string, a: TicketInput, b: TicketInput, t: number) => {
    const match = { id: matchId, queue: 'duel', matchedAt: t + 1, payload: a.payload, tickets: [adm(a, t, a.payload), adm(b, t + 1, a.payload)] };
    return [
      { id: a.id, state: 'matched', admission: match.tickets[0], match },
      { id: b.id, state: 'matched', admission: match.tickets[1], match },
    ];
  };
  const rules = (violations: Array<{ rule: Rule }>) => new Set(violations.map((v) => v.rule));

  it('accepts a consistent listing', () => {
    const a = input('a', 'p1', { seed: 1 });
    const b = input('b', 'p2', { seed: 2 });
    const c = input('c', 'p3', { seed: 3 });
    const listing = [...pair('m1', a, b, 10), { id: 'c', state: 'waiting', admission: adm(c, 20) }];
    const observations: Observation[] = [
      { operation: 'createTicket', input: b, status: 200, body: listing[1] },
      { operation: 'cancelTicket', input: { id: 'a' }, status: 200, body: listing[0] },
    ];
    expect(checkInvariants(listing, observations)).toEqual([]);
  });

  it('reports a ticket claimed by two matches, a self-match, a payload swap, stray waiting pairs and bad answers', () => {
    const a = input('a', 'p1', { seed: 1 });
    const b = input('b', 'p2', { seed: 2 });
    const c = input('c', 'p3', { seed: 3 });
    const d = input('d', 'p4', { seed: 4 });
    const e = input('e', 'p4', { seed: 5 });
    const w1 = input('w1', 'p5', { seed: 6 });
    const w2 = input('w2', 'p6', { seed: 7 });
    const [ma, mb] = pair('m1', a, b, 10);
    const [, mc] = pair('m2', a, c, 10); // a is claimed again by m2, with c
    const [md, me] = pair('m3', d, e, 30); // d and e are the same player
    const swapped = pair('m4', input('f', 'p7', { seed: 8 }), input('g', 'p8', { seed: 9 }), 40);
    // One side reports the joiner's proposal as the match payload.
    swapped[0] = { ...swapped[0]!, match: { ...structuredClone(swapped[0]!.match), payload: { seed: 9 } } };
    const listing = [
      ma, mb, mc, md, me, ...swapped,
      { id: 'w1', state: 'waiting', admission: adm(w1, 50) },
      { id: 'w2', state: 'waiting', admission: adm(w2, 51) },
    ];
    const observations: Observation[] = [
      { operation: 'cancelTicket', input: { id: 'w1' }, status: 200, body: listing[7] }, // cancel answered waiting
      { operation: 'cancelTicket', input: { id: 'b' }, status: 200, body: { id: 'b', state: 'cancelled', admission: adm(b, 11), reason: 'requested', cancelledAt: 12 } },
      { operation: 'createTicket', input: w2, status: 500, body: { error: 'internal' } },
    ];
    const found = rules(checkInvariants(listing, observations));
    for (const rule of ['one-match', 'self-match', 'match-payload', 'match-identical', 'waiting-pair', 'cancel-response', 'status'] as const) {
      expect(found, rule).toContain(rule);
    }
  });

  it('reports a match with three tickets and a matched ticket its partner does not know', () => {
    const a = input('a', 'p1', 1);
    const b = input('b', 'p2', 1);
    const c = input('c', 'p3', 1);
    const match = { id: 'm1', queue: 'duel', matchedAt: 5, payload: 1, tickets: [adm(a, 1), adm(b, 2), adm(c, 3)] };
    const listing = [
      { id: 'a', state: 'matched', admission: adm(a, 1), match },
      { id: 'b', state: 'waiting', admission: adm(b, 2) },
    ];
    const found = rules(checkInvariants(listing, []));
    expect(found).toContain('match-size');
    expect(found).toContain('match-membership');
  });

  // --- cutoffs, rating bands, conflicts, pairing order ---------------------------------
  const R = { initial: 10, widenPerSecond: 20, max: 50 };
  const rq = { key: 'ranked', size: 2 as const, rating: R };
  const rated = (id: string, player: string, rating: number, extra: Partial<TicketInput> = {}): TicketInput => ({ id, player, queue: rq, payload: id, rating, ...extra });
  /** A match of waiting `a` (admitted at ta) and joining `b` (admitted and matched at tb). */
  const matchOf = (matchId: string, a: TicketInput, ta: number, b: TicketInput, tb: number) => {
    const match = { id: matchId, queue: a.queue.key, matchedAt: tb, payload: a.payload, tickets: [adm(a, ta), adm(b, tb, a.payload)] };
    return [
      { id: a.id, state: 'matched', admission: match.tickets[0], match },
      { id: b.id, state: 'matched', admission: match.tickets[1], match },
    ];
  };
  const waitingAt = (i: TicketInput, t: number) => ({ id: i.id, state: 'waiting', admission: adm(i, t) });
  const expiredAt = (i: TicketInput, t: number, at: number) => ({ id: i.id, state: 'cancelled', admission: adm(i, t), reason: 'expired', cancelledAt: at });

  it('accepts rated matches on the band edge, respected cutoffs, justified conflicts and incompatible waiting tickets', () => {
    const w = rated('w', 'p1', 1000, { expiresAt: 5000 });
    const j = rated('j', 'p2', 1030); // band of w at 2000: 10 + 20 * 1 = 30, the gap exactly
    const capped = rated('c1', 'p3', 2000);
    const late = rated('c2', 'p4', 2050); // 9 s later the band is capped at 50: the gap exactly
    const x = rated('x', 'p5', 1500);
    const y = rated('y', 'p6', 1000); // x's band at 3500 is 20, far from 500
    const e = input('e', 'p7', 'e');
    const eInput = { ...e, expiresAt: 4000 };
    const gone = input('gone', 'p8', 'g');
    const goneInput = { ...gone, expiresAt: 100 }; // past its cutoff on arrival
    const [mw, mj] = matchOf('m1', w, 1000, j, 2000);
    const [mc, ml] = matchOf('m2', capped, 1000, late, 10_000);
    // Creation order: w, capped, j, x, y, e, gone, late.
    const listing = [mw, mc, mj, waitingAt(x, 3000), waitingAt(y, 3500), expiredAt(eInput, 3600, 4000), expiredAt(goneInput, 3700, 3700), ml];
    const observations: Observation[] = [
      { operation: 'createTicket', input: j, status: 200, body: mj },
      { operation: 'createTicket', input: { ...j, payload: 'other' }, status: 409, body: { error: 'ticket_conflict' } },
      { operation: 'createTicket', input: rated('z', 'p9', 1, { queue: { ...rq, rating: { initial: 1, widenPerSecond: 1 } } }), status: 409, body: { error: 'queue_conflict' } },
      { operation: 'createTicket', input: goneInput, status: 200, body: listing[6] },
    ];
    expect(checkInvariants(listing, observations, { listedAt: 20_000 })).toEqual([]);
  });

  it('reports a match at or past a cutoff, an expiry before the cutoff, and a ticket listed waiting past it', () => {
    const a = { ...input('a', 'p1', 1), expiresAt: 2000 };
    const b = input('b', 'p2', 2);
    expect(rules(checkInvariants(matchOf('m1', a, 1000, b, 2000), []))).toEqual(new Set(['cutoff'])); // the waiting side's cutoff
    const c = input('c', 'p3', 3);
    const d = { ...input('d', 'p4', 4), expiresAt: 3000 };
    expect(rules(checkInvariants(matchOf('m2', c, 1000, d, 3000), []))).toEqual(new Set(['cutoff'])); // the joining side's
    expect(rules(checkInvariants([expiredAt(a, 1000, 1999)], []))).toEqual(new Set(['cutoff']));
    expect(rules(checkInvariants([expiredAt(b, 1000, 5000)], []))).toEqual(new Set(['cutoff'])); // expired without a cutoff
    expect(rules(checkInvariants([waitingAt(a, 1000)], [], { listedAt: 2000 }))).toEqual(new Set(['cutoff']));
    expect(rules(checkInvariants([waitingAt(a, 2000)], []))).toEqual(new Set(['cutoff'])); // admitted although past it
    expect(checkInvariants([waitingAt(a, 1000)], [], { listedAt: 1999 })).toEqual([]);
  });

  it('reports a rated match outside the band (also the capped band) and a rated ticket paired with an unrated one', () => {
    const w = rated('w', 'p1', 1000);
    expect(rules(checkInvariants(matchOf('m1', w, 1000, rated('j', 'p2', 1030.5), 2000), []))).toEqual(new Set(['tolerance']));
    expect(rules(checkInvariants(matchOf('m2', w, 1000, rated('k', 'p3', 1051), 60_000), []))).toEqual(new Set(['tolerance']));
    const unrated = { ...input('u', 'p4', 'u'), queue: rq };
    expect(rules(checkInvariants(matchOf('m3', w, 1000, unrated, 2000), []))).toEqual(new Set(['rated-unrated']));
  });

  it('reports a compatible ticket left waiting or skipped, with ratings and cutoffs taken into account', () => {
    // Two rated tickets within the older one's band when the younger arrived, both waiting.
    const listing1 = [waitingAt(rated('a', 'p1', 1000), 1000), waitingAt(rated('b', 'p2', 1029), 2000)];
    expect(rules(checkInvariants(listing1, []))).toEqual(new Set(['waiting-pair']));
    // The older one's cutoff had passed when the younger arrived (it is expired by now): no pair was possible.
    const old = { ...input('o', 'p1', 1), expiresAt: 1500 };
    expect(checkInvariants([expiredAt(old, 1000, 3000), waitingAt(input('n', 'p2', 2), 1500)], [])).toEqual([]);
    // ...but with a cutoff still ahead, the younger had to take it.
    const open = { ...input('o2', 'p1', 1), expiresAt: 1501 };
    expect(rules(checkInvariants([expiredAt(open, 1000, 3000), waitingAt(input('n2', 'p2', 2), 1500)], []))).toEqual(new Set(['waiting-pair']));
    // A join that took a younger ticket while an older compatible one kept waiting.
    // (first and second are one player's, so second could not take first.)
    const first = input('f', 'p1', 1);
    const [second, joiner] = matchOf('m1', input('s', 'p1', 2), 1100, input('j', 'p3', 3), 1200);
    expect(rules(checkInvariants([waitingAt(first, 1000), second!, joiner!], []))).toEqual(new Set(['not-oldest']));
    // Not held against the service when the older one's cancellation carries the same time (order unknown).
    const cancelled = { id: 'f', state: 'cancelled', admission: adm(first, 1000), reason: 'requested', cancelledAt: 1200 };
    expect(checkInvariants([cancelled, second!, joiner!], [])).toEqual([]);
  });

  it('reports unjustified conflict answers, mixed queue policies, and other refusals', () => {
    const a = input('a', 'p1', 1);
    const listing = [waitingAt(a, 1000)];
    const identical: Observation = { operation: 'createTicket', input: a, status: 409, body: { error: 'ticket_conflict' } };
    expect(rules(checkInvariants(listing, [identical]))).toEqual(new Set(['conflict-response']));
    const samePolicy: Observation = { operation: 'createTicket', input: input('z', 'p2', 2), status: 409, body: { error: 'queue_conflict' } };
    expect(rules(checkInvariants(listing, [samePolicy]))).toEqual(new Set(['conflict-response']));
    const mixed = [waitingAt(a, 1000), waitingAt(rated('r', 'p2', 5, { queue: { ...rq, key: 'duel' } }), 1100)];
    expect(rules(checkInvariants(mixed, []))).toContain('queue-policy');
    const refusals: Observation[] = [
      { operation: 'createTicket', input: input('q', 'p3', 3), status: 500, body: { error: 'internal' } },
      { operation: 'cancelTicket', input: { id: 'a' }, status: 409, body: { error: 'ticket_conflict' } },
      { operation: 'createTicket', input: input('q2', 'p3', 3), status: 503, body: { error: 'unavailable' } },
    ];
    const found = checkInvariants(listing, refusals);
    expect(found.map((v) => v.rule)).toEqual(['status', 'status', 'status']);
  });
});

// ---------------------------------------------------------------------------------------
// Three replicas, three apps, under concurrent load while the apps' clocks move.
// ---------------------------------------------------------------------------------------

/** mulberry32: a small seeded generator, so a failing workload can be replayed (not its timing). */
function rng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const shuffle = <T>(items: T[]): T[] => {
    for (let i = items.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  };
  return { next, int, pick, shuffle };
}
type Rng = ReturnType<typeof rng>;

/** Same JSON members, reversed key order at every level (an identical retry, spelled differently). */
function reorder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reorder);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reorder(v)]));
}

/** Runs tasks with at most `width` in flight, each started when a slot frees (so inputs built at start see the clock of that moment). */
async function runPool(tasks: ReadonlyArray<() => Promise<unknown>>, width: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) await tasks[next++]!();
    }),
  );
}

const SEED = Number(process.env['VERSUS_TEST_SEED'] ?? Date.now() % 1_000_000);
const SERVERS = 3;
const APPS = 3;
const T0 = 1_900_000_000_000;
/** How much faster than real time the apps' test clocks run during the load. */
const CLOCK_SPEED = 4;
const PLAYERS = Array.from({ length: 40 }, (_, i) => `p${String(i).padStart(2, '0')}`);
const MAIN_QUEUES = Array.from({ length: 4 }, (_, i) => ({ key: `main-${i}`, size: 2 as const }));
/** Rated queues; app 1 gives rated-0 another policy under the same key (policies are per app). */
const ratedQueues = (app: number): Array<Required<Pick<TicketInput['queue'], 'key' | 'size' | 'rating'>>> => [
  { key: 'rated-0', size: 2, rating: { initial: app === 1 ? 10 : 25, widenPerSecond: 100, max: 150 } },
  { key: 'rated-1', size: 2, rating: { initial: 0, widenPerSecond: 40 } },
];

/** A ticket decided when the workload is generated; its cutoff is relative to the app's clock when it is sent. */
interface Planned {
  input: Omit<TicketInput, 'expiresAt'>;
  /** expiresAt = clock at send + this; absent: no cutoff. */
  cutoffIn?: number;
}

type Task = () => Promise<unknown>;

describe('three API processes, three apps, one Redis', () => {
  const prefix = testPrefix();
  const keys = new Keys(prefix);
  const agent = new Agent({ keepAlive: true, maxSockets: 24 });
  const apps = Array.from({ length: APPS }, (_, index) => {
    const keyPair = generateKeyPair();
    const origin = `https://race-${index}-${randomUUID().slice(0, 8)}.example`;
    const record = verifiedAppRecord(keyPair.publicKey, { origin, name: `Race App ${index}`, push: false });
    // Each app's own test clock, apart from the others'.
    return { index, keyPair, record, clock: T0 + index * 1_000_000, token: '', observations: [] as Observation[] };
  });
  let redis: RedisClient | undefined;
  let apis: SpawnedApi[] = [];

  beforeAll(async () => {
    redis = await testRedis();
    for (const app of apps) {
      await new AppRegistry(redis, keys, 0).put(app.record);
      await redis.set(keys.testClock(app.record.appId), String(app.clock));
    }
    const env = { ...redisEnv(), VERSUS_KEY_PREFIX: prefix, VERSUS_TEST_CLOCK: '1', LOG_LEVEL: 'silent' };
    const started = await Promise.allSettled(Array.from({ length: SERVERS }, () => spawnApi(env)));
    apis = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
  }, 60_000);

  afterAll(async () => {
    agent.destroy();
    const codes = await Promise.all(apis.map((api) => api.stop()));
    if (redis) {
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
    expect(codes.every((code) => code === 0), `API exit codes ${codes.join(', ')}`).toBe(true);
  }, 30_000);

  function post(server: number, token: string, operation: string, input: unknown): Promise<{ status: number; body: unknown; text: string }> {
    const payload = JSON.stringify({ operation, input });
    const url = new URL('/api/matchmaking', apis[server]!.url);
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        {
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
            authorization: `Bearer ${token}`,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown;
            try {
              body = JSON.parse(text);
            } catch {
              body = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body, text });
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  type App = (typeof apps)[number];
  const randomServer = () => Math.floor(Math.random() * SERVERS);

  /** Sends one request as `app` to a replica and records it. `input` is what the checker compares against, `sent` what goes on the wire. */
  async function call(app: App, operation: 'createTicket' | 'cancelTicket', input: unknown, note: string, sent: unknown = input, server = randomServer()) {
    const res = await post(server, app.token, operation, sent);
    const observation: Observation = { operation, input, status: res.status, body: res.body, note: `app ${app.index}, ${note}, server ${server}` };
    app.observations.push(observation);
    return observation;
  }

  /**
   * The checker reads this very listing as the service wrote it: faults planted in a copy of it
   * (a matched ticket given a cutoff at its matchedAt, a rated joiner moved out of the band, a
   * rated pair left waiting) are reported, so field names or shapes the checker missed cannot
   * make it pass vacuously.
   */
  function expectPlantedFaultsFound(listing: unknown[]): void {
    type Entry = { input: TicketInput; createdAt: number };
    type Listed = { id: string; state: string; admission: Entry; match?: { id: string; matchedAt: number; tickets: [Entry, Entry] } };
    const matched = (listing as Listed[]).filter((t) => t.state === 'matched');
    const plant = (matchId: string, change: (entries: [Entry, Entry], match: NonNullable<Listed['match']>) => void) => {
      const copy = structuredClone(listing) as Listed[];
      for (const t of copy) {
        if (t.match?.id !== matchId) continue;
        change(t.match.tickets, t.match);
        // A ticket's own admission is a separate copy of its entry in the match.
        t.admission = t.match.tickets.find((e) => e.input.id === t.id)!;
      }
      return new Set(checkInvariants(copy, []).map((v) => v.rule));
    };
    const anyMatch = matched[0]!;
    expect(plant(anyMatch.match!.id, ([waiting], match) => void (waiting.input.expiresAt = match.matchedAt))).toContain('cutoff');
    const ratedMatch = matched.find((t) => t.admission.input.rating !== undefined)!;
    expect(plant(ratedMatch.match!.id, ([waiting, joining]) => void (joining.input.rating = waiting.input.rating! + 10_000))).toContain('tolerance');
    // Both tickets of a rated match left waiting: the joiner ignored a compatible waiting ticket.
    const unmatched = (listing as Listed[]).map((t) =>
      t.match?.id === ratedMatch.match!.id ? { id: t.id, state: 'waiting', admission: { ...t.admission, payload: t.admission.input.payload } } : t,
    );
    expect(new Set(checkInvariants(unmatched, []).map((v) => v.rule))).toContain('waiting-pair');
  }

  /** The ticket as sent now: its cutoff, if any, relative to the app's clock at this moment. */
  const materialize = (app: App, planned: Planned): TicketInput =>
    planned.cutoffIn === undefined ? { ...planned.input } : { ...planned.input, expiresAt: app.clock + planned.cutoffIn };

  it('keeps every matchmaking invariant under concurrent admissions, cancels, identical and conflicting retries while clocks move', async () => {
    console.info(`concurrency workload seed ${SEED} (VERSUS_TEST_SEED to replay the workload)`);
    for (const app of apps) app.token = await signToken(app.keyPair.secretKey, app.record.origin);

    /** Everything one app will send; IDs restart at 1 in every app, so the apps share IDs (and queue keys) but not inputs. */
    function plan(app: App, r: Rng) {
      let counter = 0;
      const payloadFor = (n: number, player: string): Json => {
        switch (n % 4) {
          case 0: return { seed: n, by: player, app: app.index };
          case 1: return [n, 'target', { level: n % 7, app: app.index }];
          case 2: return `seed-${app.index}-${n}`;
          default: return n * 10 + app.index;
        }
      };
      const unrated = (idPrefix: string, player: string, queue: TicketInput['queue']): TicketInput => {
        counter += 1;
        return { id: `${idPrefix}-${counter}`, player, queue, payload: payloadFor(counter, player) };
      };
      /** A main-queue, rated-queue or unrated-in-rated-queue ticket; about a third with a cutoff (some already past on arrival). */
      const mixed = (idPrefix: string): Planned => {
        const player = r.pick(PLAYERS);
        const kind = r.next();
        let input: Omit<TicketInput, 'expiresAt'>;
        if (kind < 0.55) input = unrated(idPrefix, player, r.pick(MAIN_QUEUES));
        else if (kind < 0.9) input = { ...unrated(idPrefix, player, r.pick(ratedQueues(app.index))), rating: 1000 + r.int(600) + (r.next() < 0.3 ? 0.5 : 0) };
        else input = unrated(idPrefix, player, r.pick(ratedQueues(app.index)));
        if (r.next() >= 0.35) return { input };
        return { input, cutoffIn: r.next() < 0.15 ? -r.int(300) : 1 + r.int(2500) };
      };
      /** The same ID with another payload or another player. */
      const conflicting = (t: TicketInput, change: 'payload' | 'player'): TicketInput =>
        change === 'payload' ? { ...t, payload: { changed: t.id } } : { ...t, player: `${t.player}-other` };
      const counts = { conflictPairs: 0, queueProbes: 0 };

      /** One admission, sent once, or twice at once: identically (reordered keys) or conflicting (one is admitted, the other refused). */
      const admit = (planned: Planned, phase: string, retry: 'none' | 'identical' | 'conflict'): Task => {
        if (retry === 'conflict') counts.conflictPairs += 1;
        const change = r.next() < 0.5 ? 'payload' : 'player';
        return async () => {
          const t = materialize(app, planned);
          if (retry === 'none') return call(app, 'createTicket', t, phase);
          if (retry === 'identical') return Promise.all([call(app, 'createTicket', t, `${phase} original`), call(app, 'createTicket', t, `${phase} retry`, reorder(t))]);
          const other = conflicting(t, change);
          return Promise.all([call(app, 'createTicket', t, `${phase} conflict A`), call(app, 'createTicket', other, `${phase} conflict B`)]);
        };
      };
      const retryKind = (identical: number, conflict: number) => {
        const x = r.next();
        return x < identical ? 'identical' : x < identical + conflict ? 'conflict' : 'none';
      };

      // Phase 0: tickets that must wait (each queue holds one player's tickets), for the races.
      const soloWaiters = Array.from({ length: 30 }, (_, i) => unrated('solo', 'waiter-solo', { key: `solo-${i}`, size: 2 }));
      const sharedWaiters = Array.from({ length: 4 }, (_, k) => Array.from({ length: 6 }, () => unrated('shared', `waiter-${k}`, { key: `race-${k}`, size: 2 }))).flat();
      const phase0 = [...soloWaiters, ...sharedWaiters];

      // Phase 1: admissions by 40 players in 4 unrated and 2 rated queues, in bursts (one
      // player's tickets in a row exercise "never with yourself").
      const admissions: Planned[] = [];
      while (admissions.length < 400) {
        const first = mixed('a');
        const burst = r.next() < 0.25 ? 2 + r.int(3) : 1;
        admissions.push(first);
        for (let i = 1; i < burst; i++) {
          const input = { ...first.input, id: `a-${++counter}`, payload: payloadFor(counter, first.input.player) };
          admissions.push(first.cutoffIn === undefined ? { input } : { input, cutoffIn: first.cutoffIn + i });
        }
      }
      const phase1: Task[] = admissions.map((planned) => admit(planned, 'phase 1', retryKind(1 / 6, 1 / 15)));

      // Phase 2, interleaved: cancel-versus-join races on the phase 0 tickets, more admissions,
      // cancels of phase 1 tickets (some sent twice at once), cancels of unknown IDs racing
      // their creation, and queue-policy conflicts.
      const races: Array<{ waiter: TicketInput; joiner: TicketInput; solo: boolean }> = [];
      const phase2: Task[] = [];
      for (const waiter of phase0) {
        const joiner = unrated('join', r.pick(PLAYERS), waiter.queue);
        races.push({ waiter, joiner, solo: waiter.id.startsWith('solo') });
        const [cancelServer, joinServer] = r.shuffle([0, 1, 2]) as [number, number];
        const cancel = () => call(app, 'cancelTicket', { id: waiter.id }, 'phase 2 race cancel', { id: waiter.id }, cancelServer);
        const join = () => call(app, 'createTicket', joiner, 'phase 2 race join', joiner, joinServer);
        const cancelFirst = r.next() < 0.5;
        phase2.push(() => Promise.all(cancelFirst ? [cancel(), join()] : [join(), cancel()]));
      }
      for (let i = 0; i < 120; i++) phase2.push(admit(mixed('b'), 'phase 2', retryKind(0.2, 0.07)));
      for (const [i, planned] of r.shuffle([...admissions]).slice(0, 50).entries()) {
        const cancel = () => call(app, 'cancelTicket', { id: planned.input.id }, 'phase 2 cancel');
        phase2.push(i < 15 ? () => Promise.all([cancel(), cancel()]) : cancel);
      }
      for (let i = 0; i < 8; i++) {
        const t = unrated('ghost', r.pick(PLAYERS), r.pick(MAIN_QUEUES));
        phase2.push(() => Promise.all([call(app, 'cancelTicket', { id: t.id }, 'phase 2 ghost cancel'), call(app, 'createTicket', t, 'phase 2 ghost create')]));
      }
      for (let i = 0; i < 6; i++) {
        // The policy of every queue was fixed in phase 1; these disagree with it.
        const queue = i % 2 === 0 ? { key: 'rated-0', size: 2 as const, rating: { initial: 1, widenPerSecond: 1 } } : { ...MAIN_QUEUES[0]!, rating: { initial: 5, widenPerSecond: 5 } };
        const t = unrated('probe', r.pick(PLAYERS), queue);
        counts.queueProbes += 1;
        phase2.push(() => call(app, 'createTicket', t, 'phase 2 queue probe'));
      }
      return { phase0, phase1, phase2, races, counts };
    }

    const plans = apps.map((app) => plan(app, rng(SEED + app.index)));
    const shuffle = rng(SEED + 99).shuffle;

    // Phase 0, clocks frozen.
    const phase0 = await Promise.all(
      apps.flatMap((app) => plans[app.index]!.phase0.map((t) => call(app, 'createTicket', t, 'phase 0 waiter'))),
    );
    const phase0NotWaiting = phase0.filter((o) => (o.body as { state?: string } | undefined)?.state !== 'waiting');

    // Phases 1 and 2 while every app's clock moves forward, CLOCK_SPEED times as fast as real
    // time, in small uneven steps (cutoffs pass, rating bands widen and reach their cap); each
    // task reads its app's clock when it starts.
    let moving = true;
    const steps = rng(SEED + 7);
    const clocks = (async () => {
      let last = Date.now();
      while (moving) {
        const now = Date.now();
        const advance = (now - last) * CLOCK_SPEED;
        last = now;
        for (const app of apps) {
          app.clock += Math.round(advance) + 1 + steps.int(5);
          await redis!.set(keys.testClock(app.record.appId), String(app.clock));
        }
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    try {
      await runPool(shuffle(plans.flatMap((p) => p.phase1)), 96);
      await runPool(shuffle(plans.flatMap((p) => p.phase2)), 96);
    } finally {
      moving = false;
      await clocks;
    }

    let requests = 0;
    let listPages = 0;
    const totals = { ratedMatches: 0, cutoffMatches: 0, expiredOnArrival: 0, expiredWaiting: 0, tickets: 0 };
    for (const app of apps) {
      const { races, counts } = plans[app.index]!;
      // Past every cutoff: the listing itself expires whatever still waits for one.
      app.clock += 10_000;
      await redis!.set(keys.testClock(app.record.appId), String(app.clock));

      // Final state: every ticket of the app, page by page, from the replicas in turn.
      const listing: unknown[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const input: { cursor?: string } = cursor === null ? {} : { cursor };
        const res = await post(pages % SERVERS, app.token, 'listTickets', input);
        expect(res.status, res.text).toBe(200);
        const page = res.body as { tickets: unknown[]; nextCursor: string | null };
        expect(page.tickets.length).toBeLessThanOrEqual(25);
        listing.push(...page.tickets);
        cursor = page.nextCursor;
        pages += 1;
      } while (cursor !== null && pages < 1000);
      listPages += pages;
      const observations = app.observations;
      requests += observations.length;

      // The spec's invariants over the listing and every answer.
      const violations = checkInvariants(listing, observations, { listedAt: app.clock });
      expect(violations, `app ${app.index}:\n${formatViolations(violations)}`).toEqual([]);
      if (app.index === 0) expectPlantedFaultsFound(listing);

      // The app's listing holds exactly the IDs it was answered 200 for: nothing of another
      // app (which used the same IDs and queue keys), nothing refused.
      const acceptedIds = new Set(observations.filter((o) => o.status === 200).map((o) => (o.input as { id: string }).id));
      const listedIds = (listing as Array<{ id: string }>).map((t) => t.id);
      expect(new Set(listedIds).size).toBe(listedIds.length);
      expect(new Set(listedIds)).toEqual(acceptedIds);

      // Refusals: exactly one of each conflicting pair, and every queue probe.
      const refused = (code: string) => observations.filter((o) => o.status === 409 && (o.body as { error?: string }).error === code).length;
      expect(refused('ticket_conflict'), `app ${app.index} ticket_conflict answers`).toBe(counts.conflictPairs);
      expect(refused('queue_conflict'), `app ${app.index} queue_conflict answers`).toBe(counts.queueProbes);

      // A solo race has exactly two outcomes: the cancel won (the joiner waits) or the join won
      // (both answers carry the same match).
      const answer = (note: string, id: string) =>
        observations.find((o) => o.note?.includes(note) && (o.input as { id: string }).id === id)!.body as {
          state: string;
          match?: { id: string; tickets: Array<{ input: { id: string } }> };
        };
      for (const race of races.filter((x) => x.solo)) {
        const cancelled = answer('phase 2 race cancel', race.waiter.id);
        const joined = answer('phase 2 race join', race.joiner.id);
        if (cancelled.state === 'cancelled') {
          expect(joined.state, `${race.joiner.id} after ${race.waiter.id} was cancelled`).toBe('waiting');
        } else {
          expect(cancelled.state).toBe('matched');
          expect(joined.state).toBe('matched');
          expect(joined.match!.id).toBe(cancelled.match!.id);
          expect(joined.match!.tickets.map((a) => a.input.id)).toEqual([race.waiter.id, race.joiner.id]);
        }
      }

      type Listed = { state: string; admission: { createdAt: number; input: TicketInput } | null; cancelledAt?: number; reason?: string; match?: { tickets: Array<{ input: TicketInput }> } };
      for (const t of listing as Listed[]) {
        totals.tickets += 1;
        if (t.state === 'matched' && t.match!.tickets[1]!.input.id === t.admission!.input.id) {
          if (t.admission!.input.rating !== undefined) totals.ratedMatches += 1;
          if (t.match!.tickets.some((a) => a.input.expiresAt !== undefined)) totals.cutoffMatches += 1;
        }
        if (t.reason === 'expired') totals[t.cancelledAt === t.admission!.createdAt ? 'expiredOnArrival' : 'expiredWaiting'] += 1;
      }
    }

    expect(phase0NotWaiting, JSON.stringify(phase0NotWaiting.slice(0, 3))).toEqual([]);
    console.info(`concurrency: ${requests} requests over ${SERVERS} processes and ${APPS} apps + ${listPages} list pages; ${JSON.stringify(totals)}`);
    // The workload reached what the invariants are about (guards against a vacuous pass).
    expect(requests).toBeGreaterThanOrEqual(2500);
    for (const [what, n] of Object.entries(totals)) expect(n, what).toBeGreaterThan(0);
  }, 90_000);
});
