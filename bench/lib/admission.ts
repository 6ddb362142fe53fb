/**
 * Admission script time for DESIGN.md's adversarial shapes at queue depths 0, 1k, 10k, 100k.
 *
 * Each measured admission is timed inside Redis (INFO commandstats around the one call) and on
 * the client; medians of many calls are kept. All depths of a shape are built first and then
 * measured in interleaved rounds, so a change in the machine's load (it may be shared) touches
 * the baseline and the deep queues alike. Measured admissions leave the shape as it was: a
 * joiner that waits is cancelled before the next one; a joiner that pairs consumes one of a
 * supply of live tickets laid down for that purpose.
 */
import type { CreateOutcome } from '../../src/matchmaking/store.js';
import type { Queue } from '../../src/shared/matchmaking-types.js';
import {
  type BenchApp,
  type BenchContext,
  deleteApp,
  median,
  nowMs,
  pool,
  registerApp,
  timeScriptCall,
  valid,
} from './common.js';

export const DEPTHS = [0, 1_000, 10_000, 100_000] as const;

const T0 = 1_800_000_000_000; // frozen test clock (ms)
const PAYLOAD = { seed: 42 };
const RATED_POLICY = { initial: 1, widenPerSecond: 0.001 };
const ROUNDS = 5;

export interface DepthResult {
  depth: number;
  /** Median script time inside Redis, µs. */
  serverUs: number;
  /** Median round trip on the client, µs (includes the network and ioredis). */
  clientUs: number;
  samples: number;
  /** Samples dropped (and retaken) because another client's script ran between the INFO snapshots. */
  discarded: number;
  /** Long samples disturbed so, timed instead by the entry Redis's slowlog made of them. */
  fromSlowlog: number;
  setupMs: number;
  /**
   * (d) only: the queue's first measured admission, which builds its rating tree, timed apart
   * (µs inside Redis; null at depth 0, which has no tree, or when it could not be timed).
   */
  treeBuildUs?: number | null;
}

export interface BurstResult {
  depth: number;
  /** Median over the repeats of: the one admission's script time / retired tickets, µs. */
  perRetiredUs: number;
  burstServerUs: number[];
  repeats: number;
  /** Median script time of the 200 admissions right after the burst, µs. */
  nextServerUs: number;
  nextClientUs: number;
  nextSamples: number;
  /** The very first admission after the burst, µs. */
  firstNextUs: number;
  /** Median of admissions 300..400 after the burst, µs: where it settles. */
  settledNextUs: number;
  /** The same queue shape without a burst, measured just before this burst: the baseline, µs. */
  baselineUs: number;
  setupMs: number;
}

export interface AdmissionResults {
  rounds: number;
  ownHead: DepthResult[];
  ownHeadRated: DepthResult[];
  rated: DepthResult[];
  floodInWindow: DepthResult[];
  floodWithFit: DepthResult[];
  turns: DepthResult[];
  turnsWithFit: DepthResult[];
  oldestBehind: DepthResult[];
  burst: BurstResult[];
}

function stateOf(outcome: CreateOutcome): string {
  if (!('ticket' in outcome)) throw new Error(`bench admission refused: ${outcome.conflict}`);
  return (JSON.parse(outcome.ticket) as { state: string }).state;
}

/** One measured series: its admissions, what follows each (untimed), and its samples so far. */
class Series {
  private next = 0;
  readonly server: number[] = [];
  readonly client: number[] = [];
  discarded = 0;
  /** Samples timed by Redis's slowlog because another client's script ran meanwhile. */
  fromSlowlog = 0;

  constructor(
    private readonly ctx: BenchContext,
    /** The admitted ticket's ID for call i: it finds the call in the slowlog. */
    private readonly idOf: (i: number) => string,
    private readonly admit: (i: number) => Promise<CreateOutcome>,
    private readonly expectState: string,
    private readonly after: (i: number) => Promise<unknown>,
  ) {}

  async warmup(count: number): Promise<void> {
    for (let n = 0; n < count; n++) {
      const i = this.next++;
      const state = stateOf(await this.admit(i));
      if (state !== this.expectState) throw new Error(`bench shape broken: warm-up admission ${state}, expected ${this.expectState}`);
      await this.after(i);
    }
  }

