import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { MatchmakingStore } from '../../src/matchmaking/store.js';
import { queuePolicyJson } from '../../src/matchmaking/validation.js';
import { Keys } from '../../src/redis/keys.js';
import { canonicalJson } from '../../src/shared/json.js';
import type { Queue, TicketInput } from '../../src/shared/matchmaking-types.js';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { ratedIndexProblems } from '../helpers/rated-indexes.js';
import { ratingTreeMeta, ratingTreeProblems, ratingTreeUnsure, startRatingTree } from '../helpers/rating-tree.js';
import { redisUrl } from '../setup/redis-url.js';

/**
 * The pairing rule, written plainly from the spec: the oldest waiting ticket (admission order)
 * of another player, not past its cutoff, both unrated or both rated within
 * min(max, initial + widenPerSecond * waitingSeconds) of the waiting ticket.
 */
interface Waiting {
  id: string;
  player: string;
  rating?: number;
  createdAt: number;
  expiresAt?: number;
}

class ReferenceQueue {
  waiting: Waiting[] = [];
  constructor(private readonly policy: Queue['rating']) {}

  private compatible(w: Waiting, player: string, rating: number | undefined, now: number): boolean {
    if (w.player === player) return false;
    if (w.expiresAt !== undefined && now >= w.expiresAt) return false;
    if ((w.rating === undefined) !== (rating === undefined)) return false;
    if (rating === undefined || w.rating === undefined) return true;
    const p = this.policy!;
    let tolerance = p.initial + p.widenPerSecond * ((now - w.createdAt) / 1000);
    if (p.max !== undefined && tolerance > p.max) tolerance = p.max;
    return Math.abs(rating - w.rating) <= tolerance;
  }

  /** Returns the outcome of an admission: 'cancelled' (expired at creation), 'waiting', or the partner's ID. */
  admit(t: Waiting, now: number): string {
    if (t.expiresAt !== undefined && t.expiresAt <= now) return 'cancelled';
    const index = this.waiting.findIndex((w) => this.compatible(w, t.player, t.rating, now));
    if (index === -1) {
      this.waiting.push(t);
      return 'waiting';
    }
    return this.waiting.splice(index, 1)[0]!.id;
  }

  cancel(id: string): void {
    this.waiting = this.waiting.filter((w) => w.id !== id);
  }
}

type Command =
  | { kind: 'advance'; ms: number }
  | { kind: 'create'; player: number; rated: boolean; rating: number; cutoffIn: number | null }
  | { kind: 'cancel'; pick: number };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(0, 1, 250, 500, 1000, 2500) }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('create' as const),
      player: fc.integer({ min: 0, max: 3 }),
      rated: fc.boolean(),
      rating: fc.integer({ min: 0, max: 12 }).map((n) => n / 2),
      cutoffIn: fc.option(fc.constantFrom(0, 1, 250, 500, 1000), { nil: null }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }) },
);

const policyArb = fc.record(
  {
    initial: fc.constantFrom(0, 0.5, 1, 2),
    widenPerSecond: fc.constantFrom(0.5, 1, 2),
    max: fc.constantFrom(1, 2, 3),
  },
  { requiredKeys: ['initial', 'widenPerSecond'] },
).map((p) => (p.max !== undefined && p.max < p.initial ? { ...p, max: p.initial } : p));

const prefix = testPrefix();
const keys = new Keys(prefix);
let redis: Redis;
let store: MatchmakingStore;

