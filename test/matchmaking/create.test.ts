import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Harness, type TestApp } from '../helpers/harness.js';
import { ratedQueue, ticket } from '../helpers/tickets.js';
import { ratedIndexProblems } from '../helpers/rated-indexes.js';
import { ratingTreeProblems, ratingTreeUnsure, startRatingTree } from '../helpers/rating-tree.js';

let h: Harness;
let app: TestApp;
const T0 = 1_700_000_000_000;

beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.stop();
});
beforeEach(async () => {
  app = await h.registerApp();
  await h.setClock(app, T0);
});

const create = (input: unknown) => h.call(app, 'createTicket', input);
const cancel = (id: string) => h.call(app, 'cancelTicket', { id });
const list = (input?: unknown) => h.call(app, 'listTickets', input);

describe('createTicket transitions', () => {
  it('waits when no compatible ticket exists, and is discoverable at once', async () => {
    const a = ticket();
    const res = await create(a);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: a.id, state: 'waiting', admission: { input: a, createdAt: T0, payload: a.payload } });
    const page = await list({ id: a.id });
    expect(page.body.tickets).toEqual([res.body]);
  });

  it('pairs a new admission with a waiting ticket of another player; both see one match', async () => {
    const a = ticket({ payload: { seed: 'waiting-wins' } });
    const b = ticket({ payload: { seed: 'joiner-loses' } });
    await create(a);
    await h.setClock(app, T0 + 5000);
    const joined = await create(b);
    expect(joined.body.state).toBe('matched');
    const match = joined.body.match;
    expect(match).toMatchObject({ queue: 'duel', matchedAt: T0 + 5000, payload: a.payload });
    expect(typeof match.id).toBe('string');
    expect(match.tickets).toEqual([
      { input: a, createdAt: T0, payload: a.payload },
      { input: b, createdAt: T0 + 5000, payload: a.payload },
    ]);
    // The joining ticket's accepted payload is the waiting ticket's.
    expect(joined.body.admission).toEqual({ input: b, createdAt: T0 + 5000, payload: a.payload });
    const waiting = (await list({ id: a.id })).body.tickets[0];
    expect(waiting.state).toBe('matched');
    expect(waiting.match).toEqual(match);
    expect(waiting.admission).toEqual({ input: a, createdAt: T0, payload: a.payload });
  });

  it('is cancelled (expired) at creation when expiresAt is at or before now, with cancelledAt == createdAt', async () => {
    for (const expiresAt of [T0, T0 - 1]) {
      const a = ticket({ expiresAt });
      const res = await create(a);
      expect(res.body).toEqual({
        id: a.id,
        state: 'cancelled',
        admission: { input: a, createdAt: T0, payload: a.payload },
        reason: 'expired',
        cancelledAt: T0,
      });
    }
    // An expired-at-creation ticket never waits: a later admission does not pair with it.
    const later = await create(ticket());
    expect(later.body.state).toBe('waiting');
  });

  it('a ticket whose cutoff is one millisecond ahead waits', async () => {
    const res = await create(ticket({ expiresAt: T0 + 1 }));
    expect(res.body.state).toBe('waiting');
  });

  it('without a frozen clock, times are Redis TIME in whole milliseconds, the same in the reply and when read back', async () => {
    const live = await h.registerApp();
    const redisMs = async () => {
      const [seconds, micros] = await h.redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    const before = await redisMs();
    const a = ticket();
    const waiting = await h.call(live, 'createTicket', a);
    const joined = await h.call(live, 'createTicket', ticket());
    const expired = await h.call(live, 'createTicket', ticket({ expiresAt: before }));
    const after = await redisMs();
    const times = [waiting.body.admission.createdAt, joined.body.match.matchedAt, expired.body.cancelledAt];
    for (const t of times) {
      expect(Number.isInteger(t), String(t)).toBe(true);
      expect(t).toBeGreaterThanOrEqual(before);
      expect(t).toBeLessThanOrEqual(after);
    }
    expect(joined.body.match.matchedAt).toBe(joined.body.admission.createdAt);
    expect(expired.body.cancelledAt).toBe(expired.body.admission.createdAt);
    for (const reply of [joined, expired]) {
      expect((await h.call(live, 'listTickets', { id: reply.body.id })).body.tickets).toEqual([reply.body]);
    }
  });

  it('returns a tombstone for an ID cancelled while unknown, whatever is proposed, and fixes no queue policy', async () => {
    const tomb = await cancel('ghost');
    expect(tomb.body).toEqual({ id: 'ghost', state: 'cancelled', admission: null, reason: 'requested', cancelledAt: T0 });
    await h.setClock(app, T0 + 10);
    const res = await create(ticket({ id: 'ghost', queue: ratedQueue('fresh', { initial: 1, widenPerSecond: 1 }) }));
    expect(res.body).toEqual(tomb.body);
    // 'fresh' got no policy from the tombstoned attempt: another policy is accepted.
    const other = await create(ticket({ queue: { key: 'fresh', size: 2 } }));
    expect(other.status).toBe(200);
  });
});

