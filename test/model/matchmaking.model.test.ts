import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Json, Queue, RatingPolicy, TicketInput } from '../../src/shared/matchmaking-types.js';
import { Harness, type TestApp } from '../helpers/harness.js';
import { type ModelReply, ReferenceApp, type Traversal, sortedJson } from './reference.js';

/**
 * Model-based test of spec section A through HTTP: random command sequences run against the
 * real server and against test/model/reference.ts, and every response must equal the model's.
 * Two apps per sequence (isolation between apps is part of what is compared), four players,
 * an unrated and a rated queue, cutoffs and clock steps that land on exact boundaries.
 *
 * A failure prints fast-check's seed and path; replay it with
 *   VERSUS_MODEL_SEED=<seed> VERSUS_MODEL_PATH=<path> npx vitest run test/model
 */

const RUNS = 1000;
const EXPIRY_RUNS = 300;
const START = 1_000_000;

type AppIndex = 0 | 1;
type Command =
  | { kind: 'create'; app: AppIndex; player: number; queue: 'unrated' | 'rated' | 'otherPolicy'; rating: number; cutoff: number | null; payload: number }
  /** One player's tickets, enough to spill an app-wide listing onto a second page. */
  | { kind: 'flood'; app: AppIndex; player: number; count: number }
  | { kind: 'retry'; pick: number; shuffle: number }
  | { kind: 'conflictingRetry'; pick: number; change: 'payload' | 'player' | 'rating' | 'expiresAt' | 'queue' }
  | { kind: 'cancel'; pick: number }
  | { kind: 'cancelUnknown'; app: AppIndex }
  | { kind: 'list'; app: AppIndex; player: number | null; byId: number | null }
  | { kind: 'listNext'; pick: number }
  | { kind: 'advance'; ms: number };

/**
 * The command mix. `expiry` weighs it towards what retiring expired tickets can get wrong: one
 * app, most tickets with a cutoff still ahead, frequent clock steps and reads, so a ticket that
 * matched, then passed its cutoff, is often followed by an admission to its queue and a read.
 */
function commandsArb(mix: 'all' | 'expiry'): fc.Arbitrary<Command> {
  const expiry = mix === 'expiry';
  const appArb = expiry ? fc.constant<AppIndex>(0) : fc.constantFrom<AppIndex>(0, 1);
  const cutoffs = fc.constantFrom(-1, 0, 1, 500, 1000);
  return fc.oneof(
    {
      weight: 16,
      arbitrary: fc.record({
        kind: fc.constant('create' as const),
        app: appArb,
        player: fc.integer({ min: 0, max: 3 }),
        queue: fc.constantFrom('unrated' as const, 'rated' as const, 'rated' as const, 'otherPolicy' as const),
        rating: fc.integer({ min: 0, max: 8 }).map((n) => n / 2),
        // Relative to now: in the past, exactly now, or later by amounts the clock steps hit exactly.
        cutoff: expiry ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom(1, 500, 1000) }, { weight: 1, arbitrary: fc.constant(null) }) : fc.option(cutoffs, { nil: null }),
        payload: fc.integer({ min: 0, max: 9 }),
      }),
    },
    { weight: expiry ? 0 : 1, arbitrary: fc.record({ kind: fc.constant('flood' as const), app: appArb, player: fc.integer({ min: 0, max: 3 }), count: fc.integer({ min: 20, max: 30 }) }) },
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('retry' as const), pick: fc.nat(), shuffle: fc.nat() }) },
    {
      weight: expiry ? 0 : 4,
      arbitrary: fc.record({
        kind: fc.constant('conflictingRetry' as const),
        pick: fc.nat(),
        change: fc.constantFrom('payload' as const, 'player' as const, 'rating' as const, 'expiresAt' as const, 'queue' as const),
      }),
    },
    { weight: expiry ? 2 : 6, arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }) },
    { weight: expiry ? 0 : 2, arbitrary: fc.record({ kind: fc.constant('cancelUnknown' as const), app: appArb }) },
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('list' as const),
        app: appArb,
        player: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
        byId: fc.option(fc.nat(), { nil: null }),
      }),
    },
    { weight: expiry ? 0 : 4, arbitrary: fc.record({ kind: fc.constant('listNext' as const), pick: fc.nat() }) },
    { weight: expiry ? 10 : 6, arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(0, 1, 499, 500, 1000, 2500) }) },
  );
}