  /** The next admission, timed inside Redis but kept out of the samples (a one-off, such as a build). */
  async once(): Promise<number | null> {
    const i = this.next++;
    const timed = await timeScriptCall(this.ctx.admin, () => this.admit(i), this.idOf(i));
    const state = stateOf(timed.value);
    if (state !== this.expectState) throw new Error(`bench shape broken: first admission ${state}, expected ${this.expectState}`);
    await this.after(i);
    return timed.serverUs;
  }

  /** Takes `count` more samples (disturbed ones are retried, up to as many again). */
  async take(count: number): Promise<void> {
    const target = this.server.length + count;
    let retries = 0;
    while (this.server.length < target) {
      const i = this.next++;
      const timed = await timeScriptCall(this.ctx.admin, () => this.admit(i), this.idOf(i));
      const state = stateOf(timed.value);
      if (state !== this.expectState) {
        throw new Error(`bench shape broken: measured admission ${state}, expected ${this.expectState} (after ${this.discarded} disturbed samples)`);
      }
      await this.after(i);
      if (timed.serverUs === null) {
        this.discarded++;
        if (++retries > 5 * count + 20) throw new Error('too many disturbed samples: another client runs scripts on this Redis');
        continue;
      }
      if (timed.source === 'slowlog') this.fromSlowlog++;
      this.server.push(timed.serverUs);
      this.client.push(timed.clientUs);
    }
  }

  result(depth: number, setupMs: number): DepthResult {
    return { depth, serverUs: median(this.server), clientUs: median(this.client), samples: this.server.length, discarded: this.discarded, fromSlowlog: this.fromSlowlog, setupMs };
  }
}

/** Measures every series in ROUNDS rounds of `perRound[k]` samples each, in turn. */
async function interleave(series: Series[], perRound: number[], warmup: number[]): Promise<void> {
  for (let k = 0; k < series.length; k++) await series[k]!.warmup(warmup[k]!);
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order, so no series always runs first after the previous round.
    const order = series.map((_, k) => k);
    if (round % 2 === 1) order.reverse();
    for (const k of order) await series[k]!.take(perRound[k]!);
  }
}

const unrated = (key: string): Queue => ({ key, size: 2 });
const rated = (key: string): Queue => ({ key, size: 2, rating: RATED_POLICY });

/**
 * (a) The oldest N waiting tickets all belong to the joining player; the joiner waits. Unrated:
 * N tickets of one player. Rated: N tickets of one player at rating 1000, then one of another
 * player at 5000 (so the queue is not all the joiner's), the joiner at 1000.
 */
async function ownHead(ctx: BenchContext, app: BenchApp, log: (line: string) => void, kind: 'unrated' | 'rated'): Promise<DepthResult[]> {
  const player = 'player-own-head!'; // 16 bytes
  const tag = kind === 'rated' ? 'ar' : 'a';
  const rating = kind === 'rated' ? { rating: 1000 } : {};
  const built: Array<{ depth: number; series: Series; setupMs: number }> = [];
  for (const depth of DEPTHS) {
    const queue = kind === 'rated' ? rated(`own-rated:${depth}`) : unrated(`own:${depth}`);
    const start = nowMs();
    await pool(depth, 2000, (i) => ctx.store.createTicket(app.appId, valid({ id: `${tag}${depth}-${i}`, player, queue, payload: PAYLOAD, ...rating })));
    if (kind === 'rated' && depth > 0) {
      await ctx.store.createTicket(app.appId, valid({ id: `${tag}${depth}-other`, player: 'player-other....', queue, payload: PAYLOAD, rating: 5000 }));
    }
    const setupMs = nowMs() - start;
    if (depth > 0) log(`  (a) ${kind}: built depth ${depth} in ${(setupMs / 1000).toFixed(1)} s`);
    const id = (i: number) => `${tag}${depth}-join-${i}`;
    const series = new Series(
      ctx,
      id,
      (i) => ctx.store.createTicket(app.appId, valid({ id: id(i), player, queue, payload: PAYLOAD, ...rating })),
      'waiting',
      (i) => ctx.store.cancelTicket(app.appId, id(i)),
    );
    built.push({ depth, series, setupMs });
  }
  await interleave(built.map((b) => b.series), built.map(() => 60), built.map(() => 20));
  return built.map((b) => b.series.result(b.depth, b.setupMs));
}

