import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appMemory, readCounters, waitingPerQueue } from '../../src/matchmaking/stats.js';
import { Harness, scanKeys } from '../helpers/harness.js';
import { ratedQueue } from '../helpers/tickets.js';

/**
 * The stats hash the scripts keep (lua/includes/keys.lua statsKey) against the truth: after
 * random admissions, cancels (of known and unknown IDs), identical retries and clock steps
 * through the API, a full listing (which settles every expiry it reaches) is counted by state,
 * and the counters and the per-queue waiting counts from the indexes must say the same.
 */
let h: Harness;

beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h?.stop();
});

const QUEUES = [{ key: 'u0', size: 2 }, { key: 'u1', size: 2 }, ratedQueue('r', { initial: 1, widenPerSecond: 2, max: 5 })];

type Command =
  | { kind: 'advance'; ms: number }
  | { kind: 'create'; player: number; queue: number; rating: number; cutoffIn: number | null }
  | { kind: 'retry'; pick: number }
  | { kind: 'cancel'; pick: number; unknown: boolean };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(0, 100, 500, 1000) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('create' as const),
      player: fc.integer({ min: 0, max: 3 }),
      queue: fc.integer({ min: 0, max: 2 }),
      rating: fc.integer({ min: 0, max: 8 }),
      cutoffIn: fc.option(fc.constantFrom(0, 100, 500, 1000), { nil: null }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('retry' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat(), unknown: fc.boolean() }) },
);

let run = 0;

describe('matchmaking stats counters', () => {
  it('agree with a full listing, by state and by queue, after random sequences', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 30 }), async (commands) => {
        run++;
        const app = await h.registerApp();
        let now = 1_000_000;
        await h.setClock(app, now);
        const created: unknown[] = [];
        for (const [i, c] of commands.entries()) {
          if (c.kind === 'advance') {
            now += c.ms;
            await h.setClock(app, now);
          } else if (c.kind === 'create') {
            const queue = QUEUES[c.queue]!;
            const input = {
              id: `t${run}-${i}`,
              player: `p${c.player}`,
              queue,
              payload: {},
              ...(c.queue === 2 ? { rating: c.rating } : {}),
              ...(c.cutoffIn === null ? {} : { expiresAt: now + c.cutoffIn }),
            };
            expect((await h.call(app, 'createTicket', input)).status).toBe(200);
            created.push(input);
          } else if (c.kind === 'retry' && created.length > 0) {
            expect((await h.call(app, 'createTicket', created[c.pick % created.length])).status).toBe(200);
          } else if (c.kind === 'cancel') {
            const id = c.unknown || created.length === 0 ? `ghost${run}-${i}` : (created[c.pick % created.length] as { id: string }).id;
            expect((await h.call(app, 'cancelTicket', { id })).status).toBe(200);
          }
        }

        const listed: any[] = [];
        let cursor: string | null = null;
        do {
          const page: { status: number; body: any } = await h.call(app, 'listTickets', cursor ? { cursor } : undefined);
          expect(page.status).toBe(200);
          listed.push(...page.body.tickets);
          cursor = page.body.nextCursor;
        } while (cursor);

        const count = (test: (t: any) => boolean) => listed.filter(test).length;
        const counters = await readCounters(h.redis, h.keys, app.appId);
        expect(counters.tickets).toEqual({
          waiting: count((t) => t.state === 'waiting'),
          matched: count((t) => t.state === 'matched'),
          cancelled: count((t) => t.state === 'cancelled' && t.admission !== null),
          requested: count((t) => t.state === 'cancelled' && t.admission !== null && t.reason === 'requested'),
          expired: count((t) => t.state === 'cancelled' && t.reason === 'expired'),
          tombstones: count((t) => t.admission === null),
        });
        expect(counters.events.admissions).toBe(count((t) => t.admission !== null));
        expect(counters.events.matches * 2).toBe(counters.tickets.matched);

        const waitingByQueue = new Map<string, number>();
        for (const t of listed.filter((x) => x.state === 'waiting')) {
          const key = t.admission.input.queue.key as string;
          waitingByQueue.set(key, (waitingByQueue.get(key) ?? 0) + 1);
        }
        const perQueue = await waitingPerQueue(h.redis, h.keys, app.appId, true);
        // The listing settled every expiry: nothing left past its cutoff in the indexes.
        expect(perQueue.queues.map((q) => [q.queue, q.waiting, q.pastCutoff]).sort()).toEqual([...waitingByQueue].map(([q, n]) => [q, n, 0]).sort());
      }),
      { numRuns: 40 },
    );
  });

  it("memory sums MEMORY USAGE of the app's record and every key of its scope, on whichever master holds them", async () => {
    const app = await h.registerApp();
    const neighbour = await h.registerApp();
    await h.setClock(app, 1);
    await h.setClock(neighbour, 1);
    for (let i = 0; i < 5; i++) {
      expect((await h.call(app, 'createTicket', { id: `m${i}`, player: `p${i % 2}`, queue: { key: 'q', size: 2 }, payload: { i } })).status).toBe(200);
      expect((await h.call(neighbour, 'createTicket', { id: `n${i}`, player: 'p', queue: { key: 'q', size: 2 }, payload: { i } })).status).toBe(200);
    }
    const keys = [h.keys.appRecord(app.origin), ...(await scanKeys(h.redis, h.keys.appScopePattern(app.appId)))];
    let bytes = 0;
    for (const key of keys) bytes += Number(await h.redis.memory('USAGE', key));
    expect(await appMemory(h.redis, h.keys, app.origin)).toEqual({ bytes, keys: keys.length, sampled: true });
  });
});