describe('createTicket idempotency and conflicts', () => {
  it('returns the current state for identical input, whatever the key order', async () => {
    const a = ticket({ queue: ratedQueue('rated', { initial: 5, widenPerSecond: 1, max: 50 }), rating: 10, payload: { b: 1, a: [1, { y: 2, x: 1 }] } });
    const first = await create(a);
    const reordered = {
      payload: { a: [1, { x: 1, y: 2 }], b: 1 },
      rating: 10,
      queue: { rating: { max: 50, widenPerSecond: 1, initial: 5 }, size: 2, key: 'rated' },
      player: a.player,
      id: a.id,
    };
    const retry = await create(reordered);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
  });

  it('a retry after the ticket matched returns the matched state', async () => {
    const a = ticket();
    await create(a);
    const b = await create(ticket());
    const retry = await create(a);
    expect(retry.body.state).toBe('matched');
    expect(retry.body.match).toEqual(b.body.match);
  });

  it('refuses any changed field with ticket_conflict, also after the ticket became terminal', async () => {
    const a = ticket({ queue: ratedQueue('r1', { initial: 5, widenPerSecond: 1 }), rating: 3, expiresAt: T0 + 60_000 });
    await create(a);
    const changes: Array<Record<string, unknown>> = [
      { player: 'someone-else' },
      { payload: { seed: 'other' } },
      { rating: 4 },
      { expiresAt: T0 + 60_001 },
      { queue: ratedQueue('r2', { initial: 5, widenPerSecond: 1 }) },
      { queue: ratedQueue('r1', { initial: 5, widenPerSecond: 1, max: 9 }) },
    ];
    const without = (key: keyof typeof a) => {
      const copy: Record<string, unknown> = { ...a };
      delete copy[key];
      return copy;
    };
    for (const change of changes) {
      const res = await create({ ...a, ...change });
      expect(res, JSON.stringify(change)).toMatchObject({ status: 409, body: { error: 'ticket_conflict' } });
    }
    expect((await create(without('expiresAt'))).body).toEqual({ error: 'ticket_conflict' });
    await cancel(a.id);
    expect((await create({ ...a, payload: 'x' })).body).toEqual({ error: 'ticket_conflict' });
    expect((await create(a)).body.state).toBe('cancelled');
  });

  it('retries and listings do not attempt new pairings', async () => {
    const queue = ratedQueue('widening', { initial: 10, widenPerSecond: 1 });
    const a = ticket({ queue, rating: 100 });
    const b = ticket({ queue, rating: 200 });
    await create(a);
    expect((await create(b)).body.state).toBe('waiting'); // |200-100| > 10
    await h.setClock(app, T0 + 100_000); // a's tolerance is now 110
    expect((await create(b)).body.state).toBe('waiting');
    const listed = (await list()).body.tickets.map((t: { state: string }) => t.state);
    expect(listed).toEqual(['waiting', 'waiting']);
    // A new admission does pair, with the oldest compatible ticket (a).
    const c = await create(ticket({ queue, rating: 200 }));
    expect(c.body.state).toBe('matched');
    expect(c.body.match.tickets[0].input.id).toBe(a.id);
  });
});