/**
 * (b) N mutually incompatible rated tickets: ratings i*1000, policy {initial 1, widen 0.001/s},
 * all admitted at the frozen T0, so no band reaches a neighbour. The joiner's rating falls in
 * the middle gap (between the two middle ratings), so it fits none, waits, and is cancelled.
 */
async function ratedQueue(ctx: BenchContext, app: BenchApp, log: (line: string) => void): Promise<DepthResult[]> {
  const plans = [
    { depth: 0, perRound: 60, warmup: 20 },
    { depth: 1_000, perRound: 60, warmup: 5 },
    { depth: 10_000, perRound: 60, warmup: 5 },
    { depth: 100_000, perRound: 60, warmup: 5 },
  ];
  const built: Array<{ depth: number; series: Series; setupMs: number }> = [];
  for (const { depth } of plans) {
    const queue = rated(`rated:${depth}`);
    const ticket = (i: number) =>
      valid({ id: `b${depth}-${i}`, player: `r${i}`.padEnd(16, '.'), queue, rating: i * 1000, payload: PAYLOAD });
    const start = nowMs();
    await pool(depth, 64, (i) => ctx.store.createTicket(app.appId, ticket(i)));
    const setupMs = nowMs() - start;
    if (depth > 0) log(`  (b) built depth ${depth} in ${(setupMs / 1000).toFixed(1)} s`);
    const joinerRating = Math.floor(depth / 2) * 1000 + 500;
    const id = (i: number) => `b${depth}-join-${i}`;
    const series = new Series(
      ctx,
      id,
      (i) => ctx.store.createTicket(app.appId, valid({ id: id(i), player: 'joiner-rated....', queue, rating: joinerRating, payload: PAYLOAD })),
      'waiting',
      (i) => ctx.store.cancelTicket(app.appId, id(i)),
    );
    built.push({ depth, series, setupMs });
  }
  await interleave(built.map((b) => b.series), plans.map((p) => p.perRound), plans.map((p) => p.warmup));
  return built.map((b) => b.series.result(b.depth, b.setupMs));
}

/**
 * A rated shape whose window is wide: at T0 an old ticket of `player-old` at `oldRating`; at
 * T0 + `waitMs` a flood of `depth` tickets (`flood(i)`), then with `withFit` one fitting ticket;
 * the joiner then waits (and is cancelled) or pairs with the fitting ticket (and the next one
 * is laid down, untimed).
 */
interface WideShape {
  tag: string;
  name: string;
  policy: { initial: number; widenPerSecond: number };
  oldRating: number;
  waitMs: number;
  flood: (i: number, depth: number) => { player: string; rating: number };
  fit: { player: string; rating: number };
  joiner: { player: string; rating: number };
  /** Clock step after every flood is laid down (ms), before measuring. */
  settleMs?: number;
  /** Joiners pair with the flood's tickets (enough for every measured one) where there is a flood: none is laid down. */
  pairsWithFlood?: boolean;
  /** The first admission at every depth but 0 builds the queue's rating tree: timed apart (treeBuildUs). */
  buildsTree?: boolean;
}

