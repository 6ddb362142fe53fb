/**
 * listTickets page time with 1k and with 1M tickets in the app (100k with --quick): two apps,
 * filled alike through the real script (pipelined pairs: a few hundred queues, many players,
 * every admission pairs), then timed in interleaved rounds, so a change in the machine's load
 * touches both alike.
 */
import { LIMITS } from '../../src/shared/matchmaking-types.js';
import { type BenchApp, type BenchContext, deleteApp, median, nowMs, pool, registerApp, timeScriptCall, valid } from './common.js';

export interface PageTimes {
  tickets: number;
  /** Median script time in Redis (µs) of one page, per kind of page. */
  first: number;
  middle: number;
  player: number;
  clientFirst: number;
  samples: number;
  discarded: number;
}

export interface ListResults {
  small: PageTimes;
  large: PageTimes;
  populateMs: number;
  populateRate: number;
  quick: boolean;
  pageSize: number;
  queues: number;
  players: number;
}

const QUEUES = 300;
const PLAYERS = 20_000;
const HERO = 'player-hero.....'; // one player with a ticket in every 40: a full player page at any size
const PAYLOAD = { seed: 'bench-list-payload-0123456789abcdef' };
const ROUNDS = 5;
const PER_ROUND = 40;

const idOf = (k: number) => `t-${k.toString(36).padStart(10, '0')}`;

/** Admits tickets [from, to) in pairs (ticket 2j and 2j+1 share a queue, different players). */
async function fill(ctx: BenchContext, app: BenchApp, from: number, to: number): Promise<void> {
  const player = (k: number) => (k % 40 === 0 ? HERO : `u${k % PLAYERS}`.padEnd(16, '.'));
  const ticket = (k: number) => valid({ id: idOf(k), player: player(k), queue: { key: `lq${(k >> 1) % QUEUES}`, size: 2 }, payload: PAYLOAD });
  await pool((to - from) / 2, 2000, (j) => {
    const k = from + 2 * j;
    return Promise.all([ctx.store.createTicket(app.appId, ticket(k)), ctx.store.createTicket(app.appId, ticket(k + 1))]);
  });
}

const KINDS = ['first', 'middle', 'player'] as const;
type Kind = (typeof KINDS)[number];

function positionOf(kind: Kind, tickets: number) {
  switch (kind) {
    case 'first':
      return { snapshot: '', after: '0' };
    case 'middle':
      return { snapshot: String(tickets), after: String(Math.floor(tickets / 2)) };
    case 'player':
      return { player: HERO, snapshot: '', after: '0' };
  }
}

interface Samples {
  server: Record<Kind, number[]>;
  client: number[];
  discarded: number;
}

async function takeSamples(ctx: BenchContext, app: BenchApp, tickets: number, kind: Kind, count: number, into: Samples): Promise<void> {
  const position = positionOf(kind, tickets);
  let taken = 0;
  let retries = 0;
  while (taken < count) {
    const timed = await timeScriptCall(ctx.admin, () => ctx.store.listTickets(app.appId, position, LIMITS.pageSize));
    if (timed.value.tickets.length !== LIMITS.pageSize) throw new Error(`list ${kind} page has ${timed.value.tickets.length} tickets`);
    if (timed.serverUs === null) {
      into.discarded++;
      if (++retries > 5 * count + 20) throw new Error('too many disturbed samples: another client runs scripts on this Redis');
      continue;
    }
    into.server[kind].push(timed.serverUs);
    if (kind === 'first') into.client.push(timed.clientUs);
    taken++;
  }
}

function pageTimes(tickets: number, samples: Samples): PageTimes {
  return {
    tickets,
    first: median(samples.server.first),
    middle: median(samples.server.middle),
    player: median(samples.server.player),
    clientFirst: median(samples.client),
    samples: samples.server.first.length,
    discarded: samples.discarded,
  };
}

export async function runList(ctx: BenchContext, large: number, quick: boolean, log: (line: string) => void): Promise<ListResults> {
  const smallApp = await registerApp(ctx, 'list-1k');
  const largeApp = await registerApp(ctx, 'list-large');
  try {
    await fill(ctx, smallApp, 0, 1000);
    const start = nowMs();
    let done = 0;
    const step = 100_000;
    while (done < large) {
      const to = Math.min(large, done + step);
      await fill(ctx, largeApp, done, to);
      done = to;
      const seconds = (nowMs() - start) / 1000;
      log(`  filled ${done.toLocaleString('en-US')} tickets (${seconds.toFixed(0)} s, ${(done / seconds).toFixed(0)}/s)`);
    }
    const populateMs = nowMs() - start;
    for (const [app, tickets] of [[smallApp, 1000], [largeApp, large]] as const) {
      const seq = await ctx.admin.get(`${app.scope}seq`);
      if (Number(seq) !== tickets) throw new Error(`list setup: the app has ${seq} tickets, expected ${tickets}`);
    }
    const empty = (): Samples => ({ server: { first: [], middle: [], player: [] }, client: [], discarded: 0 });
    const small = empty();
    const big = empty();
    const warm = empty();
    for (const kind of KINDS) {
      await takeSamples(ctx, smallApp, 1000, kind, 10, warm);
      await takeSamples(ctx, largeApp, large, kind, 10, warm);
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of KINDS) {
        const pair = [[smallApp, 1000, small], [largeApp, large, big]] as const;
        for (const [app, tickets, into] of round % 2 === 0 ? pair : [...pair].reverse()) await takeSamples(ctx, app, tickets, kind, PER_ROUND, into);
      }
    }
    const result: ListResults = {
      small: pageTimes(1000, small),
      large: pageTimes(large, big),
      populateMs,
      populateRate: large / (populateMs / 1000),
      quick,
      pageSize: LIMITS.pageSize,
      queues: QUEUES,
      players: PLAYERS,
    };
    log(`  1k tickets: first page ${result.small.first} µs, middle ${result.small.middle} µs, player ${result.small.player} µs in Redis`);
    log(`  ${large.toLocaleString('en-US')} tickets: first page ${result.large.first} µs, middle ${result.large.middle} µs, player ${result.large.player} µs in Redis`);
    return result;
  } finally {
    await deleteApp(ctx, smallApp);
    await deleteApp(ctx, largeApp);
  }
}
