import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MatchmakingStore } from '../../src/matchmaking/store.js';
import { queuePolicyJson } from '../../src/matchmaking/validation.js';
import { Keys } from '../../src/redis/keys.js';
import { canonicalJson } from '../../src/shared/json.js';
import type { Queue, TicketInput } from '../../src/shared/matchmaking-types.js';
import { RedisServer } from '../helpers/redis-server.js';
import { ratedIndexProblems } from '../helpers/rated-indexes.js';
import { decode, encode } from '@msgpack/msgpack';
import { ratingTreeMeta, ratingTreeProblems } from '../helpers/rating-tree.js';

/**
 * How much a rated admission reads, counted rather than timed: a redis-server of this file's
 * own runs nothing else, so INFO commandstats counts exactly this file's commands. Each waiting
 * ticket the pairing search reads costs one HMGET (pairing.lua ratedCandidate), so the HMGETs
 * of one admission are the tickets it read.
 *
 * The shape is DESIGN.md's (b), mutually incompatible rated tickets, arranged against both of
 * the search's reads: an old ticket far away heads the admission order and makes the window
 * wide; two players' floods take turns in rating inside it, `gap` apart (just more than
 * `initial`, so they never paired), each ticket out of the joiner's reach. The admission-order
 * read meets only tickets that do not fit, and the window read meets no run of one player to
 * pass: before the count of fitting tickets (pairing.lua countFitting), both read every ticket.
 */
const N = 300;
const T0 = 1_800_000_000_000;
const APP = 'cost';

let server: RedisServer;
let redis: Redis;
let store: MatchmakingStore;
const keys = new Keys('vc');

beforeAll(async () => {
  server = await RedisServer.start();
  redis = new Redis(server.url);
  store = new MatchmakingStore(redis, keys, { testClock: true });
  await store.preload();
});
afterAll(async () => {
  await redis?.quit();
  await server?.remove();
});

async function setClock(ms: number): Promise<void> {
  await redis.set(keys.testClock(APP), String(ms));
}

async function admit(input: TicketInput): Promise<{ state: string; partner?: string }> {
  const outcome = await store.createTicket(APP, { input, policyJson: queuePolicyJson(input.queue), payloadJson: canonicalJson(input.payload) });
  if (!('ticket' in outcome)) throw new Error(`refused: ${outcome.conflict}`);
  const ticket = JSON.parse(outcome.ticket);
  return ticket.state === 'matched' ? { state: 'matched', partner: ticket.match.tickets[0].input.id } : { state: ticket.state };
}

/** Calls of `command` so far, from INFO commandstats. */
async function calls(command: string): Promise<number> {
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(await redis.info('commandstats'))?.[1] ?? 0);
}

/**
 * HMGETs (tickets read) of one call, and HGETs (mostly rating-tree nodes read,
 * ratingtree.lua Tree:node); the call is the only client of this Redis meanwhile.
 */
async function ticketsRead<T>(call: () => Promise<T>): Promise<{ value: T; reads: number; nodes: number }> {
  const [before, nodesBefore] = [await calls('hmget'), await calls('hget')];
  const value = await call();
  return { value, reads: (await calls('hmget')) - before, nodes: (await calls('hget')) - nodesBefore };
}

let queues = 0;
/** The shape around a joiner at 0 (see above); returns the queue. Clock: T0 + wait seconds. */
async function interleavedFloods(rating: Queue['rating'] & object): Promise<Queue> {
  const queue: Queue = { key: `q${(queues += 1)}`, size: 2, rating };
  const gap = rating.initial + 1;
  const wait = gap * N + 100; // seconds: the old ticket's band then spans the floods (without max)
  await setClock(T0);
  expect((await admit({ id: `${queue.key}-old`, player: 'old', queue, rating: -(rating.initial + wait + 20), payload: 0 })).state).toBe('waiting');
  await setClock(T0 + wait * 1000);
  for (let i = 0; i < N; i++) {
    const input = { id: `${queue.key}-f${i}`, player: i % 2 ? 'flood-b' : 'flood-a', queue, rating: rating.initial + 5 + gap * i, payload: 0 };
    expect((await admit(input)).state).toBe('waiting');
  }
  return queue;
}

