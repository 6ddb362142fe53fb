import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMatchmaking, MatchmakingError, type Matchmaking, type Ticket, type TicketInput } from '../../src/client/index.js';
import { startServer } from '../../src/http/server.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { Harness, testConfig, testPrefix, type TestApp } from '../helpers/harness.js';
import { isolateClientEnv } from './support.js';

/** The client against a real Versus API and Redis (test/helpers/harness.ts). */

isolateClientEnv();

let h: Harness;
let app: TestApp;
let mm: Matchmaking<{ seed: number | string }>;
const T0 = 1_700_000_000_000;
let counter = 0;

beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.stop();
});
beforeEach(async () => {
  app = await h.registerApp();
  await h.setClock(app, T0);
  process.env['SERVICE_APP_KEY'] = app.secretKey;
  mm = createMatchmaking({ origin: app.origin, apiUrl: h.url });
});
afterEach(() => {
  vi.useRealTimers();
});

function ticket(overrides: Partial<TicketInput<{ seed: number | string }>> = {}): TicketInput<{ seed: number | string }> {
  counter += 1;
  return { id: `t-${counter}-${Math.random().toString(36).slice(2, 8)}`, player: `player-${counter}`, queue: { key: 'duel', size: 2 }, payload: { seed: counter }, ...overrides };
}

async function failure(promise: Promise<unknown>): Promise<MatchmakingError> {
  const error = await promise.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MatchmakingError);
  return error as MatchmakingError;
}