async function wideWindow(ctx: BenchContext, app: BenchApp, log: (line: string) => void, shape: WideShape, withFit: boolean): Promise<DepthResult[]> {
  const plans = [
    { depth: 0, perRound: 60, warmup: 20 },
    { depth: 1_000, perRound: 60, warmup: 5 },
    { depth: 10_000, perRound: 60, warmup: 5 },
    { depth: 100_000, perRound: 60, warmup: 5 },
  ];
  const { tag, name } = shape;
  const queueOf = (depth: number): Queue => ({ key: `${tag}wide:${depth}`, size: 2, rating: shape.policy });
  await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0));
  for (const { depth } of plans) {
    await ctx.store.createTicket(app.appId, valid({ id: `${tag}${depth}-old`, player: 'player-old......', queue: queueOf(depth), rating: shape.oldRating, payload: PAYLOAD }));
  }
  await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0 + shape.waitMs));
  const built: Array<{ depth: number; series: Series; setupMs: number; treeBuildUs?: number | null }> = [];
  for (const { depth } of plans) {
    const queue = queueOf(depth);
    const fit = async (i: number) => {
      const state = stateOf(await ctx.store.createTicket(app.appId, valid({ id: `${tag}${depth}-fit-${i}`, ...shape.fit, queue, payload: PAYLOAD })));
      if (state !== 'waiting') throw new Error(`bench shape broken: ${name}'s fitting ticket ${state}`);
    };
    const start = nowMs();
    await pool(depth, 2000, (i) => ctx.store.createTicket(app.appId, valid({ id: `${tag}${depth}-${i}`, ...shape.flood(i, depth), queue, payload: PAYLOAD })));
    if (withFit) await fit(0);
    const setupMs = nowMs() - start;
    if (depth > 0) log(`  ${name} built depth ${depth} in ${(setupMs / 1000).toFixed(1)} s`);
    const id = (i: number) => `${tag}${depth}-join-${i}`;
    const series = new Series(
      ctx,
      id,
      (i) => ctx.store.createTicket(app.appId, valid({ id: id(i), ...shape.joiner, queue, payload: PAYLOAD })),
      withFit ? 'matched' : 'waiting',
      async (i) => {
        if (!withFit) await ctx.store.cancelTicket(app.appId, id(i));
        else if (!(shape.pairsWithFlood && depth > 0)) await fit(i + 1);
      },
    );
    built.push({ depth, series, setupMs });
  }
  if (shape.settleMs) await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0 + shape.waitMs + shape.settleMs));
  if (shape.buildsTree) {
    for (const b of built.filter((b) => b.depth > 0)) {
      b.treeBuildUs = await b.series.once();
      if (!(await ctx.admin.exists(ctx.keys.queueRatingTree(app.appId, queueOf(b.depth).key)))) {
        throw new Error(`bench shape broken: ${name}'s first admission at depth ${b.depth} built no rating tree`);
      }
      log(`  ${name} depth ${b.depth}: the admission that builds the rating tree took ${b.treeBuildUs === null ? '(not timed)' : `${(b.treeBuildUs / 1000).toFixed(1)} ms`} in Redis`);
    }
  }
  await interleave(built.map((b) => b.series), plans.map((p) => p.perRound), plans.map((p) => p.warmup));
  return built.map((b) => ({ ...b.series.result(b.depth, b.setupMs), ...(shape.buildsTree ? { treeBuildUs: b.treeBuildUs ?? null } : {}) }));
}

/**
 * (b') N rated tickets of ONE other player, each just out of the joiner's reach, inside a window
 * made wide by an older ticket (DESIGN.md's (b) read as a single player's flood): policy
 * {initial 10, widen 1/s}; at T0 a ticket at -20; at T0+1000s its band is 1010, the flood waits at
 * 1015 (band 10), the joiner at 1000 fits none, waits and is cancelled. The window around 1000
 * holds the whole flood, which pairing.lua passes because none of it reaches the joiner.
 * (b'') the same, with one more ticket of the flood's player at 1005 after the flood: the joiner
 * pairs with it, and the next such ticket is laid down after each admission (untimed). The
 * player is no longer one without a reaching ticket: the flood is passed because the read,
 * nearest first, has read that player's one reaching ticket before it meets the flood.
 */
function floodInWindow(ctx: BenchContext, app: BenchApp, log: (line: string) => void, withFit: boolean): Promise<DepthResult[]> {
  const player = 'player-flood....';
  return wideWindow(ctx, app, log, {
    tag: withFit ? 'g' : 'f',
    name: withFit ? "(b'')" : "(b')",
    policy: { initial: 10, widenPerSecond: 1 },
    oldRating: -20,
    waitMs: 1_000_000,
    flood: () => ({ player, rating: 1015 }),
    fit: { player, rating: 1005 },
    joiner: { player: 'joiner-flood....', rating: 1000 },
  }, withFit);
}