describe('a rated admission in a wide window of other players\' interleaved floods', () => {
  it('reads a first turn of 4 when no other player\'s ticket fits (it waits)', async () => {
    const queue = await interleavedFloods({ initial: 10, widenPerSecond: 1 });
    const { value, reads } = await ticketsRead(() => admit({ id: 'join-1', player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(value.state).toBe('waiting');
    // A first turn of the window read (4 tickets: it answers the cheap shapes), then the count
    // says none. Before: 2 * N, both reads reading every flood ticket.
    expect(reads).toBe(4);
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, ['old', 'flood-a', 'flood-b', 'joiner'])).toEqual([]);
  });

  it('after an upgrade, the first count indexes the tickets from before qu/qv once; the next admission reads a first turn', async () => {
    const queue = await interleavedFloods({ initial: 10, widenPerSecond: 1 });
    const { reachUp, reachDown } = keys.queueRated(APP, queue.key);
    expect(await redis.del(reachUp, reachDown)).toBe(2); // as if every ticket had waited before them
    const first = await ticketsRead(() => admit({ id: 'join-up-1', player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(first.value.state).toBe('waiting');
    expect(first.reads).toBe(4 + N + 1); // the first turn, and every waiting ticket once: the floods and the old one
    await store.cancelTicket(APP, 'join-up-1');
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, ['old', 'flood-a', 'flood-b', 'joiner'])).toEqual([]);
    const next = await ticketsRead(() => admit({ id: 'join-up-2', player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(next.value.state).toBe('waiting');
    expect(next.reads).toBe(4);
  });

  it('stops reading once it has read as many fitting tickets as there are', async () => {
    const queue = await interleavedFloods({ initial: 10, widenPerSecond: 1 });
    // One fitting ticket next to the joiner, admitted last: the queue read would reach it last.
    const fit = { id: `${queue.key}-fit`, player: 'near', queue, rating: 3, payload: 0 };
    expect((await admit(fit)).state).toBe('waiting');
    const { value, reads } = await ticketsRead(() => admit({ id: 'join-2', player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(value).toEqual({ state: 'matched', partner: fit.id });
    // The fit and 3 flood tickets in the first turn, then the count ends the read; one more
    // HMGET reads the partner's fields for the reply. Before: about 2 * N, to make sure no older
    // ticket fits.
    expect(reads).toBe(5);
  });

  it('with a max: a ticket whose band reached it moves to the max index, and a joiner with no partner reads a first turn', async () => {
    // The old ticket's band reaches max just before the floods come; theirs (10) are far below.
    const wait = 11 * N + 100;
    const rating = { initial: 10, widenPerSecond: 1, max: 10 + wait - 5 };
    const queue = await interleavedFloods(rating);
    const { mature } = keys.queueRated(APP, queue.key);
    const { value, reads } = await ticketsRead(() => admit({ id: 'join-3', player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(value.state).toBe('waiting');
    // The first turn; moving matured tickets reads the one after those moved, whose band has not
    // reached max (the old ticket moved while the floods came).
    expect(reads).toBe(5);
    expect(await redis.zrange(mature, 0, -1)).toEqual([`${queue.key}-old`]);
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, ['old', 'flood-a', 'flood-b', 'joiner'])).toEqual([]);
    // Once the floods' bands reach max too, every one of them fits a joiner at 0: the oldest wins,
    // and every other waiting ticket moves.
    await setClock(T0 + (wait + rating.max) * 1000);
    expect(await admit({ id: 'join-4', player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f0` });
    expect(await redis.zcard(mature)).toBe(N + 1); // the old ticket, the other floods and join-3, which waits
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, ['old', 'flood-a', 'flood-b', 'joiner'])).toEqual([]);
  });

  it('ends a side once it has read the fitting tickets counted there, also those moved to the max index', async () => {
    // Policy {initial 1, widen 1/s, max 100}. At T0: 300 tickets far away (they head the
    // admission order), y's at 2 and z's at -90 (apart by more than 1). At T0 + 200 s, when
    // those bands have reached max: y's flood at 20..85, out of the joiner's reach and more
    // than 100 from z. The joiner at 0 fits y's ticket (the answer, older) and z's, one on each
    // side. Above it, y's ticket comes first, then the flood: the read ends there only if it
    // counts y's ticket, in qm by then, as the one fitting ticket above.
    const queue: Queue = { key: `q${(queues += 1)}`, size: 2, rating: { initial: 1, widenPerSecond: 1, max: 100 } };
    await setClock(T0);
    for (let i = 0; i < N; i++) expect((await admit({ id: `${queue.key}-far${i}`, player: 'far', queue, rating: 10_000, payload: 0 })).state).toBe('waiting');
    const fit = { id: `${queue.key}-y`, player: 'y', queue, rating: 2, payload: 0 };
    for (const t of [fit, { id: `${queue.key}-z`, player: 'z', queue, rating: -90, payload: 0 }]) expect((await admit(t)).state).toBe('waiting');
    await setClock(T0 + 200_000);
    for (let i = 0; i < N; i++) expect((await admit({ id: `${queue.key}-f${i}`, player: 'y', queue, rating: 20 + (65 * i) / N, payload: 0 })).state).toBe('waiting');
    // A joiner at 150 fits nothing; its search counts, which first moves the tickets whose band
    // reached max.
    expect((await admit({ id: 'probe', player: 'probe', queue, rating: 150, payload: 0 })).state).toBe('waiting');
    await store.cancelTicket(APP, 'probe');
    expect(await redis.zscore(keys.queuePlayerRated(APP, queue.key, 'y').mature, fit.id)).toBe('2');
    const { value, reads } = await ticketsRead(() => admit({ id: 'join-5', player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(value).toEqual({ state: 'matched', partner: fit.id });
    // y's ticket, flood tickets and z's in the first turn (the flood may be passed as a run of
    // y's), the one ticket after those moved, and nothing more.
    expect(reads).toBeLessThanOrEqual(6);
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, ['far', 'y', 'z', 'probe', 'joiner'])).toEqual([]);
  });
});

/**
 * The two shapes the window read and the count cannot make cheap (the count says partners
 * exist, and the window read must read on to find the oldest), answered by the queue's rating
 * tree once the window read has not finished after TREE_AFTER batches (pairing.lua). Both
 * behind an old ticket far away that heads the admission order and makes the window wide.
 */
describe('a rated admission whose oldest partner lies behind many other tickets in the window', () => {
  const rating = { initial: 10, widenPerSecond: 1 };
  const players = ['old', 'flood-a', 'flood-b', 'joiner', 'a'];

  /**
   * `count` old tickets far away at T0 (below the joiner at 0, or above with `side` 1), which
   * never fit; returns the queue.
   */
  async function behindOldTickets(count: number, n: number, wait: number, side = -1): Promise<Queue> {
    const queue: Queue = { key: `q${(queues += 1)}`, size: 2, rating };
    await setClock(T0);
    for (let i = 0; i < count; i++) {
      expect((await admit({ id: `${queue.key}-old${i}`, player: 'old', queue, rating: side * (rating.initial + wait + 20 + 11 * n), payload: 0 })).state).toBe('waiting');
    }
    return queue;
  }

  /**
   * `n` tickets of two players taking turns above the joiner (at 0), 11 apart (they never
   * paired), admitted farthest first at one instant, then `wait` seconds: every one fits a
   * joiner at 0, and the oldest is the farthest. The window read reads them all to find it,
   * and the admission-order read first reads `n` old tickets that do not fit.
   */
  async function manyFitting(n: number): Promise<Queue> {
    const wait = 11 * n + 100;
    const queue = await behindOldTickets(n, n, wait);
    await setClock(T0 + 1000);
    for (let i = n - 1; i >= 0; i--) {
      expect((await admit({ id: `${queue.key}-f${i}`, player: i % 2 ? 'flood-b' : 'flood-a', queue, rating: 15 + 11 * i, payload: 0 })).state).toBe('waiting');
    }
    await setClock(T0 + 1000 + wait * 1000);
    return queue;
  }

  it('builds the tree once, then finds the oldest of many fitting tickets reading O(log n) nodes', async () => {
    // 6000: its build summarises 11,999 nodes, more node visits than one operation may take
    // (ratingtree.lua STEP_LIMIT, which a build is not held to).
    const sizes = [300, 6000];
    const nodesRead: number[] = [];
    for (const n of sizes) {
      const queue = await manyFitting(n);
      const first = await ticketsRead(() => admit({ id: `${queue.key}-j0`, player: 'joiner', queue, rating: 0, payload: 0 }));
      expect(first.value).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 1}` });
      // The reads before the tree (first turn, TREE_AFTER batches of each read), then building
      // it reads every waiting ticket once.
      expect(first.reads).toBeGreaterThan(n);
      expect((await ratingTreeMeta(redis, keys, APP, queue.key))?.size).toBe(2 * n - 1); // the old ones and n - 1 floods
      expect(await ratingTreeProblems(redis, keys, APP, queue.key)).toEqual([]);
      const next = await ticketsRead(() => admit({ id: `${queue.key}-j1`, player: 'joiner', queue, rating: 0, payload: 0 }));
      expect(next.value).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 2}` });
      // The first turn, the partner's fields, and no more tickets: before the tree, n.
      expect(next.reads).toBeLessThanOrEqual(6);
      nodesRead.push(next.nodes);
      expect(await ratingTreeProblems(redis, keys, APP, queue.key)).toEqual([]);
    }
    // A treap is O(log n) deep with high probability (its shape is random: the salt comes from
    // TIME): a few paths down, each within 3 log2(waiting) nodes. Linear would be thousands.
    sizes.forEach((n, i) => expect(nodesRead[i]!).toBeLessThan(12 * Math.log2(2 * n)));
  });

  it('drops a tree that does not hold as many tickets as the queue (as after an older version\'s admissions), and builds it anew', async () => {
    const n = 300;
    const queue = await manyFitting(n);
    expect(await admit({ id: `${queue.key}-j0`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 1}` });
    const tree = keys.queueRatingTree(APP, queue.key);
    const meta = decode((await redis.hgetBuffer(tree, 'm'))!) as unknown[];
    meta[1] = (meta[1] as number) + 1; // one ticket more than the tree holds
    await redis.hset(tree, 'm', Buffer.from(encode(meta)));
    expect(await admit({ id: `${queue.key}-j1`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 2}` });
    // Dropped when asked, and the window read answered; the next admission builds a new one.
    expect(await ratingTreeMeta(redis, keys, APP, queue.key)).toBeNull();
    expect(await admit({ id: `${queue.key}-j2`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 3}` });
    expect((await ratingTreeMeta(redis, keys, APP, queue.key))?.size).toBe(2 * n - 3);
    expect(await ratingTreeProblems(redis, keys, APP, queue.key)).toEqual([]);
    const next = await ticketsRead(() => admit({ id: `${queue.key}-j3`, player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(next.value).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 4}` });
    expect(next.reads).toBeLessThanOrEqual(6);
  });

  it('drops a tree that holds as many tickets as the queue but not the same ones (another version admitted one and cancelled another)', async () => {
    const n = 300;
    const queue = await manyFitting(n);
    expect(await admit({ id: `${queue.key}-j0`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 1}` });
    // Scripts that know no tree (an older version, as in a rolling upgrade): hidden from them,
    // it misses one admission (a far ticket that waits) and one cancellation (the oldest
    // fitting ticket, the one it would answer next), so it holds as many tickets as the queue.
    const tree = keys.queueRatingTree(APP, queue.key);
    await redis.rename(tree, `${tree}:hidden`);
    expect((await admit({ id: `${queue.key}-late`, player: 'old', queue, rating: -1e9, payload: 0 })).state).toBe('waiting');
    expect(JSON.parse(await store.cancelTicket(APP, `${queue.key}-f${n - 2}`)).state).toBe('cancelled');
    await redis.rename(`${tree}:hidden`, tree);
    expect((await ratingTreeMeta(redis, keys, APP, queue.key))?.size).toBe(await redis.zcard(keys.queueRatedWaiting(APP, queue.key)));
    // Not the cancelled ticket: the next oldest that fits, and the cancelled one stays so.
    expect(await admit({ id: `${queue.key}-j1`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 3}` });
    expect(await redis.hget(keys.ticket(APP, `${queue.key}-f${n - 2}`), 's')).toBe('c'); // ticket.lua: c cancelled
    expect(await ratingTreeProblems(redis, keys, APP, queue.key)).toEqual([]);
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, players)).toEqual([]);
  });

  it('drops a tree that fails (a node missing, or a cycle), and pairs as without it', async () => {
    const n = 300;
    const queue = await manyFitting(n);
    expect(await admit({ id: `${queue.key}-j0`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 1}` });
    const tree = keys.queueRatingTree(APP, queue.key);
    const root = String((await ratingTreeMeta(redis, keys, APP, queue.key))!.root);
    // The root made its own child on the side away from the joiner (at 0): the search for the
    // farthest fitting ticket on the other side passes the root that way, and would go round for
    // ever but for the step limit (ratingtree.lua STEP_LIMIT).
    const node = decode((await redis.hgetBuffer(tree, root))!) as unknown[];
    node[(node[0] as number) < 0 ? 7 : 6] = Number(root);
    await redis.hset(tree, root, Buffer.from(encode(node)));
    expect(await admit({ id: `${queue.key}-j1`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 2}` });
    expect(await ratingTreeMeta(redis, keys, APP, queue.key)).toBeNull();
    // Built anew by the next admission; then a node goes missing, and a cancel meets it.
    expect(await admit({ id: `${queue.key}-j2`, player: 'joiner', queue, rating: 0, payload: 0 })).toEqual({ state: 'matched', partner: `${queue.key}-f${n - 3}` });
    const rebuilt = await ratingTreeMeta(redis, keys, APP, queue.key);
    expect(rebuilt).not.toBeNull();
    expect(await redis.hdel(tree, String(rebuilt!.root))).toBe(1);
    expect(JSON.parse(await store.cancelTicket(APP, `${queue.key}-f0`)).state).toBe('cancelled');
    expect(await ratingTreeMeta(redis, keys, APP, queue.key)).toBeNull();
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, players)).toEqual([]);
  });

  it('finds a player\'s older fitting tickets behind its younger ones that do not fit, and drops the tree when the queue is small', async () => {
    // Player a's tickets at 50 and -50 wait since T0 + 1 s and 2 s; at T0 + 200 s, n of a's
    // tickets nearer the joiner above it (31 to 49) come, which do not fit it at T0 + 220 s
    // (bands 10 + 20), while the first two do (bands 10 + 219, 10 + 218). In rating order the
    // nearer ones come first; in admission order, n old tickets far above that do not fit (so
    // that the farthest fitting ticket above has older ones beyond it).
    const n = 2000;
    const queue = await behindOldTickets(n, n, 300, 1);
    await setClock(T0 + 1000);
    expect((await admit({ id: `${queue.key}-above`, player: 'a', queue, rating: 50, payload: 0 })).state).toBe('waiting');
    await setClock(T0 + 2000);
    expect((await admit({ id: `${queue.key}-below`, player: 'a', queue, rating: -50, payload: 0 })).state).toBe('waiting');
    await setClock(T0 + 200_000);
    for (let i = 1; i <= n; i++) {
      expect((await admit({ id: `${queue.key}-a${i}`, player: 'a', queue, rating: 49 - (18 * i) / n, payload: 0 })).state).toBe('waiting');
    }
    await setClock(T0 + 220_000);
    const first = await ticketsRead(() => admit({ id: `${queue.key}-j0`, player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(first.value).toEqual({ state: 'matched', partner: `${queue.key}-above` });
    expect(first.reads).toBeGreaterThan(2 * n); // the tree is built
    expect(await ratingTreeProblems(redis, keys, APP, queue.key)).toEqual([]);
    const next = await ticketsRead(() => admit({ id: `${queue.key}-j1`, player: 'joiner', queue, rating: 0, payload: 0 }));
    expect(next.value).toEqual({ state: 'matched', partner: `${queue.key}-below` });
    expect(next.reads).toBeLessThanOrEqual(6);
    expect(next.nodes).toBeLessThan(300);
    expect(await ratingTreeProblems(redis, keys, APP, queue.key)).toEqual([]);
    expect(await ratedIndexProblems(redis, keys, APP, queue.key, players)).toEqual([]);
    // Cancelling all but 63 waiting tickets drops the tree (TREE_MIN, ratingtree.lua).
    const waiting = await redis.zrange(keys.queueRatedWaiting(APP, queue.key), 0, -1);
    for (const id of waiting.slice(63)) await store.cancelTicket(APP, id);
    expect(await ratingTreeMeta(redis, keys, APP, queue.key)).toBeNull();
  });
});