describe('queue policy', () => {
  it('is fixed by the first accepted input, even an already expired one', async () => {
    const first = await create(ticket({ queue: ratedQueue('p', { initial: 1, widenPerSecond: 2 }), expiresAt: T0 - 5 }));
    expect(first.body.state).toBe('cancelled');
    const unrated = await create(ticket({ queue: { key: 'p', size: 2 } }));
    expect(unrated).toMatchObject({ status: 409, body: { error: 'queue_conflict' } });
    const same = await create(ticket({ queue: { size: 2, key: 'p', rating: { widenPerSecond: 2, initial: 1 } } }));
    expect(same.status).toBe(200);
  });

  it('treats a policy with max as different from one without, and any changed number as different', async () => {
    await create(ticket({ queue: ratedQueue('m', { initial: 1, widenPerSecond: 2 }) }));
    for (const rating of [{ initial: 1, widenPerSecond: 2, max: 100 }, { initial: 2, widenPerSecond: 2 }, { initial: 1, widenPerSecond: 3 }]) {
      expect((await create(ticket({ queue: ratedQueue('m', rating) }))).body).toEqual({ error: 'queue_conflict' });
    }
  });

  it('checks the ID before the policy: a known ID with another policy is a ticket_conflict', async () => {
    const a = ticket({ queue: { key: 'k', size: 2 } });
    await create(a);
    expect((await create({ ...a, queue: ratedQueue('k', { initial: 1, widenPerSecond: 1 }) })).body).toEqual({ error: 'ticket_conflict' });
  });

  it('refuses a conflicting policy without writing anything', async () => {
    await create(ticket({ queue: { key: 'only', size: 2 } }));
    const rejected = ticket({ queue: ratedQueue('only', { initial: 1, widenPerSecond: 1 }) });
    expect((await create(rejected)).status).toBe(409);
    expect((await list({ id: rejected.id })).body.tickets).toEqual([]);
  });
});

