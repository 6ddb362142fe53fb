import { describe, expect, it } from 'vitest';
import { createMatchmaking, MatchmakingError, type TicketInput } from '../../src/client/index.js';
import { isolateClientEnv, json, newKey, ORIGIN, restoreFetch, stubFetch, type SentRequest } from './support.js';

isolateClientEnv();
restoreFetch();

const base = (): TicketInput => ({ id: 'ticket-1', player: 'alice', queue: { key: 'duel', size: 2 }, payload: { seed: 7 } });

function echo(request: SentRequest): Response {
  const { input } = JSON.parse(request.body) as { input: TicketInput };
  return json(200, { id: input.id, state: 'waiting', admission: { input, createdAt: 1, payload: input.payload } });
}

function client() {
  process.env['SERVICE_APP_KEY'] = newKey().secretKey;
  return createMatchmaking({ origin: ORIGIN });
}

/** createTicket with `input`: a local invalid_argument with status null, and nothing sent. */
async function refused(input: unknown): Promise<MatchmakingError> {
  const matchmaking = client();
  const sent = stubFetch(echo);
  const error = await matchmaking.createTicket(input as TicketInput).then(
    () => new Error('accepted'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MatchmakingError);
  expect(error).toMatchObject({ code: 'invalid_argument', status: null });
  expect(sent).toHaveLength(0);
  return error as MatchmakingError;
}

async function accepted(input: unknown): Promise<unknown> {
  const matchmaking = client();
  const sent = stubFetch(echo);
  await matchmaking.createTicket(input as TicketInput);
  expect(sent).toHaveLength(1);
  return (JSON.parse(sent[0]!.body) as { input: unknown }).input;
}

const withPayload = (payload: unknown) => ({ ...base(), payload }) as unknown;

describe('values JSON would lose or transform are refused locally', () => {
  const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays
  const extra = Object.assign([1, 2], { note: 'lost' });
  const cyclicObject: Record<string, unknown> = { a: 1 };
  cyclicObject['self'] = cyclicObject;
  const cyclicArray: unknown[] = [1];
  cyclicArray.push([cyclicArray]);
  class Conditions {
    seed = 1;
  }
  const nonEnumerable = Object.defineProperty({ a: 1 }, 'hidden', { value: 2, enumerable: false });
  const cases: Array<[string, unknown]> = [
    ['undefined', undefined],
    ['undefined inside an object', { a: undefined }],
    ['undefined inside an array', [undefined]],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['-Infinity', { x: -Infinity }],
    ['a bigint', { n: 10n }],
    ['a function', { f: () => 1 }],
    ['a symbol value', { s: Symbol('x') }],
    ['a symbol key', { [Symbol('k')]: 1 }],
    ['a Date', { at: new Date(0) }],
    ['a Map', new Map([['a', 1]])],
    ['a Set', new Set([1])],
    ['a RegExp', /x/],
    ['a typed array', new Uint8Array(2)],
    ['a boxed string', Object('text')],
    ['a sparse array', sparse],
    ['an array with extra properties', extra],
    ['an own toJSON method', { toJSON: () => 'replaced' }],
    ['a class instance', new Conditions()],
    ['a cyclic object', cyclicObject],
    ['a cyclic array', cyclicArray],
    ['a non-enumerable property', nonEnumerable],
    ['a Proxy', new Proxy({ a: 1 }, {})],
    ['a lone surrogate', { text: '\uD800' }],
    ['a lone surrogate in a key', { ['\uDC00']: 1 }],
  ];

  it.each(cases)('refuses %s in the payload', async (_what, payload) => {
    await refused(withPayload(payload));
  });

  it('refuses an accessor without invoking it', async () => {
    let calls = 0;
    const payload = Object.defineProperty({}, 'seed', {
      enumerable: true,
      get: () => {
        calls += 1;
        return 1;
      },
    });
    await refused(withPayload(payload));
    expect(calls).toBe(0);
  });

  it('refuses a toJSON inherited from a patched prototype', async () => {
    const proto = Object.create(null) as Record<string, unknown>;
    proto['toJSON'] = () => 'x';
    await refused(withPayload({ nested: Object.setPrototypeOf({ a: 1 }, proto) }));
  });

  it('refuses an input or queue that is not plain, and an optional member set to undefined or null', async () => {
    await refused(Object.assign(Object.create({ inherited: true }), base()));
    await refused({ ...base(), rating: undefined });
    await refused({ ...base(), expiresAt: undefined });
    await refused({ ...base(), expiresAt: null });
    await refused({ ...base(), queue: { key: 'q', size: 2, rating: undefined } });
    await refused({ ...base(), queue: { key: 'q', size: 2, rating: { initial: 1, widenPerSecond: 1, max: undefined } } });
    await refused({ ...base(), queue: { key: 'q', size: 2, rating: { initial: 1, widenPerSecond: 1, max: null } } });
  });

  it('accepts repeated references to plain values (JSON writes them twice), null-prototype objects, -0 as 0, and __proto__ as a plain key', async () => {
    const shared = { hp: 10 };
    const nullProto = Object.assign(Object.create(null) as object, { a: 1 });
    const withProtoKey = JSON.parse('{"__proto__": {"polluted": true}}') as unknown;
    const sent = await accepted(withPayload({ left: shared, right: shared, list: [shared, shared], nullProto, zero: -0, withProtoKey }));
    expect(sent).toEqual({
      ...base(),
      payload: { left: { hp: 10 }, right: { hp: 10 }, list: [{ hp: 10 }, { hp: 10 }], nullProto: { a: 1 }, zero: 0, withProtoKey },
    });
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('accepts null, scalars and empty containers as payloads', async () => {
    for (const payload of [null, true, 0, 'text', [], {}]) {
      expect(await accepted(withPayload(payload))).toEqual({ ...base(), payload });
    }
  });
});

describe('the input is snapshotted synchronously', () => {
  it('changes made after the call returns do not reach the request', async () => {
    const matchmaking = client();
    const sent = stubFetch(echo);
    const input = { id: 'snap-1', player: 'alice', queue: { key: 'duel', size: 2 as const }, payload: { seed: 1, list: [1, 2] } };
    const pending = matchmaking.createTicket(input);
    input.payload.seed = 999;
    input.payload.list.push(3);
    input.queue.key = 'changed';
    input.player = 'mallory';
    const ticket = await pending;
    const body = JSON.parse(sent[0]!.body) as { input: unknown };
    expect(body.input).toEqual({ id: 'snap-1', player: 'alice', queue: { key: 'duel', size: 2 }, payload: { seed: 1, list: [1, 2] } });
    expect(ticket.id).toBe('snap-1');
  });

  it('a value that becomes invalid after the call does not matter; one that was invalid at the call is refused', async () => {
    const matchmaking = client();
    stubFetch(echo);
    const input = base() as TicketInput & { payload: Record<string, unknown> };
    const pending = matchmaking.createTicket(input);
    input.payload['later'] = () => 1;
    await expect(pending).resolves.toMatchObject({ id: 'ticket-1' });
  });
});

describe('TicketInput rules mirror the service', () => {
  const bytes = (n: number) => 'é'.repeat(n / 2); // 2 UTF-8 bytes per character

  it('IDs and players: nonempty, at most 256 UTF-8 bytes', async () => {
    await accepted({ ...base(), id: bytes(256), player: bytes(256) });
    await refused({ ...base(), id: `${bytes(256)}x` });
    await refused({ ...base(), player: `${bytes(256)}x` });
    await refused({ ...base(), id: '' });
    await refused({ ...base(), player: '' });
    await refused({ ...base(), id: 7 });
  });

  it('queue keys: nonempty, at most 512 UTF-8 bytes; size only 2', async () => {
    await accepted({ ...base(), queue: { key: bytes(512), size: 2 } });
    await refused({ ...base(), queue: { key: `${bytes(512)}x`, size: 2 } });
    await refused({ ...base(), queue: { key: '', size: 2 } });
    await refused({ ...base(), queue: { key: 'q', size: 3 } });
    await refused({ ...base(), queue: { key: 'q' } });
    await refused({ ...base(), queue: { key: 'q', size: 2, extra: 1 } });
    await refused({ ...base(), queue: 'duel' });
  });

  it('rating policy: initial >= 0, widenPerSecond > 0, max >= initial, no other members', async () => {
    const rated = (rating: unknown, extra: object = {}) => ({ ...base(), queue: { key: 'r', size: 2, rating }, ...extra });
    await accepted(rated({ initial: 0, widenPerSecond: 0.5 }));
    await accepted(rated({ initial: 10, widenPerSecond: 1, max: 10 }, { rating: 1500 }));
    await refused(rated({ initial: -1, widenPerSecond: 1 }));
    await refused(rated({ initial: 1, widenPerSecond: 0 }));
    await refused(rated({ initial: 10, widenPerSecond: 1, max: 9 }));
    await refused(rated({ initial: 1 }));
    await refused(rated({ initial: 1, widenPerSecond: 1, cap: 3 }));
    await refused(rated({ initial: '1', widenPerSecond: 1 }));
  });

  it('a rated ticket needs a rated queue; rating and expiresAt are finite numbers', async () => {
    await refused({ ...base(), rating: 1500 });
    await refused({ ...base(), queue: { key: 'r', size: 2, rating: { initial: 1, widenPerSecond: 1 } }, rating: '1500' });
    await refused({ ...base(), expiresAt: '2030-01-01' });
    await accepted({ ...base(), expiresAt: 1_900_000_000_000 });
  });

  it('unknown and missing members are refused', async () => {
    await refused({ ...base(), priority: 1 });
    const { payload: _payload, ...withoutPayload } = base();
    await refused(withoutPayload);
    const { queue: _queue, ...withoutQueue } = base();
    await refused(withoutQueue);
    await refused(null);
    await refused([base()]);
    await refused('ticket');
  });

  it('payload: at most 16384 bytes of compact JSON, key order irrelevant', async () => {
    // {"s":"…"} is 8 bytes plus the string.
    await accepted(withPayload({ s: 'x'.repeat(16384 - 8) }));
    await refused(withPayload({ s: 'x'.repeat(16384 - 7) }));
    await accepted(withPayload({ s: 'é'.repeat((16384 - 8) / 2) }));
    await refused(withPayload({ s: `${'é'.repeat((16384 - 8) / 2)}x` }));
    await refused(withPayload(Array.from({ length: 100_000 }, () => 0)));
  });

  it('payload: nesting up to 256 levels is sent, deeper is refused, very deep is refused without overflowing the stack', async () => {
    const nest = (levels: number): unknown => {
      let value: unknown = 0;
      for (let i = 0; i < levels; i++) value = [value];
      return value;
    };
    await accepted(withPayload(nest(256)));
    await refused(withPayload(nest(257)));
    await refused(withPayload(nest(100_000)));
  });
});

describe('listTickets and cancelTicket inputs', () => {
  it('listTickets: absent or empty query is the app-wide listing; filters and cursor are sent as given', async () => {
    const matchmaking = client();
    const sent = stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    await matchmaking.listTickets();
    await matchmaking.listTickets({});
    await matchmaking.listTickets({ player: 'alice', id: 't1', cursor: 'abc' });
    expect(sent.map((r) => JSON.parse(r.body))).toEqual([
      { operation: 'listTickets', input: {} },
      { operation: 'listTickets', input: {} },
      { operation: 'listTickets', input: { player: 'alice', id: 't1', cursor: 'abc' } },
    ]);
  });

  it('listTickets refuses null, unknown members, undefined or null members, empty or over-long filters and cursors', async () => {
    const matchmaking = client();
    const sent = stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    const bad: unknown[] = [
      null,
      'alice',
      { owner: 'alice' },
      { player: undefined },
      { cursor: null },
      { player: '' },
      { id: '' },
      { cursor: '' },
      { player: 'x'.repeat(257) },
      { id: 'x'.repeat(257) },
      { cursor: 'c'.repeat(513) },
      { player: 7 },
    ];
    for (const query of bad) {
      await expect(matchmaking.listTickets(query as never)).rejects.toMatchObject({ code: 'invalid_argument', status: null });
    }
    await matchmaking.listTickets({ cursor: 'c'.repeat(512) });
    expect(sent).toHaveLength(1);
  });

  it('cancelTicket sends {id}; refuses an empty, non-string, over-long or ill-formed ID', async () => {
    const matchmaking = client();
    const sent = stubFetch(() => json(200, { id: 't1', state: 'cancelled', admission: null, reason: 'requested', cancelledAt: 5 }));
    await matchmaking.cancelTicket('t1');
    expect(JSON.parse(sent[0]!.body)).toEqual({ operation: 'cancelTicket', input: { id: 't1' } });
    for (const id of ['', 7, undefined, null, 'x'.repeat(257), '\uD800']) {
      await expect(matchmaking.cancelTicket(id as never)).rejects.toMatchObject({ code: 'invalid_argument', status: null });
    }
    expect(sent).toHaveLength(1);
  });
});