/**
 * (b''') DESIGN.md's (b) arranged against both reads of the rated search: two players' floods
 * take turns in rating (flood-a at 15, flood-b at 26, flood-a at 37, …: 11 apart, more than
 * `initial` 10, so neighbours never paired), inside a window made wide by an old ticket far
 * below (policy {initial 10, widen 1/s}; at T0 a ticket at -(W + 30); at T0 + W s, W = 11 * 100k +
 * 100, its band W + 10 spans every flood). The joiner at 0 fits nothing. The admission-order read
 * meets only tickets that do not fit, and no run of one player is longer than one ticket, so
 * before pairing.lua counted fitting tickets both reads read the whole flood (52 ms at 10k).
 * With `withFit`, one ticket of a third player at 3 comes after the flood: the joiner pairs with
 * it, and the next such ticket is laid down after each admission (untimed).
 */
function floodsTakingTurns(ctx: BenchContext, app: BenchApp, log: (line: string) => void, withFit: boolean): Promise<DepthResult[]> {
  const wait = 11 * DEPTHS[DEPTHS.length - 1]! + 100; // seconds
  return wideWindow(ctx, app, log, {
    tag: withFit ? 'u' : 't',
    name: withFit ? "(b''') + fit" : "(b''')",
    policy: { initial: 10, widenPerSecond: 1 },
    oldRating: -(wait + 30),
    waitMs: wait * 1000,
    flood: (i) => ({ player: i % 2 ? 'player-flood-b..' : 'player-flood-a..', rating: 15 + 11 * i }),
    fit: { player: 'player-near.....', rating: 3 },
    joiner: { player: 'joiner-turns....', rating: 0 },
  }, withFit);
}

/**
 * (d) The oldest partner lies behind many other tickets in both reads (the shape the window
 * read and the count cannot make cheap: pairing.lua answers it from the queue's rating tree).
 * Policy {initial 10, widen 1/s}. At T0 an old ticket far below (-1e7) makes the window wide; at
 * T0 + 1000 s, half the depth: tickets of player-far at -2e7, which never fit; then the other
 * half: two players taking turns at 15, 26, 37, … (11 apart, so they never paired). At
 * T0 + 1000 s + S, S = 11 * 50k + 100 s, every one of those fits a joiner at 0, and the oldest
 * is the one admitted first: the window read must read them all to know, the admission-order
 * read must pass every far ticket first. Each joiner pairs with the oldest (the flood holds
 * enough for every measured one); at depth 0 it pairs with a ticket at 3, laid down after each.
 */
function oldestBehindOthers(ctx: BenchContext, app: BenchApp, log: (line: string) => void): Promise<DepthResult[]> {
  const half = DEPTHS[DEPTHS.length - 1]! / 2;
  return wideWindow(ctx, app, log, {
    tag: 'd',
    name: '(d)',
    policy: { initial: 10, widenPerSecond: 1 },
    oldRating: -1e7,
    waitMs: 1_000_000,
    flood: (i, depth) =>
      i < depth / 2 ? { player: 'player-far......', rating: -2e7 } : { player: i % 2 ? 'player-flood-b..' : 'player-flood-a..', rating: 15 + 11 * (i - depth / 2) },
    fit: { player: 'player-near.....', rating: 3 },
    joiner: { player: 'joiner-oldest...', rating: 0 },
    settleMs: (11 * half + 100) * 1000,
    pairsWithFlood: true,
    buildsTree: true,
  }, true);
}

const BURST_PLAYER = 'player-burst....';
const NEXT = 400; // admissions timed right after a burst
/** Live tickets beyond the measured admissions: disturbed samples are retaken, and each takes one. */
const SPARE = 1000;
const BASELINE = 200; // admissions of the no-burst queue timed just before each burst