describe('pairing compatibility', () => {
  it('pairs FIFO among different players: the oldest waiting ticket wins', async () => {
    const a = ticket({ player: 'p1' });
    const b = ticket({ player: 'p1' });
    const c = ticket({ player: 'p2' });
    await create(a);
    await create(b); // same player: b waits behind a
    const joined = await create(c);
    expect(joined.body.match.tickets[0].input.id).toBe(a.id);
    const d = await create(ticket({ player: 'p3' }));
    expect(d.body.match.tickets[0].input.id).toBe(b.id);
  });

  it('never pairs two tickets of one player, who may hold several', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const t = ticket({ player: 'solo' });
      ids.push(t.id);
      expect((await create(t)).body.state).toBe('waiting');
    }
    const other = await create(ticket({ player: 'rival' }));
    expect(other.body.match.tickets[0].input.id).toBe(ids[0]);
  });

  it('skips the joining player\'s own older tickets to find another player\'s', async () => {
    const queue = ratedQueue('skip', { initial: 1, widenPerSecond: 0.001 });
    await create(ticket({ player: 'me', queue, rating: 100 }));
    const rival = ticket({ player: 'rival', queue, rating: 0 }); // too far from my first ticket: both wait
    expect((await create(rival)).body.state).toBe('waiting');
    const mine = await create(ticket({ player: 'me', queue, rating: 0.5 }));
    expect(mine.body.match.tickets[0].input.id).toBe(rival.id);
  });

  it('a rated joiner passes its own waiting tickets to pair with another player\'s, also own tickets from before the per-player rated indexes', async () => {
    for (const legacy of [false, true]) {
      await h.setClock(app, T0);
      const queue = ratedQueue(legacy ? 'own-legacy' : 'own', { initial: 10, widenPerSecond: 1 });
      const own = [1, 2, 3].map(() => ticket({ queue, player: 'x', rating: 100 }));
      for (const t of own) expect((await create(t)).body.state).toBe('waiting');
      if (legacy) {
        // Tickets that waited before an upgrade are in the queue's indexes but not in the player's.
        const { byRating, reachUp, reachDown } = h.keys.queuePlayerRated(app.appId, queue.key, 'x');
        expect(await h.redis.del(byRating, reachUp, reachDown)).toBe(3);
      }
      await h.setClock(app, T0 + 20_000); // x's bands are 30 now: 140 fits none of them
      const other = ticket({ queue, player: 'y', rating: 140 });
      expect((await create(other)).body.state).toBe('waiting');
      await h.setClock(app, T0 + 30_000); // x's bands 40, y's 20: the window around 125 holds all four
      const joined = await create(ticket({ queue, player: 'x', rating: 125 }));
      expect(joined.body.state, JSON.stringify(joined.body)).toBe('matched');
      expect(joined.body.match.tickets[0].input.id).toBe(other.id);
      // x's own tickets still wait, and another player takes the oldest of them.
      const next = await create(ticket({ queue, player: 'z', rating: 100 }));
      expect(next.body.match.tickets[0].input.id).toBe(own[0]!.id);
    }
  });

  it('a rated joiner reads on through another player\'s unfit tickets to that player\'s fit one, and passes a player with none', async () => {
    // y: two tickets out of a joiner's reach at 100 (bands 10), then one within it, next in
    // rating order: inside the band, on its lower edge, on its upper edge.
    for (const fitRating of [95, 90, 110]) {
      await h.setClock(app, T0);
      // An old ticket far away widens the window: its band is 110 after 100 s.
      const queue = ratedQueue(`reach-${fitRating}`, { initial: 10, widenPerSecond: 1 });
      expect((await create(ticket({ queue, player: 'z', rating: 1000 }))).body.state).toBe('waiting');
      await h.setClock(app, T0 + 100_000);
      const fit = ticket({ queue, player: 'y', rating: fitRating });
      for (const t of [ticket({ queue, player: 'y', rating: 80 }), ticket({ queue, player: 'y', rating: 81 }), fit]) {
        expect((await create(t)).body.state).toBe('waiting');
      }
      const joined = await create(ticket({ queue, player: 'x', rating: 100 }));
      expect(joined.body.state, `${fitRating}: ${JSON.stringify(joined.body)}`).toBe('matched');
      expect(joined.body.match.tickets[0].input.id).toBe(fit.id);
    }
    // The same after an upgrade: y's tickets waited before the reach indexes (ru, rd) existed but
    // after the rating index (rr). This window is read whole; for a wider one, where runs are
    // passed, see 'never passes a player with tickets from before the reach indexes' below.
    {
      await h.setClock(app, T0);
      const queue = ratedQueue('reach-legacy', { initial: 10, widenPerSecond: 1 });
      expect((await create(ticket({ queue, player: 'z', rating: 1000 }))).body.state).toBe('waiting');
      await h.setClock(app, T0 + 100_000);
      const fit = ticket({ queue, player: 'y', rating: 95 });
      for (const t of [ticket({ queue, player: 'y', rating: 80 }), ticket({ queue, player: 'y', rating: 81 }), fit]) {
        expect((await create(t)).body.state).toBe('waiting');
      }
      const { reachUp, reachDown } = h.keys.queuePlayerRated(app.appId, queue.key, 'y');
      expect(await h.redis.del(reachUp, reachDown)).toBe(2);
      const joined = await create(ticket({ queue, player: 'x', rating: 100 }));
      expect(joined.body.state, JSON.stringify(joined.body)).toBe('matched');
      expect(joined.body.match.tickets[0].input.id).toBe(fit.id);
    }
    // v: a flood out of reach of a joiner at 100; w, younger, within it: v is passed, w found.
    const queue = ratedQueue('reach-flood', { initial: 10, widenPerSecond: 1 });
    await h.setClock(app, T0);
    expect((await create(ticket({ queue, player: 'z', rating: 1000 }))).body.state).toBe('waiting');
    await h.setClock(app, T0 + 100_000);
    for (let i = 0; i < 20; i++) expect((await create(ticket({ queue, player: 'v', rating: 115 }))).body.state).toBe('waiting');
    const w = ticket({ queue, player: 'w', rating: 92 });
    expect((await create(w)).body.state).toBe('waiting');
    const next = await create(ticket({ queue, player: 'u', rating: 100 }));
    expect(next.body.match.tickets[0].input.id).toBe(w.id);
  });

  describe('in a window wider than one read batch, where the rating-order read answers first', () => {
    // Policy {initial 10, widen 1/s}; the joiner (x) comes at 100 at T0+100s. 40 old tickets far
    // away (band 110 by then) make the window [-10, 210] and keep the admission-order read busy for
    // three batches, so the window read, which passes runs of a player's tickets, is what answers.
    // Each case runs with ratings as given (tickets above the joiner) and mirrored around 100
    // (below it), so both directions of the read are tried.
    const policy = { initial: 10, widenPerSecond: 1 };
    let n = 0;
    type Put = (player: string, rating: number) => Promise<string>;
    async function scene(mirror: boolean): Promise<{ queue: ReturnType<typeof ratedQueue>; put: Put }> {
      const queue = ratedQueue(`wide-${(n += 1)}`, policy);
      const at = (rating: number) => (mirror ? 200 - rating : rating);
      const put = async (player: string, rating: number) => {
        const t = ticket({ queue, player, rating: at(rating) });
        expect((await create(t)).body.state, `${player} at ${at(rating)}`).toBe('waiting');
        return t.id;
      };
      await h.setClock(app, T0);
      for (let i = 0; i < 40; i++) await put('far', 5000);
      return { queue, put };
    }
    const flood = async (put: Put, player: string, rating: number, count = 20) => {
      for (let i = 0; i < count; i++) await put(player, rating);
    };
    /** y's tickets: one at 155 (band 60 at the join: it fits), and later a flood out of reach at 125, nearer. */
    async function fitThenFlood(put: Put): Promise<string> {
      await h.setClock(app, T0 + 50_000);
      const fit = await put('y', 155);
      await h.setClock(app, T0 + 100_000);
      await flood(put, 'y', 125);
      return fit;
    }
    /** x joins at 100 and must pair with `partner`. */
    async function expectPairing(queue: ReturnType<typeof ratedQueue>, partner: string, label: string): Promise<void> {
      const joined = (await create(ticket({ queue, player: 'x', rating: 100 }))).body;
      expect(joined.state, `${label}: ${JSON.stringify(joined)}`).toBe('matched');
      expect(joined.match.tickets[0].input.id).toBe(partner);
    }

    it('reads a player\'s nearer unfit tickets until all of that player\'s reaching ones are read', async () => {
      for (const mirror of [false, true]) {
        const { queue, put } = await scene(mirror);
        await h.setClock(app, T0 + 50_000);
        const f1 = await put('y', 155); // band 60 at the join: fits
        await put('y', 156); // fits too, younger
        await h.setClock(app, T0 + 100_000);
        await flood(put, 'y', 125); // band 10: out of reach, and nearer than y's fitting two
        await expectPairing(queue, f1, `mirror ${mirror}`);
      }
    });

    it('after passing a run of the joiner\'s own tickets, reads the ticket just beyond it', async () => {
      // Runs of 17 (its last ticket is a galloping step) and 13 (found by bisection).
      for (const run of [17, 13]) {
        for (const mirror of [false, true]) {
          const { queue, put } = await scene(mirror);
          await h.setClock(app, T0 + 10_000);
          const z = await put('z', 145); // band 20 when x's flood comes, 100 at the join
          await h.setClock(app, T0 + 20_000);
          await flood(put, 'x', 124, run);
          await put('x', 170); // beyond z: the run ends before x's last ticket
          await h.setClock(app, T0 + 100_000);
          await flood(put, 'v', 20, 4); // out of reach on the other side: the window holds more than a batch
          await expectPairing(queue, z, `run ${run}, mirror ${mirror}`);
        }
      }
    });

    it('never passes a player with tickets from before the reach indexes (in rr, not in ru and rd)', async () => {
      for (const mirror of [false, true]) {
        const { queue, put } = await scene(mirror);
        const fit = await fitThenFlood(put);
        const { reachUp, reachDown } = h.keys.queuePlayerRated(app.appId, queue.key, 'y');
        expect(await h.redis.zrem(reachUp, fit)).toBe(1);
        expect(await h.redis.zrem(reachDown, fit)).toBe(1);
        await expectPairing(queue, fit, `mirror ${mirror}`);
      }
    });

    it('indexes tickets from before qu and qv existed when it first counts, and pairs as before', async () => {
      for (const mirror of [false, true]) {
        const { queue, put } = await scene(mirror);
        const fit = await fitThenFlood(put); // y's only fitting ticket: uncounted, the count would say none
        // As if every ticket had waited before the queue-wide reach indexes existed, and y's
        // fitting one before its player's too.
        const { reachUp, reachDown } = h.keys.queueRated(app.appId, queue.key);
        expect(await h.redis.del(reachUp, reachDown)).toBe(2);
        const own = h.keys.queuePlayerRated(app.appId, queue.key, 'y');
        const waitsOn = (await h.redis.zrange(own.byRating, 0, -1)).find((id) => id !== fit)!;
        for (const id of [fit, waitsOn]) {
          for (const key of [own.reachUp, own.reachDown]) expect(await h.redis.zrem(key, id)).toBe(1);
        }
        await expectPairing(queue, fit, `mirror ${mirror}`);
        expect(await ratedIndexProblems(h.redis, h.keys, app.appId, queue.key, ['far', 'y', 'x'])).toEqual([]);
        expect(await h.redis.zcard(reachUp)).toBe(60); // 40 far tickets and y's flood of 20
      }
    });

    it('does not count while the queue\'s reach indexes hold a ticket that is not waiting (they disagree: never expected)', async () => {
      for (const mirror of [false, true]) {
        const { queue, put } = await scene(mirror);
        const fit = await fitThenFlood(put);
        // A stray entry that meets neither reach bound would make the count one too low: none.
        const { reachUp, reachDown } = h.keys.queueRated(app.appId, queue.key);
        await h.redis.zadd(reachUp, 1e15, 'stray');
        await h.redis.zadd(reachDown, 1e15, 'stray');
        await expectPairing(queue, fit, `mirror ${mirror}`);
      }
    });

    it('counts only indexed tickets as a player\'s reaching ones read (one from before rr is read, not counted)', async () => {
      for (const mirror of [false, true]) {
        const { queue, put } = await scene(mirror);
        const fit = await fitThenFlood(put);
        const early = await put('y', 108); // fits, nearest; as if it waited before rr existed
        const { byRating, reachUp, reachDown } = h.keys.queuePlayerRated(app.appId, queue.key, 'y');
        for (const key of [byRating, reachUp, reachDown]) expect(await h.redis.zrem(key, early)).toBe(1);
        await expectPairing(queue, fit, `mirror ${mirror}`); // older than `early`
      }
    });
  });

  it('finds a fitting ticket when the clock has gone back before younger tickets\' admission (their bands are negative then)', async () => {
    // 17 younger tickets of b meet neither reach bound of a joiner at 0 then, so counting
    // fitting tickets as up + down - total would say none (pairing.lua countFitting): the count
    // is not used while the newest ticket's band is negative.
    const queue = ratedQueue('clock-back', { initial: 0, widenPerSecond: 1 });
    const b = ticket({ queue, player: 'b', rating: 0 });
    expect((await create(b)).body.state).toBe('waiting');
    await h.setClock(app, T0 + 20_000);
    for (let i = 0; i < 17; i++) expect((await create(ticket({ queue, player: 'b', rating: 8 }))).body.state).toBe('waiting');
    await h.setClock(app, T0 + 10_000); // b's first band is 10, the younger ones' -10
    const joined = await create(ticket({ queue, player: 'j', rating: 0 }));
    expect(joined.body.state, JSON.stringify(joined.body)).toBe('matched');
    expect(joined.body.match.tickets[0].input.id).toBe(b.id);
  });

  it('answers right when the rating tree cannot tell, after the clock went back between two admissions', async () => {
    // a (rating 1) is admitted at T0 + 100 s, then b (rating 5) at T0: a's band is negative then,
    // so they do not pair, and a is older than b though nearer a joiner at 0 and unfit when b
    // fits. The tree's oldest ticket between the farthest fitting ones is then a, which does not
    // fit: it cannot tell, and the window read answers (pairing.lua treePartner). c, far away
    // and older than both, makes the window wide.
    const queue = ratedQueue('clock-back-tree', { initial: 0, widenPerSecond: 1 });
    await startRatingTree(h.redis, h.keys, app.appId, queue.key, 1);
    await h.setClock(app, T0 - 1_000_000);
    expect((await create(ticket({ queue, player: 'c', rating: 5000 }))).body.state).toBe('waiting');
    await h.setClock(app, T0 + 100_000);
    expect((await create(ticket({ queue, player: 'a', rating: 1 }))).body.state).toBe('waiting');
    await h.setClock(app, T0);
    const b = ticket({ queue, player: 'b', rating: 5 });
    expect((await create(b)).body.state).toBe('waiting');
    await h.setClock(app, T0 + 10_000); // a's band -90, b's 10
    const joined = await create(ticket({ queue, player: 'j', rating: 0 }));
    expect(joined.body.match.tickets[0].input.id).toBe(b.id);
    expect(await ratingTreeUnsure(h.redis, h.keys, app.appId, queue.key)).toBe(1);
    expect(await ratingTreeProblems(h.redis, h.keys, app.appId, queue.key)).toEqual([]);
  });

  it('never pairs rated with unrated tickets in one queue', async () => {
    const queue = ratedQueue('mixed', { initial: 1000, widenPerSecond: 1 });
    const unrated = ticket({ queue });
    await create(unrated);
    expect((await create(ticket({ queue, rating: 1 }))).body.state).toBe('waiting');
    const unrated2 = await create(ticket({ queue }));
    expect(unrated2.body.match.tickets[0].input.id).toBe(unrated.id);
  });

  it('keeps queues apart', async () => {
    await create(ticket({ queue: { key: 'x', size: 2 } }));
    expect((await create(ticket({ queue: { key: 'y', size: 2 } }))).body.state).toBe('waiting');
  });

  describe('rating tolerance = min(max, initial + widenPerSecond * waitingSeconds)', () => {
    const policy = { initial: 5, widenPerSecond: 2 };

    async function waitingAt(rating: number, queueKey: string, max?: number) {
      const queue = ratedQueue(queueKey, max === undefined ? policy : { ...policy, max });
      const waiting = ticket({ queue, rating });
      await create(waiting);
      return { queue, waiting };
    }

    it('without max: compatible exactly at the boundary, not beyond it', async () => {
      const { queue } = await waitingAt(100, 'nomax');
      await h.setClock(app, T0 + 10_000); // tolerance 5 + 2*10 = 25
      expect((await create(ticket({ queue, rating: 125.5 }))).body.state).toBe('waiting');
      expect((await create(ticket({ queue, rating: 74.5 }))).body.state).toBe('waiting');
      expect((await create(ticket({ queue, rating: 125 }))).body.state).toBe('matched');
    });

    it('without max: the band keeps widening with time', async () => {
      const { queue } = await waitingAt(0, 'wide');
      await h.setClock(app, T0 + 1_000_000); // 5 + 2000
      expect((await create(ticket({ queue, rating: -2005 }))).body.state).toBe('matched');
    });

    it('with max: the band stops at max', async () => {
      const { queue } = await waitingAt(100, 'capped', 10);
      await h.setClock(app, T0 + 10_000); // uncapped would be 25
      expect((await create(ticket({ queue, rating: 111 }))).body.state).toBe('waiting');
      expect((await create(ticket({ queue, rating: 110 }))).body.state).toBe('matched');
    });

    it('uses the waiting ticket\'s wait only: a joining ticket contributes none', async () => {
      const queue = ratedQueue('joinwait', policy);
      // b waits long, a joins later: tolerance comes from b's waiting time.
      const b = ticket({ queue, rating: 0 });
      await create(b);
      await h.setClock(app, T0 + 2_000); // b's tolerance 9
      expect((await create(ticket({ queue, rating: 9.5 }))).body.state).toBe('waiting');
      // The 9.5 ticket has waited 0 s; a 14 joining now compares with b (9: no) and 9.5 (tolerance 5: |14-9.5|=4.5 yes).
      const joined = await create(ticket({ queue, rating: 14 }));
      expect(joined.body.state).toBe('matched');
      expect(joined.body.match.tickets[0].input.rating).toBe(9.5);
    });

    it('the oldest compatible ticket wins, not the closest rating', async () => {
      const queue = ratedQueue('oldest', { initial: 50, widenPerSecond: 1 });
      const far = ticket({ queue, rating: 40 });
      const near = ticket({ queue, rating: -30 }); // 70 apart: far and near do not pair
      await create(far);
      expect((await create(near)).body.state).toBe('waiting');
      // Both fit -5 (45 and 25 apart); the older one wins though the younger is closer.
      const joined = await create(ticket({ queue, rating: -5 }));
      expect(joined.body.match.tickets[0].input.id).toBe(far.id);
    });
  });
});