/** A loopback HTTP server for one test; `handle` decides what to do with each request. */
async function localServer(handle: (req: IncomingMessage, body: Buffer, res: import('node:http').ServerResponse) => void): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => handle(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('the whole ticket lifecycle', () => {
  it('waits, pairs, stays matched, cancels, conflicts, tombstones and expires, as the spec says', async () => {
    const a = ticket({ payload: { seed: 'waiting-wins' } });
    const waiting = await mm.createTicket(a);
    expect(waiting).toEqual({ id: a.id, state: 'waiting', admission: { input: a, createdAt: T0, payload: a.payload } });

    // Identical input (key order irrelevant) returns the current state.
    const reordered = { payload: a.payload, queue: { size: 2 as const, key: a.queue.key }, player: a.player, id: a.id };
    expect(await mm.createTicket(reordered)).toEqual(waiting);

    await h.setClock(app, T0 + 5000);
    const b = ticket({ payload: { seed: 'joiner-loses' } });
    const joined = await mm.createTicket(b);
    if (joined.state !== 'matched') throw new Error(`expected matched, got ${joined.state}`);
    expect(joined.match).toMatchObject({ queue: 'duel', matchedAt: T0 + 5000, payload: a.payload });
    expect(joined.match.tickets).toEqual([
      { input: a, createdAt: T0, payload: a.payload },
      { input: b, createdAt: T0 + 5000, payload: a.payload },
    ]);
    expect(joined.admission).toEqual({ input: b, createdAt: T0 + 5000, payload: a.payload });

    const [aNow] = (await mm.listTickets({ id: a.id })).tickets;
    expect(aNow).toMatchObject({ id: a.id, state: 'matched', match: joined.match });
    // Matched is terminal: cancel answers the match, a retry of the input too.
    expect(await mm.cancelTicket(a.id)).toEqual(aNow);
    expect(await mm.createTicket(a)).toEqual(aNow);

    // A waiting ticket cancelled: `requested`; retries return the same outcome.
    await h.setClock(app, T0 + 6000);
    const c = ticket({ queue: { key: 'lonely', size: 2 } });
    await mm.createTicket(c);
    const cancelled = await mm.cancelTicket(c.id);
    expect(cancelled).toEqual({ id: c.id, state: 'cancelled', admission: { input: c, createdAt: T0 + 6000, payload: c.payload }, reason: 'requested', cancelledAt: T0 + 6000 });
    await h.setClock(app, T0 + 7000);
    expect(await mm.cancelTicket(c.id)).toEqual(cancelled);
    expect(await mm.createTicket(c)).toEqual(cancelled);
    // Any changed field of an admitted ID is a conflict, also after it became terminal.
    expect(await failure(mm.createTicket({ ...c, payload: { seed: 'changed' } }))).toMatchObject({ code: 'ticket_conflict', status: 409 });

    // Cancelling an unknown ID records a tombstone that a later create returns as is.
    const lost = ticket();
    const tombstone = await mm.cancelTicket(lost.id);
    expect(tombstone).toEqual({ id: lost.id, state: 'cancelled', admission: null, reason: 'requested', cancelledAt: T0 + 7000 });
    expect(await mm.createTicket(lost)).toEqual(tombstone);
    expect(await mm.createTicket({ ...lost, payload: { seed: 'anything' } })).toEqual(tombstone);

    // A cutoff: expired on the first read at or after it; already past at creation: cancelled at once.
    const d = ticket({ queue: { key: 'timed', size: 2 }, expiresAt: T0 + 10_000 });
    expect((await mm.createTicket(d)).state).toBe('waiting');
    await h.setClock(app, T0 + 10_000);
    expect((await mm.listTickets({ id: d.id })).tickets).toEqual([
      { id: d.id, state: 'cancelled', admission: { input: d, createdAt: T0 + 7000, payload: d.payload }, reason: 'expired', cancelledAt: T0 + 10_000 },
    ]);
    const e = ticket({ expiresAt: T0 + 10_000 });
    expect(await mm.createTicket(e)).toMatchObject({ state: 'cancelled', reason: 'expired', cancelledAt: T0 + 10_000 });
  });

  it('pairs rated tickets within the tolerance only', async () => {
    const queue = { key: 'ranked', size: 2 as const, rating: { initial: 50, widenPerSecond: 10, max: 200 } };
    const a = ticket({ queue, rating: 1500 });
    await mm.createTicket(a);
    expect((await mm.createTicket(ticket({ queue, rating: 1600 }))).state).toBe('waiting');
    await h.setClock(app, T0 + 20_000); // a's tolerance: 50 + 10 * 20 = 250, capped at 200
    const close = await mm.createTicket(ticket({ queue, rating: 1690 }));
    expect(close.state).toBe('matched');
    if (close.state === 'matched') expect(close.match.tickets[0].input.id).toBe(a.id);
  });
});

describe('pagination', () => {
  it('follows nextCursor through every page, 25 at most, in creation order, with the filters kept', async () => {
    const created: string[] = [];
    for (let i = 0; i < 60; i++) {
      // Own queue per ticket, so that none pair; every third one belongs to "carol".
      const t = ticket({ queue: { key: `q-${i}`, size: 2 }, player: i % 3 === 0 ? 'carol' : `p-${i}` });
      await mm.createTicket(t);
      created.push(t.id);
    }
    const walk = async (filter: { player?: string }) => {
      const sizes: number[] = [];
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await mm.listTickets(cursor === null ? filter : { ...filter, cursor });
        sizes.push(page.tickets.length);
        ids.push(...page.tickets.map((t) => t.id));
        cursor = page.nextCursor;
      } while (cursor !== null);
      return { sizes, ids };
    };
    expect(await walk({})).toEqual({ sizes: [25, 25, 10], ids: created });
    expect(await walk({ player: 'carol' })).toEqual({ sizes: [20], ids: created.filter((_id, i) => i % 3 === 0) });

    // The cursor is opaque and bound to its filters: reusing it with others is invalid_argument.
    const first = await mm.listTickets();
    expect(await failure(mm.listTickets({ player: 'carol', cursor: first.nextCursor! }))).toMatchObject({ code: 'invalid_argument', status: 400 });
  });
});

describe('recovery when a reply is lost', () => {
  it('a lost createTicket reply is unavailable; the ticket is found by an app-wide listing and an identical retry returns it', async () => {
    // A proxy that delivers the request to the API but drops the connection instead of the reply.
    const proxy = await localServer((req, body, res) => {
      void (async () => {
        const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => ['content-type', 'authorization'].includes(name))) as Record<string, string>;
        const reply = await fetch(`${h.url}${req.url}`, { method: 'POST', headers, body });
        await reply.arrayBuffer();
        res.socket?.destroy();
      })();
    });
    try {
      const lossy = createMatchmaking<{ seed: number | string }>({ origin: app.origin, apiUrl: proxy.url });
      const input = ticket({ player: 'dave', payload: { seed: 'remember-me' } });
      expect(await failure(lossy.createTicket(input))).toMatchObject({ code: 'unavailable', status: null });

      // The app lost the ID too: list app-wide (no filter) and recognise the ticket.
      const tickets: Array<Ticket<{ seed: number | string }>> = [];
      let cursor: string | null = null;
      do {
        const page = await mm.listTickets(cursor === null ? {} : { cursor });
        tickets.push(...page.tickets);
        cursor = page.nextCursor;
      } while (cursor !== null);
      const found = tickets.find((t) => t.state === 'waiting' && t.admission.input.player === 'dave' && t.admission.payload.seed === 'remember-me');
      expect(found?.id).toBe(input.id);

      // The spec's recovery: the identical input with the same ID returns the committed state.
      expect(await mm.createTicket(input)).toEqual(found);
      expect((await mm.cancelTicket(found!.id)).state).toBe('cancelled');
    } finally {
      await proxy.close();
    }
  });
});