beforeAll(async () => {
  redis = new Redis(redisUrl());
  const config = loadConfig({ REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, VERSUS_TEST_CLOCK: '1' });
  store = new MatchmakingStore(redis, keys, { testClock: config.testClock });
  await store.preload();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

let runCounter = 0;

/**
 * A flood admitted at one instant before the commands: mostly one player's rated tickets, so
 * they stay waiting and make the queue deeper than the engine's read batch (16). The rated
 * search then runs both of its exact reads in turns (pairing.lua), which short sequences
 * never reach.
 */
interface FloodTicket {
  player: number;
  rating: number;
}
const floodArb: fc.Arbitrary<FloodTicket[]> = fc
  // A narrow spread puts most of the flood in the joiner's window (the admission-order read
  // answers first); a wide one leaves the window small (the rating-order read answers).
  .constantFrom(4, 8, 48)
  .chain((spread) =>
    fc.array(
      fc.record({ player: fc.constantFrom(0, 0, 0, 0, 1), rating: fc.integer({ min: 0, max: spread }).map((n) => n / 2) }),
      { minLength: 17, maxLength: 70 },
    ),
  );

/** A flood's tickets as create commands: rated, no cutoff. */
const creates = (flood: FloodTicket[]): Command[] => flood.map((f): Command => ({ kind: 'create', player: f.player, rated: true, rating: f.rating, cutoffIn: null }));

/** 40 tickets of one player far away (rating 1000): they never fit, but head the admission order. */
const FAR: Command[] = creates(Array.from({ length: 40 }, () => ({ player: 9, rating: 1000 })));

/**
 * How the queue's rating tree (lua/includes/ratingtree.lua) takes part: `false`, as in
 * production (built when the window read does not finish, which short sequences rarely reach);
 * 'start', in test mode (test/helpers/rating-tree.ts) from the first ticket, so that it answers
 * every admission it can and the rest of the engine only what it cannot tell; 'late', in test
 * mode from after `before` and the flood, so that the first admission that asks it builds it
 * from the tickets waiting then.
 */
type TreeMode = false | 'start' | 'late';

/** Runs `before`, the flood and `commands` against the engine and the reference. */
async function runSequence(tree: TreeMode, policy: Queue['rating'], commands: Command[], flood: FloodTicket[] = [], before: Command[] = []): Promise<void> {
  runCounter += 1;
  const appId = `prop${runCounter}`;
  const queue: Queue = { key: 'q', size: 2, rating: policy! };
  const reference = new ReferenceQueue(policy);
  const admitted: string[] = [];
  let now = 1_000_000;
  await redis.set(keys.testClock(appId), String(now));
  const startTree = () => startRatingTree(redis, keys, appId, queue.key, policy!.widenPerSecond, tree === 'late');
  if (tree === 'start') await startTree();
  const steps: Command[] = [
    ...before,
    ...creates(flood),
    ...commands,
  ];
  for (const [step, command] of steps.entries()) {
    if (tree === 'late' && step === before.length + flood.length) await startTree();
    if (command.kind === 'advance') {
      now += command.ms;
      await redis.set(keys.testClock(appId), String(now));
      continue;
    }
    if (command.kind === 'cancel') {
      if (admitted.length === 0) continue;
      const id = admitted[command.pick % admitted.length]!;
      const ticket = JSON.parse(await store.cancelTicket(appId, id));
      expect(ticket.state, `step ${step}: cancel ${id}`).not.toBe('waiting');
      reference.cancel(id);
      continue;
    }
    const id = `t${step}`;
    const input: TicketInput = {
      id,
      player: `p${command.player}`,
      queue,
      payload: step,
      ...(command.rated ? { rating: command.rating } : {}),
      ...(command.cutoffIn === null ? {} : { expiresAt: now + command.cutoffIn }),
    };
    const outcome = await store.createTicket(appId, { input, policyJson: queuePolicyJson(queue), payloadJson: canonicalJson(step) });
    if (!('ticket' in outcome)) throw new Error(`unexpected ${outcome.conflict}`);
    const ticket = JSON.parse(outcome.ticket);
    const actual = ticket.state === 'matched' ? ticket.match.tickets[0].input.id : ticket.state;
    const expected = reference.admit({ id, player: input.player, createdAt: now, ...(input.rating === undefined ? {} : { rating: input.rating }), ...(input.expiresAt === undefined ? {} : { expiresAt: input.expiresAt }) }, now);
    expect(actual, `step ${step}: ${JSON.stringify(command)} at ${now}`).toBe(expected);
    admitted.push(id);
  }
  // The indexes agree with each other, and hold nothing once every ticket has left.
  const players = ['p0', 'p1', 'p2', 'p3', 'p9'];
  expect(await ratedIndexProblems(redis, keys, appId, queue.key, players)).toEqual([]);
  expect(await ratingTreeProblems(redis, keys, appId, queue.key)).toEqual([]);
  // The clock never goes back here, so a test-mode tree always knows the answer.
  expect(await ratingTreeUnsure(redis, keys, appId, queue.key)).toBe(0);
  for (const { id } of reference.waiting) await store.cancelTicket(appId, id);
  expect(await ratedIndexProblems(redis, keys, appId, queue.key, players)).toEqual([]);
  expect(await ratingTreeProblems(redis, keys, appId, queue.key)).toEqual([]);
  expect(await redis.zcard(keys.queueRatedWaiting(appId, queue.key))).toBe(0);
  if (tree === 'start') expect((await ratingTreeMeta(redis, keys, appId, queue.key))?.size).toBe(0);
}

/** `VERSUS_PROPERTY_SEED=<seed from a failure report>` replays that failure. */
const replay = process.env['VERSUS_PROPERTY_SEED'] ? { seed: Number(process.env['VERSUS_PROPERTY_SEED']) } : {};

/** Every property, with the rating tree taking part as `tree` says. */
function properties(tree: TreeMode): void {
  it('on 1000 random sequences (ties, same-player floods, exact tolerance boundaries, cutoffs at now)', async () => {
    await fc.assert(
      fc.asyncProperty(policyArb, fc.array(commandArb, { minLength: 1, maxLength: 30 }), (policy, commands) => runSequence(tree, policy, commands)),
      { numRuns: 1000, ...replay },
    );
  });

  /** 150 sequences: a prefix from `before`, then a flood (floodArb), then random commands. */
  const afterPrefix = (before: fc.Arbitrary<Command[]>) =>
    fc.assert(
      fc.asyncProperty(policyArb, before, floodArb, fc.array(commandArb, { minLength: 1, maxLength: 30 }), (policy, first, flood, commands) =>
        runSequence(tree, policy, commands, flood, first),
      ),
      { numRuns: 150, ...replay },
    );

  it('on 150 sequences with a flood after older tickets, whose wider bands put unfit flood tickets in the window', async () => {
    // A joiner then meets runs of one player's tickets that do not fit it: the engine passes a
    // run unread only when every ticket of that player that reaches it has been read
    // (pairing.lua playerFitting).
    await afterPrefix(fc.array(commandArb, { minLength: 1, maxLength: 8 }).map((commands): Command[] => [...commands, { kind: 'advance', ms: 2500 }]));
  });

  it('on 150 sequences behind 40 old tickets far away, with two waves of floods, so that the rating-order read answers', async () => {
    // The far tickets never fit (rating 1000) but head the admission order: the admission-order
    // read needs three batches to pass them, while the window read, passing runs of players whose
    // reaching tickets it has read (pairing.lua playerFitting), usually finishes first. Two waves
    // 2.5 s apart give one player's tickets two band widths, so an older fitting ticket can lie
    // beyond younger ones that do not fit.
    await afterPrefix(floodArb.map((first): Command[] => [...FAR, ...creates(first), { kind: 'advance', ms: 2500 }]));
  });

  it('on 150 sequences behind 40 far tickets, with several players\' floods interleaved in rating, before and after bands reach max', async () => {
    // Slots `gap` apart (more than `initial`, so neighbours of other players do not pair), each
    // holding one to six tickets of one player, players taking turns: no run of one player is
    // long, so the window read rarely passes any, and the engine's count of fitting tickets
    // (pairing.lua countFitting) is what decides: no partner at all, or stop once that many are read.
    // Clock steps up to 10 s move bands past max, so tickets move to the max index as they wait.
    const interleaved = (initial: number) =>
      fc
        .record({
          gap: fc.constantFrom(0.25, 0.5, 1).map((extra) => initial + extra),
          players: fc.constantFrom(2, 3),
          slots: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 4, maxLength: 16 }),
        })
        .map(({ gap, players, slots }): FloodTicket[] =>
          slots.flatMap((count, slot) => Array.from({ length: count }, () => ({ player: slot % players, rating: slot * gap }))),
        );
    const steps = fc.array(
      fc.oneof(commandArb, fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(3000, 10_000) })),
      { minLength: 1, maxLength: 30 },
    );
    await fc.assert(
      fc.asyncProperty(
        policyArb.chain((policy) => fc.tuple(fc.constant(policy), interleaved(policy!.initial), steps)),
        ([policy, flood, commands]) => runSequence(tree, policy, commands, flood, FAR),
      ),
      { numRuns: 150, ...replay },
    );
  });

  it('on 150 sequences that start with a flood deeper than one read batch', async () => {
    await fc.assert(
      fc.asyncProperty(policyArb, floodArb, fc.array(commandArb, { minLength: 1, maxLength: 30 }), (policy, flood, commands) =>
        runSequence(tree, policy, commands, flood),
      ),
      { numRuns: 150, ...replay },
    );
  });
}

describe('the indexed pairing engine agrees with the reference rule', () => properties(false));
describe('the rating tree agrees with the reference rule (lua/includes/ratingtree.lua)', () => properties('start'));
describe('a rating tree built from the waiting tickets agrees with the reference rule', () => properties('late'));
