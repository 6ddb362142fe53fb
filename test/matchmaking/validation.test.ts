import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Harness, scanKeys, type TestApp } from '../helpers/harness.js';
import { ratedQueue, ticket } from '../helpers/tickets.js';

let h: Harness;
let app: TestApp;

beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.stop();
});
beforeEach(async () => {
  app = await h.registerApp();
});

/** Every key of the app's matchmaking scope: a refused request must not change any. */
async function appState(): Promise<Record<string, string>> {
  const keys = await scanKeys(h.redis, `${h.keys.appScope(app.appId).replace(/[{}]/g, (c) => `\\${c}`)}*`);
  const state: Record<string, string> = {};
  for (const key of keys.sort()) {
    const type = await h.redis.type(key);
    if (type === 'hash') state[key] = JSON.stringify(await h.redis.hgetall(key));
    else if (type === 'zset') state[key] = JSON.stringify(await h.redis.zrange(key, 0, -1, 'WITHSCORES'));
    else state[key] = String(await h.redis.get(key));
  }
  return state;
}

async function expectRefused(input: unknown, operation = 'createTicket'): Promise<void> {
  const before = await appState();
  const res = await h.call(app, operation, input);
  expect(res, JSON.stringify(input)?.slice(0, 200)).toMatchObject({ status: 400, body: { error: 'invalid_argument' } });
  expect(Object.keys(res.body)).toEqual(['error']);
  expect(await appState()).toEqual(before);
}

async function expectAccepted(input: unknown, operation = 'createTicket'): Promise<any> {
  const res = await h.call(app, operation, input);
  expect(res.status, JSON.stringify(res.body)?.slice(0, 200)).toBe(200);
  return res.body;
}

const bytes = (n: number, unit = 'a') => unit.repeat(n / Buffer.byteLength(unit));