describe('keys', () => {
  it('a rotated key takes effect on the next call of the same client; the old key is then unauthenticated (401)', async () => {
    const first = ticket();
    await mm.createTicket(first);
    const next = generateKeyPair();
    // The operator re-verifies the app with its new key (through the server's own registry, so its cache sees it).
    await h.server.services.registry.update(app.origin, { appKey: next.publicKey });
    expect(await failure(mm.listTickets())).toMatchObject({ code: 'unauthenticated', status: 401 });
    process.env['SERVICE_APP_KEY'] = next.secretKey;
    expect((await mm.listTickets({ id: first.id })).tickets).toHaveLength(1);
  });

  it('falls back to the legacy SERVICE_PUSH_KEY when SERVICE_APP_KEY is not set; SERVICE_APP_KEY wins when both are', async () => {
    delete process.env['SERVICE_APP_KEY'];
    process.env['SERVICE_PUSH_KEY'] = app.secretKey;
    const t = ticket();
    expect((await mm.createTicket(t)).state).toBe('waiting');
    process.env['SERVICE_APP_KEY'] = generateKeyPair().secretKey;
    expect(await failure(mm.listTickets())).toMatchObject({ code: 'unauthenticated', status: 401 });
  });

  it('an explicit key option wins over the environment', async () => {
    process.env['SERVICE_APP_KEY'] = generateKeyPair().secretKey;
    const explicit = createMatchmaking({ origin: app.origin, apiUrl: h.url, key: app.secretKey });
    expect((await explicit.listTickets()).tickets).toEqual([]);
  });

  it('a malformed key never reaches the server', async () => {
    process.env['SERVICE_APP_KEY'] = app.publicKey;
    expect(await failure(mm.listTickets())).toMatchObject({ code: 'unauthenticated', status: null });
  });
});

describe('every server refusal surfaces with its code and status', () => {
  it('invalid_argument 400: a cursor the client cannot judge', async () => {
    expect(await failure(mm.listTickets({ cursor: 'not-a-cursor' }))).toMatchObject({ code: 'invalid_argument', status: 400 });
  });

  it('unauthenticated 401: a well-formed key that is not the app’s', async () => {
    const other = createMatchmaking({ origin: app.origin, apiUrl: h.url, key: generateKeyPair().secretKey });
    expect(await failure(other.createTicket(ticket()))).toMatchObject({ code: 'unauthenticated', status: 401 });
  });

  it('app_not_verified 403: an unknown origin, an unverified app, a staging verification, an app without appKey', async () => {
    const unknown = createMatchmaking({ origin: 'https://unknown-app.example', apiUrl: h.url, key: generateKeyPair().secretKey });
    expect(await failure(unknown.listTickets())).toMatchObject({ code: 'app_not_verified', status: 403 });
    for (const record of [{ verified: false }, { environment: 'staging' as const }, { appKey: null }]) {
      const other = await h.registerApp(record);
      const client = createMatchmaking({ origin: other.origin, apiUrl: h.url, key: other.secretKey });
      expect(await failure(client.createTicket(ticket()))).toMatchObject({ code: 'app_not_verified', status: 403 });
    }
  });

  it('ticket_conflict 409 and queue_conflict 409', async () => {
    const t = ticket({ queue: { key: 'policy', size: 2 } });
    await mm.createTicket(t);
    expect(await failure(mm.createTicket({ ...t, player: 'someone-else' }))).toMatchObject({ code: 'ticket_conflict', status: 409 });
    const rated = ticket({ queue: { key: 'policy', size: 2, rating: { initial: 1, widenPerSecond: 1 } } });
    expect(await failure(mm.createTicket(rated))).toMatchObject({ code: 'queue_conflict', status: 409 });
  });

  it('unavailable 503: the API cannot reach Redis', async () => {
    const server = await startServer(testConfig(testPrefix(), { REDIS_URL: 'redis://127.0.0.1:1' }), { port: 0, host: '127.0.0.1' });
    try {
      const down = createMatchmaking({ origin: app.origin, apiUrl: server.url });
      expect(await failure(down.createTicket(ticket()))).toMatchObject({ code: 'unavailable', status: 503 });
    } finally {
      await server.close();
    }
  });
});