/**
 * (c) A queue of one player's tickets: a burst of N with cutoff T0+1s at the head, then `live`
 * ones without cutoff. When the clock moves to T0+5s, the ONE admission of another player
 * retires all N and pairs with the first live ticket; the admissions after it pair with the
 * next live tickets. With N = 0 it is the baseline queue.
 */
async function burstQueue(ctx: BenchContext, app: BenchApp, depth: number, live: number, tag: string): Promise<{ queue: Queue; setupMs: number }> {
  const queue = unrated(`burst:${depth}:${tag}`);
  const start = nowMs();
  await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0));
  await pool(depth, 2000, (i) =>
    ctx.store.createTicket(app.appId, valid({ id: `c${depth}${tag}-x${i}`, player: BURST_PLAYER, queue, payload: PAYLOAD, expiresAt: T0 + 1000 })),
  );
  await pool(live, 500, (i) => ctx.store.createTicket(app.appId, valid({ id: `c${depth}${tag}-l${i}`, player: BURST_PLAYER, queue, payload: PAYLOAD })));
  await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0 + 5000));
  return { queue, setupMs: nowMs() - start };
}

function joiners(ctx: BenchContext, app: BenchApp, queue: Queue, tag: string): Series {
  const id = (i: number) => `c-${tag}-next-${i}`;
  return new Series(
    ctx,
    id,
    (i) => ctx.store.createTicket(app.appId, valid({ id: id(i), player: `joiner-${i}`.padEnd(16, '.'), queue, payload: PAYLOAD })),
    'matched',
    async () => {},
  );
}

/** Removes a finished burst repeat's tickets (keeps the app's indexes from growing between repeats). */
async function deleteRepeat(ctx: BenchContext, app: BenchApp, depth: number, tag: string, live: number): Promise<void> {
  const ids: string[] = [];
  for (let i = 0; i < depth; i++) ids.push(`c${depth}${tag}-x${i}`);
  for (let i = 0; i < live; i++) ids.push(`c${depth}${tag}-l${i}`);
  for (let from = 0; from < ids.length; from += 5000) {
    const part = ids.slice(from, from + 5000);
    const pipeline = ctx.bulk.pipeline();
    pipeline.unlink(...part.map((id) => `${app.scope}t:${id}`));
    pipeline.zrem(`${app.scope}all`, ...part);
    pipeline.zrem(`${app.scope}p:${BURST_PLAYER}`, ...part);
    await pipeline.exec();
  }
  const queue = `burst:${depth}:${tag}`;
  await ctx.bulk.unlink(`${app.scope}qo:${queue.length}:${queue}${BURST_PLAYER}`, `${app.scope}qh:${queue}`);
}

async function burst(ctx: BenchContext, app: BenchApp, baseline: Series, depth: number, repeats: number): Promise<BurstResult> {
  const live = NEXT + SPARE; // each measured admission pairs with one live ticket
  const perRetired: number[] = [];
  const burstServerUs: number[] = [];
  let setupMs = 0;
  let last: { queue: Queue; setupMs: number } | null = null;
  for (let r = 0; r < repeats; r++) {
    const tag = `r${r}`;
    last = await burstQueue(ctx, app, depth, live, tag);
    setupMs += last.setupMs;
    const queue = last.queue;
    if (r === repeats - 1) await baseline.take(BASELINE); // adjacent in time to the admissions it is compared with
    const joinerId = `c${depth}${tag}-joiner`;
    let timed = await timeScriptCall(
      ctx.admin,
      () => ctx.store.createTicket(app.appId, valid({ id: joinerId, player: 'joiner-burst....', queue, payload: PAYLOAD })),
      joinerId,
    );
    if (stateOf(timed.value) !== 'matched') throw new Error('bench shape broken: the burst admission did not pair');
    const left = await ctx.admin.zcard(`${app.scope}qx:${queue.key}`);
    if (left !== 0) throw new Error(`bench shape broken: ${left} expired tickets left after the burst admission`);
    // Another client's script ran meanwhile: the client round trip is the honest fallback.
    if (timed.serverUs === null) timed = { ...timed, serverUs: timed.clientUs };
    burstServerUs.push(timed.serverUs!);
    perRetired.push(timed.serverUs! / depth);
    if (r < repeats - 1) await deleteRepeat(ctx, app, depth, tag, live);
  }
  // No warm-up: the first admissions after the burst are the point. The burst leaves its retired
  // IDs as garbage in Redis's Lua heap (~8 MB for 100k), collected by the next few hundred scripts.
  const after = joiners(ctx, app, last!.queue, `${depth}`);
  await after.take(NEXT);
  const baselineUs = median(baseline.server.slice(-BASELINE));
  return {
    depth,
    perRetiredUs: median(perRetired),
    burstServerUs,
    repeats,
    nextServerUs: median(after.server.slice(0, 200)),
    nextClientUs: median(after.client.slice(0, 200)),
    nextSamples: 200,
    firstNextUs: after.server[0]!,
    settledNextUs: median(after.server.slice(300, 400)),
    baselineUs,
    setupMs: setupMs / repeats,
  };
}