describe('limits at their boundaries (UTF-8 bytes)', () => {
  it('ticket ID: 256 bytes accepted, 257 refused, empty refused', async () => {
    await expectAccepted(ticket({ id: bytes(256) }));
    await expectAccepted(ticket({ id: bytes(256, 'é') }));
    await expectRefused(ticket({ id: bytes(257) }));
    await expectRefused(ticket({ id: `${bytes(254, 'é')}éa` }));
    await expectRefused(ticket({ id: '' }));
  });

  it('player: 256 bytes accepted, 257 refused, empty refused', async () => {
    await expectAccepted(ticket({ player: bytes(256, '€€') }));
    await expectRefused(ticket({ player: `${bytes(255)}é` }));
    await expectRefused(ticket({ player: '' }));
  });

  it('queue key: 512 bytes accepted, 513 refused, empty refused', async () => {
    await expectAccepted(ticket({ queue: { key: bytes(512), size: 2 } }));
    await expectRefused(ticket({ queue: { key: bytes(513), size: 2 } }));
    await expectRefused(ticket({ queue: { key: '', size: 2 } }));
  });

  it('payload: 16384 bytes of compact JSON accepted, 16385 refused', async () => {
    // A JSON string of n characters serialises to n + 2 bytes.
    await expectAccepted(ticket({ payload: 'x'.repeat(16382) }));
    await expectRefused(ticket({ payload: 'x'.repeat(16383) }));
    // {"k":""} is 8 bytes and each é is 2: 16380 bytes accepted, 16386 refused.
    await expectAccepted(ticket({ payload: { k: 'é'.repeat(8186) } }));
    await expectRefused(ticket({ payload: { k: 'é'.repeat(8189) } }));
  });

  it('payload may be any JSON value, null included', async () => {
    for (const payload of [null, false, 0, -1.5, 'text', [], {}, [1, [2, [3]]], { a: { b: null } }]) {
      await expectAccepted(ticket({ payload }));
    }
  });

  it('payload nesting: 256 levels accepted, 257 refused', async () => {
    const nest = (depth: number) => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`);
    await expectAccepted(ticket({ payload: nest(256) }));
    await expectRefused(ticket({ payload: nest(257) }));
  });

  it('size: only 2', async () => {
    for (const size of [1, 3, 0, '2', 2.5]) await expectRefused(ticket({ queue: { key: 'q', size } as never }));
  });

  it('rating policy: initial >= 0, widenPerSecond > 0, max >= initial', async () => {
    await expectAccepted(ticket({ queue: ratedQueue('r0', { initial: 0, widenPerSecond: Number.MIN_VALUE }) }));
    await expectAccepted(ticket({ queue: ratedQueue('r1', { initial: 5, widenPerSecond: 1, max: 5 }) }));
    await expectRefused(ticket({ queue: ratedQueue('r2', { initial: -0.0001, widenPerSecond: 1 }) }));
    await expectRefused(ticket({ queue: ratedQueue('r3', { initial: 1, widenPerSecond: 0 }) }));
    await expectRefused(ticket({ queue: ratedQueue('r4', { initial: 1, widenPerSecond: -1 }) }));
    await expectRefused(ticket({ queue: ratedQueue('r5', { initial: 5, widenPerSecond: 1, max: 4.999 }) }));
    await expectRefused(ticket({ queue: { key: 'r6', size: 2, rating: { initial: 1 } } as never }));
  });

  it('a rated ticket needs a queue with a rating policy; rating and expiresAt are finite numbers', async () => {
    await expectRefused(ticket({ rating: 5 }));
    await expectRefused(ticket({ expiresAt: '1' as never }));
    await expectRefused(ticket({ queue: ratedQueue('r', { initial: 1, widenPerSecond: 1 }), rating: '1' as never }));
    await expectAccepted(ticket({ queue: ratedQueue('r', { initial: 1, widenPerSecond: 1 }), rating: -1e300 }));
  });
});

describe('shapes', () => {
  it('refuses unknown members at every level and null for optional members', async () => {
    await expectRefused({ ...ticket(), extra: 1 });
    await expectRefused(ticket({ queue: { key: 'q', size: 2, extra: 1 } as never }));
    await expectRefused(ticket({ queue: { key: 'q', size: 2, rating: { initial: 1, widenPerSecond: 1, extra: 1 } } as never }));
    await expectRefused(ticket({ rating: null as never }));
    await expectRefused(ticket({ expiresAt: null as never }));
    await expectRefused(ticket({ queue: ratedQueue('n', { initial: 1, widenPerSecond: 1, max: null as never }) }));
    await expectRefused({ id: 'x', extra: 1 }, 'cancelTicket');
    await expectRefused({ player: 'p', extra: 1 }, 'listTickets');
    await expectRefused({ player: null }, 'listTickets');
  });

  it('refuses missing required members', async () => {
    const full = ticket();
    for (const member of ['id', 'player', 'queue', 'payload'] as const) {
      const copy: Record<string, unknown> = { ...full };
      delete copy[member];
      await expectRefused(copy);
    }
    await expectRefused({}, 'cancelTicket');
    await expectRefused(undefined, 'cancelTicket');
    await expectRefused(undefined, 'createTicket');
  });

  it('listTickets filters obey the ID and player limits', async () => {
    await expectAccepted({ player: bytes(256), id: bytes(256) }, 'listTickets');
    await expectRefused({ player: bytes(257) }, 'listTickets');
    await expectRefused({ id: bytes(257) }, 'listTickets');
    await expectRefused({ id: '' }, 'listTickets');
    await expectRefused({ cursor: '' }, 'listTickets');
    await expectRefused('x', 'listTickets');
    await expectRefused(null, 'listTickets');
  });

  it('cancelTicket IDs obey the ID limit', async () => {
    await expectAccepted({ id: bytes(256) }, 'cancelTicket');
    await expectRefused({ id: bytes(257) }, 'cancelTicket');
    await expectRefused({ id: 5 }, 'cancelTicket');
  });

  it('validation comes first, even for a tombstoned ID', async () => {
    await h.call(app, 'cancelTicket', { id: 'tomb' });
    await expectRefused({ id: 'tomb', player: 'p', queue: { key: 'q', size: 3 }, payload: 1 });
  });
});

describe('the envelope and the body', () => {
  const post = (body: string | Uint8Array, headers: Record<string, string> = {}) =>
    app.token().then((token) => h.post('/api/matchmaking', body, { authorization: `Bearer ${token}`, ...headers }));

  it('refuses unknown operations, extra envelope members and non-object envelopes', async () => {
    for (const body of [
      { operation: 'deleteTicket', input: {} },
      { operation: 'listTickets', input: {}, extra: 1 },
      { input: {} },
      [],
      'listTickets',
      null,
    ]) {
      const res = await post(JSON.stringify(body));
      expect(res, JSON.stringify(body)).toMatchObject({ status: 400, body: { error: 'invalid_argument' } });
    }
  });

  it('refuses malformed JSON, invalid UTF-8, lone surrogates and overflowing numbers', async () => {
    const valid = JSON.stringify({ operation: 'createTicket', input: ticket({ id: 'utf' }) });
    const invalidUtf8 = Buffer.concat([Buffer.from(valid.slice(0, -3)), Buffer.from([0xc3, 0x28]), Buffer.from(valid.slice(-3))]);
    const cases: Array<string | Uint8Array> = [
      '{"operation":',
      '',
      invalidUtf8,
      valid.replace('"utf"', '"\\ud800"'),
      valid.replace('"utf"', '"\\udc00x"'),
      JSON.stringify({ operation: 'createTicket', input: { ...ticket(), payload: 0 } }).replace('"payload":0', '"payload":1e400'),
      JSON.stringify({ operation: 'createTicket', input: { ...ticket(), payload: 0 } }).replace('"payload":0', '"payload":{"\\ud800":1}'),
    ];
    for (const body of cases) {
      const res = await post(body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'invalid_argument' });
    }
    expect((await h.call(app, 'listTickets', { id: 'utf' })).body.tickets).toEqual([]);
  });

  it('refuses bodies over 64 KiB with 413', async () => {
    const big = JSON.stringify({ operation: 'createTicket', input: ticket({ payload: 'x'.repeat(70_000) }) });
    const res = await post(big);
    expect(res).toMatchObject({ status: 413, body: { error: 'invalid_argument' } });
  });

  it('refuses a body that is not application/json', async () => {
    const res = await post(JSON.stringify({ operation: 'listTickets' }), { 'content-type': 'text/plain' });
    expect(res).toMatchObject({ status: 400, body: { error: 'invalid_argument' } });
  });

  it('handles extremely deep nesting without crashing', async () => {
    const deep = `{"operation":"createTicket","input":{"id":"d","player":"p","queue":{"key":"q","size":2},"payload":${'['.repeat(30_000)}${']'.repeat(30_000)}}}`;
    const res = await post(deep);
    expect(res).toMatchObject({ status: 400, body: { error: 'invalid_argument' } });
    expect((await h.call(app, 'listTickets')).status).toBe(200);
  });
});