describe('transport', () => {
  it('nothing listening: unavailable with status null', async () => {
    const closed = await localServer(() => {});
    await closed.close();
    const client = createMatchmaking({ origin: app.origin, apiUrl: closed.url });
    expect(await failure(client.listTickets())).toMatchObject({ code: 'unavailable', status: null });
  });

  it('a redirect is not followed: invalid_response with the 3xx status, and the ticket is not created', async () => {
    let requests = 0;
    const redirecting = await localServer((_req, _body, res) => {
      requests += 1;
      res.writeHead(307, { location: `${h.url}/api/matchmaking` }).end();
    });
    try {
      const client = createMatchmaking({ origin: app.origin, apiUrl: redirecting.url });
      const t = ticket();
      expect(await failure(client.createTicket(t))).toMatchObject({ code: 'invalid_response', status: 307 });
      expect(requests).toBe(1);
      expect((await mm.listTickets({ id: t.id })).tickets).toEqual([]);
    } finally {
      await redirecting.close();
    }
  });

  it('a server that never answers: unavailable after 30 s; one that stalls mid-body: unavailable with its status', async () => {
    let mode: 'silent' | 'partial' = 'silent';
    let arrived: () => void = () => {};
    const stalling = await localServer((_req, _body, res) => {
      if (mode === 'silent') return arrived();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"tickets":[', () => arrived());
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const client = createMatchmaking({ origin: app.origin, apiUrl: stalling.url });
      for (const [nextMode, status] of [['silent', null], ['partial', 200]] as const) {
        mode = nextMode;
        const seen = new Promise<void>((resolve) => (arrived = resolve));
        const outcome = client.listTickets().catch((e: unknown) => e);
        await seen;
        await sleep(100); // real time, for the reply's head to reach the client
        await vi.advanceTimersByTimeAsync(29_900);
        expect(await Promise.race([outcome, sleep(50).then(() => 'pending')])).toBe('pending');
        await vi.advanceTimersByTimeAsync(100);
        expect(await outcome).toMatchObject({ code: 'unavailable', status });
      }
    } finally {
      vi.useRealTimers();
      await stalling.close();
    }
  });
});

describe('local validation mirrors the service', () => {
  const bytes = (n: number) => 'é'.repeat(n / 2);
  const nest = (levels: number): unknown => {
    let value: unknown = 0;
    for (let i = 0; i < levels; i++) value = [value];
    return value;
  };

  it('inputs at the limits are accepted by both; one past them is refused by both (locally with status null, by the API with 400)', async () => {
    const atLimit = [
      ticket({ id: bytes(256), player: bytes(256) }),
      ticket({ queue: { key: bytes(512), size: 2 } }),
      { ...ticket(), payload: { s: 'x'.repeat(16384 - 8) } },
      { ...ticket(), payload: nest(256) },
    ];
    for (const input of atLimit) {
      expect(['waiting', 'matched']).toContain((await mm.createTicket(input as TicketInput<never>)).state);
    }
    const pastLimit = [
      ticket({ id: `${bytes(256)}x` }),
      ticket({ player: `${bytes(256)}x` }),
      ticket({ queue: { key: `${bytes(512)}x`, size: 2 } }),
      { ...ticket(), payload: { s: 'x'.repeat(16384 - 7) } },
      { ...ticket(), payload: nest(257) },
      { ...ticket(), extra: 1 },
      { ...ticket(), rating: 10 },
      { ...ticket(), queue: { key: 'q', size: 2, rating: { initial: 5, widenPerSecond: 1, max: 4 } } },
      { ...ticket(), payload: { text: '\uD800' } },
    ];
    for (const input of pastLimit) {
      expect(await failure(mm.createTicket(input as TicketInput<never>))).toMatchObject({ code: 'invalid_argument', status: null });
      expect((await h.call(app, 'createTicket', input)).status).toBe(400);
    }
  });
});