const policyArb: fc.Arbitrary<RatingPolicy> = fc
  .record(
    { initial: fc.constantFrom(0, 0.5, 1), widenPerSecond: fc.constantFrom(0.5, 1, 2), max: fc.constantFrom(1, 2, 3) },
    { requiredKeys: ['initial', 'widenPerSecond'] },
  )
  .map((p) => (p.max !== undefined && p.max < p.initial ? { ...p, max: p.initial } : p));

/** The same JSON value with its object keys in another order (spec: key order does not matter). */
function shuffled(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffled(v, seed + i));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>);
  const rotation = entries.length === 0 ? 0 : seed % entries.length;
  const order = [...entries.slice(rotation), ...entries.slice(0, rotation)].reverse();
  return Object.fromEntries(order.map(([k, v]) => [k, shuffled(v, seed + 1)]));
}

let harness: Harness;
beforeAll(async () => {
  harness = await Harness.start();
});
afterAll(async () => {
  await harness?.stop();
});

/** One app on both sides: the server's (with one token for the sequence) and the model's. */
interface Side {
  app: TestApp;
  token: string;
  model: ReferenceApp;
}

interface OpenTraversal {
  side: Side;
  cursor: string;
  model: Traversal;
}

class Run {
  private now = START;
  private readonly traversals: OpenTraversal[] = [];
  /** Server match ID <-> model match ID of one app, bound at first sight (match IDs are opaque). */
  private readonly matchIds = new Map<string, string>();
  private readonly modelMatchIds = new Map<string, string>();
  private idCounter = 0;
  readonly log: string[] = [];

  constructor(
    private readonly sides: [Side, Side],
    private readonly policy: RatingPolicy,
  ) {}

  private queue(kind: 'unrated' | 'rated' | 'otherPolicy'): Queue {
    if (kind === 'unrated') return { key: 'casual', size: 2 };
    if (kind === 'rated') return { key: 'ranked', size: 2, rating: this.policy };
    // Same key as the rated queue, another policy: queue_conflict once the key is fixed.
    return { key: 'ranked', size: 2, rating: { ...this.policy, widenPerSecond: this.policy.widenPerSecond + 0.25 } };
  }