describe('cutoffs', () => {
  it('a waiting ticket cannot match at its cutoff, and a read there expires it', async () => {
    const a = ticket({ expiresAt: T0 + 1000 });
    await create(a);
    await h.setClock(app, T0 + 1000);
    const joiner = await create(ticket());
    expect(joiner.body.state).toBe('waiting');
    const read = await create(a);
    expect(read.body).toMatchObject({ state: 'cancelled', reason: 'expired', cancelledAt: T0 + 1000 });
  });

  it('matches one millisecond before the cutoff', async () => {
    await create(ticket({ expiresAt: T0 + 1000 }));
    await h.setClock(app, T0 + 999);
    expect((await create(ticket())).body.state).toBe('matched');
  });

  it('expires on listTickets with cancelledAt the time of that read, stored once', async () => {
    const a = ticket({ expiresAt: T0 + 1000 });
    await create(a);
    await h.setClock(app, T0 + 5000);
    const listed = (await list({ id: a.id })).body.tickets[0];
    expect(listed).toMatchObject({ state: 'cancelled', reason: 'expired', cancelledAt: T0 + 5000 });
    await h.setClock(app, T0 + 9000);
    expect((await create(a)).body.cancelledAt).toBe(T0 + 5000);
    expect((await cancel(a.id)).body.cancelledAt).toBe(T0 + 5000);
  });

  it('a matched ticket never expires, also when a later admission to its queue retires what is due', async () => {
    for (const queue of [{ key: 'duel', size: 2 as const }, ratedQueue('ranked', { initial: 10, widenPerSecond: 1 })]) {
      const rating = 'rating' in queue ? { rating: 100 } : {};
      const a = ticket({ queue, expiresAt: T0 + 1000, ...rating });
      await create(a);
      await create(ticket({ queue, ...rating }));
      await h.setClock(app, T0 + 50_000);
      // Past a's cutoff: this admission retires the queue's due tickets; a is not one of them.
      const later = await create(ticket({ queue, ...rating }));
      expect(later.body.state, JSON.stringify(later.body)).toBe('waiting');
      expect((await create(a)).body.state).toBe('matched');
      expect((await cancel(a.id)).body.state).toBe('matched');
      await h.setClock(app, T0);
    }
  });

  it('a ticket with a cutoff that waits in a queue opened without cutoffs is retired when due (unrated and rated)', async () => {
    // Admissions skip the cutoff index of a queue no ticket with a cutoff has waited in
    // (lua/includes/ticket.lua NO_CUTOFFS): the first such ticket must end that.
    for (const queue of [{ key: 'open', size: 2 as const }, ratedQueue('open-ranked', { initial: 10, widenPerSecond: 1 })]) {
      const rating = 'rating' in queue ? { rating: 100 } : {};
      const plain = ticket({ queue, player: 'p1', ...rating });
      const timed = ticket({ queue, player: 'p1', expiresAt: T0 + 10, ...rating });
      expect((await create(plain)).body.state).toBe('waiting');
      expect((await create(timed)).body.state).toBe('waiting');
      await h.setClock(app, T0 + 10);
      const first = await create(ticket({ queue, player: 'p2', ...rating }));
      expect(first.body.match.tickets[0].input.id).toBe(plain.id);
      const second = await create(ticket({ queue, player: 'p3', ...rating }));
      expect(second.body.state, JSON.stringify(second.body)).toBe('waiting');
      expect((await list({ id: timed.id })).body.tickets[0]).toMatchObject({ state: 'cancelled', reason: 'expired', cancelledAt: T0 + 10 });
      await h.setClock(app, T0);
    }
  });

  it('an expired ticket is passed over for pairing in favour of a younger live one', async () => {
    const stale = ticket({ expiresAt: T0 + 10, player: 'same' });
    await create(stale);
    const live = ticket({ player: 'same' });
    expect((await create(live)).body.state).toBe('waiting');
    await h.setClock(app, T0 + 10);
    const joined = await create(ticket());
    expect(joined.body.match.tickets[0].input.id).toBe(live.id);
    // Considered for pairing at its cutoff: it was expired then, and that time is kept.
    await h.setClock(app, T0 + 500);
    expect((await list({ id: stale.id })).body.tickets[0]).toMatchObject({ state: 'cancelled', reason: 'expired', cancelledAt: T0 + 10 });
  });
});