export async function runAdmission(ctx: BenchContext, log: (line: string) => void): Promise<AdmissionResults> {
  const results: Partial<AdmissionResults> = { rounds: ROUNDS };
  {
    const app = await registerApp(ctx, 'own-head');
    await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0));
    results.ownHead = await ownHead(ctx, app, log, 'unrated');
    results.ownHeadRated = await ownHead(ctx, app, log, 'rated');
    for (const [kind, rs] of [['unrated', results.ownHead], ['rated', results.ownHeadRated]] as const) {
      for (const r of rs) log(`  (a) own tickets at head, ${kind}, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    }
    await deleteApp(ctx, app);
  }
  {
    const app = await registerApp(ctx, 'rated');
    await ctx.admin.set(ctx.keys.testClock(app.appId), String(T0));
    results.rated = await ratedQueue(ctx, app, log);
    for (const r of results.rated) log(`  (b) incompatible rated, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    await deleteApp(ctx, app);
  }
  {
    const app = await registerApp(ctx, 'flood');
    results.floodInWindow = await floodInWindow(ctx, app, log, false);
    for (const r of results.floodInWindow) log(`  (b') one player's flood in a wide window, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    results.floodWithFit = await floodInWindow(ctx, app, log, true);
    for (const r of results.floodWithFit) log(`  (b'') the same player's flood and one fitting ticket, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    await deleteApp(ctx, app);
  }
  {
    const app = await registerApp(ctx, 'turns');
    results.turns = await floodsTakingTurns(ctx, app, log, false);
    for (const r of results.turns) log(`  (b''') two players' floods taking turns in a wide window, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    results.turnsWithFit = await floodsTakingTurns(ctx, app, log, true);
    for (const r of results.turnsWithFit) log(`  (b''') + fit, one fitting ticket nearest, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    await deleteApp(ctx, app);
  }
  {
    const app = await registerApp(ctx, 'oldest');
    results.oldestBehind = await oldestBehindOthers(ctx, app, log);
    for (const r of results.oldestBehind) log(`  (d) the oldest partner behind many others in both reads, depth ${r.depth}: ${r.serverUs} µs in Redis (${r.samples} samples; ${r.discarded} disturbed and retaken, ${r.fromSlowlog} timed by the slowlog)`);
    await deleteApp(ctx, app);
  }
  {
    const app = await registerApp(ctx, 'burst');
    const base = await burstQueue(ctx, app, 0, 3 * BASELINE + 20 + SPARE, 'base');
    const baseline = joiners(ctx, app, base.queue, 'base');
    await baseline.warmup(20);
    results.burst = [];
    for (const [depth, repeats] of [[1_000, 5], [10_000, 3], [100_000, 1]] as const) {
      const b = await burst(ctx, app, baseline, depth, repeats);
      results.burst.push(b);
      log(`  (c) burst of ${depth}: ${b.perRetiredUs.toFixed(2)} µs per retired ticket (${repeats}x); next 200 admissions ${b.nextServerUs} µs (first ${b.firstNextUs} µs, 300th-400th ${b.settledNextUs} µs), no-burst queue just before ${b.baselineUs} µs`);
    }
    await deleteApp(ctx, app);
  }
  return results as AdmissionResults;
}