  private async post(side: Side, operation: string, input: unknown): Promise<{ status: number; body: any }> {
    const response = await fetch(`${harness.url}/api/matchmaking`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${side.token}` },
      body: JSON.stringify({ operation, input }),
    });
    const text = await response.text();
    return { status: response.status, body: JSON.parse(text) };
  }

  /** Replaces server match IDs by the model's, checking the pairing of IDs stays one-to-one. */
  private normalise(side: Side, body: any): any {
    const visit = (ticket: any) => {
      if (ticket?.state !== 'matched') return;
      const real = `${side.app.appId}/${ticket.match.id}`;
      const modelId = this.matchIds.get(real);
      if (modelId === undefined) {
        ticket.match.id = `unbound:${real}`;
        return;
      }
      ticket.match.id = modelId.slice(side.app.appId.length + 1);
    };
    if (Array.isArray(body?.tickets)) body.tickets.forEach(visit);
    else visit(body);
    return body;
  }

  /** Binds match IDs the first time a matched ticket is seen on both sides. */
  private bind(side: Side, actual: any, expected: any): void {
    const pairs: Array<[any, any]> = Array.isArray(actual?.tickets) ? actual.tickets.map((t: any, i: number) => [t, expected?.tickets?.[i]]) : [[actual, expected]];
    for (const [a, e] of pairs) {
      if (a?.state !== 'matched' || e?.state !== 'matched') continue;
      const real = `${side.app.appId}/${a.match.id}`;
      const modelId = `${side.app.appId}/${e.match.id}`;
      if (!this.matchIds.has(real) && !this.modelMatchIds.has(modelId)) {
        this.matchIds.set(real, modelId);
        this.modelMatchIds.set(modelId, real);
      }
    }
  }

  private compare(side: Side, step: string, actual: { status: number; body: any }, expected: { status: number; body: unknown }): void {
    this.bind(side, actual.body, expected.body);
    const seen = { status: actual.status, body: this.normalise(side, structuredClone(actual.body)) };
    expect(sortedJson(seen), `${step}\n${this.log.join('\n')}`).toBe(sortedJson(expected));
  }

  private async setClock(): Promise<void> {
    for (const side of this.sides) await harness.setClock(side.app, this.now);
  }

  async start(): Promise<void> {
    await this.setClock();
  }

  private pickInput(pick: number): { side: Side; input: TicketInput | null; id: string } | null {
    const all = this.sides.flatMap((side) => side.model.known().map((k) => ({ side, ...k })));
    return all.length === 0 ? null : all[pick % all.length]!;
  }

  private async create(side: Side, input: TicketInput, label: string): Promise<void> {
    const expected: ModelReply = side.model.createTicket(input, this.now);
    this.log.push(`${label} ${JSON.stringify(input)} -> ${expected.status}`);
    this.compare(side, label, await this.post(side, 'createTicket', shuffled(input, this.idCounter)), expected);
  }

  async execute(command: Command): Promise<void> {
    switch (command.kind) {
      case 'advance':
        this.now += command.ms;
        this.log.push(`advance ${command.ms} -> ${this.now}`);
        await this.setClock();
        return;
      case 'create': {
        const input: TicketInput = {
          id: `t${++this.idCounter}`,
          player: `p${command.player}`,
          queue: this.queue(command.queue),
          payload: { seed: command.payload } as Json,
          ...(command.queue !== 'unrated' ? { rating: command.rating } : {}),
          ...(command.cutoff === null ? {} : { expiresAt: this.now + command.cutoff }),
        };
        return this.create(this.sides[command.app], input, 'create');
      }
      case 'flood': {
        for (let i = 0; i < command.count; i++) {
          const input: TicketInput = { id: `t${++this.idCounter}`, player: `p${command.player}`, queue: this.queue('unrated'), payload: i };
          await this.create(this.sides[command.app], input, 'flood');
        }
        return;
      }
      case 'retry': {
        const target = this.pickInput(command.pick);
        if (!target) return;
        // A tombstoned ID returns the tombstone whatever is proposed: propose anything.
        const input = target.input ?? { id: target.id, player: 'p0', queue: this.queue('unrated'), payload: 'over a tombstone' };
        return this.create(target.side, shuffled(input, command.shuffle) as TicketInput, 'retry');
      }
      case 'conflictingRetry': {
        const target = this.pickInput(command.pick);
        if (!target?.input) return;
        const base = target.input;
        const changed: TicketInput = { ...base };
        if (command.change === 'payload') changed.payload = { changed: true };
        if (command.change === 'player') changed.player = `${base.player}x`;
        if (command.change === 'rating') {
          if (base.rating === undefined) return;
          changed.rating = base.rating + 0.5;
        }
        if (command.change === 'expiresAt') changed.expiresAt = (base.expiresAt ?? this.now) + 7;
        if (command.change === 'queue') changed.queue = { ...base.queue, key: `${base.queue.key}-other` };
        return this.create(target.side, changed, `conflicting retry (${command.change})`);
      }
      case 'cancel': {
        const target = this.pickInput(command.pick);
        if (!target) return;
        const expected = target.side.model.cancelTicket(target.id, this.now);
        this.log.push(`cancel ${target.id}`);
        this.compare(target.side, `cancel ${target.id}`, await this.post(target.side, 'cancelTicket', { id: target.id }), expected);
        return;
      }
      case 'cancelUnknown': {
        const id = `t${++this.idCounter}`;
        const side = this.sides[command.app];
        const expected = side.model.cancelTicket(id, this.now);
        this.log.push(`cancel unknown ${id}`);
        this.compare(side, `cancel unknown ${id}`, await this.post(side, 'cancelTicket', { id }), expected);
        return;
      }
      case 'list': {
        const side = this.sides[command.app];
        const filter: { player?: string; id?: string } = {};
        if (command.player !== null) filter.player = `p${command.player}`;
        if (command.byId !== null) {
          // Sometimes an ID of the other app: it must not be found.
          const target = this.pickInput(command.byId);
          filter.id = target ? target.id : 'nobody';
        }
        const expected = side.model.listTickets(filter, this.now);
        this.log.push(`list ${JSON.stringify(filter)}`);
        await this.comparePage(side, filter, expected, 'list');
        return;
      }
      case 'listNext': {
        if (this.traversals.length === 0) return;
        const index = command.pick % this.traversals.length;
        const open = this.traversals.splice(index, 1)[0]!;
        const { snapshot: _s, after: _a, ...filter } = open.model;
        const expected = open.side.model.listTickets(filter, this.now, open.model);
        this.log.push(`list next page ${JSON.stringify(filter)}`);
        await this.comparePage(open.side, { ...filter, cursor: open.cursor }, expected, 'list next');
        return;
      }
    }
  }

  private async comparePage(side: Side, query: Record<string, string>, expected: ReturnType<ReferenceApp['listTickets']>, label: string): Promise<void> {
    const actual = await this.post(side, 'listTickets', query);
    const cursor = actual.body?.nextCursor;
    this.compare(side, label, { status: actual.status, body: { tickets: actual.body?.tickets, more: typeof cursor === 'string' } }, {
      status: 200,
      body: { tickets: expected.tickets, more: expected.next !== null },
    });
    if (expected.next && typeof cursor === 'string') this.traversals.push({ side, cursor, model: expected.next });
  }
}

async function runSequence(policy: RatingPolicy, commands: Command[]): Promise<void> {
  const apps = [await harness.registerApp(), await harness.registerApp()];
  const sides = (await Promise.all(apps.map(async (app) => ({ app, token: await app.token(), model: new ReferenceApp() })))) as [Side, Side];
  const run = new Run(sides, policy);
  await run.start();
  for (const command of commands) await run.execute(command);
}

const replay = {
  ...(process.env['VERSUS_MODEL_SEED'] ? { seed: Number(process.env['VERSUS_MODEL_SEED']) } : {}),
  ...(process.env['VERSUS_MODEL_PATH'] ? { path: process.env['VERSUS_MODEL_PATH'] } : {}),
};

describe('the server agrees with the reference model of spec section A, through HTTP', () => {
  it(`on ${RUNS} random command sequences (creates, retries, conflicts, cancels, listings with cursors, clock steps, two apps)`, async () => {
    await fc.assert(
      fc.asyncProperty(policyArb, fc.array(commandsArb('all'), { minLength: 1, maxLength: 16 }), (policy, commands) => runSequence(policy, commands)),
      { numRuns: RUNS, ...replay },
    );
  }, 300_000);

  it(`on ${EXPIRY_RUNS} sequences weighed towards expiry (cutoffs ahead, clock steps, admissions and reads after a match)`, async () => {
    await fc.assert(
      fc.asyncProperty(policyArb, fc.array(commandsArb('expiry'), { minLength: 12, maxLength: 24 }), (policy, commands) => runSequence(policy, commands)),
      { numRuns: EXPIRY_RUNS, ...replay },
    );
  }, 300_000);
});
