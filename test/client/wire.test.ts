import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMatchmaking, MatchmakingError, type Ticket, type TicketInput } from '../../src/client/index.js';
import { APP_AUTH_AUD, APP_AUTH_TYP } from '../../src/shared/protocol.js';
import { bearer, isolateClientEnv, json, newKey, ORIGIN, restoreFetch, stubFetch, text, verifyJwt, type SentRequest } from './support.js';

isolateClientEnv();
restoreFetch();
afterEach(() => {
  vi.useRealTimers();
});

const API = 'https://api.example';
const input: TicketInput<{ seed: number }> = { id: 'ticket-1', player: 'alice', queue: { key: 'duel', size: 2 }, payload: { seed: 7 } };
const admission = { input, createdAt: 1000, payload: input.payload };
const waiting = { id: input.id, state: 'waiting', admission };
const matched = {
  id: input.id,
  state: 'matched',
  admission,
  match: {
    id: 'm1',
    queue: 'duel',
    matchedAt: 2000,
    payload: input.payload,
    tickets: [admission, { input: { ...input, id: 'ticket-2', player: 'bob' }, createdAt: 2000, payload: input.payload }],
  },
};
const cancelled = { id: input.id, state: 'cancelled', admission, reason: 'requested', cancelledAt: 3000 };

function setup(key = newKey()) {
  process.env['SERVICE_APP_KEY'] = key.secretKey;
  return { key, matchmaking: createMatchmaking<{ seed: number }>({ origin: ORIGIN, apiUrl: API }) };
}

async function failure(promise: Promise<unknown>): Promise<MatchmakingError> {
  const error = await promise.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MatchmakingError);
  return error as MatchmakingError;
}

describe('what each call sends', () => {
  it('one POST to {apiUrl}/api/matchmaking: JSON envelope, shared app JWT, no redirects followed, a signal for the timeout', async () => {
    const { key, matchmaking } = setup();
    const sent = stubFetch(() => json(200, waiting));
    const ticket = await matchmaking.createTicket(input);
    expect(ticket).toEqual(waiting);
    expect(sent).toHaveLength(1);
    const request = sent[0]!;
    expect(request.url).toBe(`${API}/api/matchmaking`);
    expect(request.method).toBe('POST');
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.redirect).toBe('manual');
    expect(request.signal).toBeInstanceOf(AbortSignal);
    expect(JSON.parse(request.body)).toEqual({ operation: 'createTicket', input });
    const { header, claims } = await verifyJwt(bearer(request), key.publicKey);
    expect(header).toEqual({ alg: 'EdDSA', typ: APP_AUTH_TYP });
    expect(Object.keys(claims).sort()).toEqual(['aud', 'exp', 'iat', 'iss']);
    expect(claims).toMatchObject({ iss: ORIGIN, aud: APP_AUTH_AUD });
    expect(claims.exp! - claims.iat!).toBe(60);
    expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(5);
  });

  it('signs a fresh token for every call', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
    const { key, matchmaking } = setup();
    const sent = stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    await matchmaking.listTickets();
    vi.setSystemTime(new Date('2030-01-01T00:00:07Z'));
    await matchmaking.listTickets();
    const [first, second] = await Promise.all(sent.map((r) => verifyJwt(bearer(r), key.publicKey)));
    expect(first!.claims.iat).toBe(Date.UTC(2030, 0, 1) / 1000);
    expect(second!.claims.iat).toBe(first!.claims.iat! + 7);
    expect(second!.claims.exp).toBe(second!.claims.iat! + 60);
    expect(bearer(sent[0]!)).not.toBe(bearer(sent[1]!));
  });

  it('the returned object has exactly createTicket, listTickets and cancelTicket', () => {
    const { matchmaking } = setup();
    expect(Object.keys(matchmaking).sort()).toEqual(['cancelTicket', 'createTicket', 'listTickets']);
    expect(Object.isFrozen(matchmaking)).toBe(true);
  });

  it('methods work detached from the object', async () => {
    const { matchmaking } = setup();
    stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    const { listTickets } = matchmaking;
    await expect(listTickets()).resolves.toEqual({ tickets: [], nextCursor: null });
  });
});

describe('reading replies', () => {
  it('returns the Ticket or TicketPage the service answered', async () => {
    const { matchmaking } = setup();
    stubFetch((r) => {
      const { operation } = JSON.parse(r.body) as { operation: string };
      if (operation === 'createTicket') return json(200, matched);
      if (operation === 'cancelTicket') return json(200, cancelled);
      return json(200, { tickets: [waiting, matched, cancelled, { ...cancelled, admission: null }], nextCursor: 'next' });
    });
    expect(await matchmaking.createTicket(input)).toEqual(matched);
    expect(await matchmaking.cancelTicket(input.id)).toEqual(cancelled);
    const page = await matchmaking.listTickets({ player: 'alice' });
    expect(page.nextCursor).toBe('next');
    expect(page.tickets).toHaveLength(4);
  });

  it.each([
    ['invalid_argument', 400],
    ['unauthenticated', 401],
    ['app_not_verified', 403],
    ['ticket_conflict', 409],
    ['queue_conflict', 409],
    ['unavailable', 503],
  ])('a refusal with the known code %s keeps the code and HTTP status %i', async (code, status) => {
    const { matchmaking } = setup();
    const sent = stubFetch(() => json(status, { error: code }));
    const error = await failure(matchmaking.createTicket(input));
    expect(error).toMatchObject({ code, status, name: 'MatchmakingError' });
    expect(sent).toHaveLength(1); // never retried
  });

  it('a known code keeps whatever status it came with (handle by code)', async () => {
    const { matchmaking } = setup();
    stubFetch(() => json(502, { error: 'unavailable' }));
    expect(await failure(matchmaking.listTickets())).toMatchObject({ code: 'unavailable', status: 502 });
  });

  const invalid: Array<[string, () => Response]> = [
    ['an unknown error code', () => json(500, { error: 'internal' })],
    ['the route-not-found refusal', () => json(404, { error: 'not_found' })],
    ['the client-only code invalid_response', () => json(500, { error: 'invalid_response' })],
    ['a refusal without a code', () => json(400, { message: 'bad' })],
    ['an HTML error page', () => text(502, '<html>Bad Gateway</html>', 'text/html')],
    ['a redirect (not followed)', () => new Response(null, { status: 307, headers: { location: 'https://elsewhere.example/api/matchmaking' } })],
    ['an empty 200', () => text(200, '')],
    ['a 200 that is not JSON', () => text(200, '{"id":')],
    ['a 200 with invalid UTF-8', () => text(200, new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x7d]))],
    ['a 200 with a number JSON turns into Infinity', () => text(200, '{"id":"ticket-1","state":"cancelled","admission":null,"reason":"requested","cancelledAt":1e400}')],
    ['a 200 that is an array', () => json(200, [waiting])],
    ['a 200 that is a page instead of a ticket', () => json(200, { tickets: [], nextCursor: null })],
    ['a ticket of another ID', () => json(200, { ...waiting, id: 'ticket-2' })],
    ['a ticket with an unknown state', () => json(200, { ...waiting, state: 'pending' })],
    ['a waiting ticket without admission', () => json(200, { id: input.id, state: 'waiting' })],
    ['a matched ticket with one admission', () => json(200, { ...matched, match: { ...matched.match, tickets: [admission] } })],
    ['a cancelled ticket with an unknown reason', () => json(200, { ...cancelled, reason: 'timeout' })],
    ['an admission without createdAt', () => json(200, { ...waiting, admission: { input, payload: input.payload } })],
    ['a refusal code with a 200 status', () => json(200, { error: 'unavailable' })],
  ];

  it.each(invalid)('createTicket: %s is invalid_response with the reply status', async (_what, reply) => {
    const { matchmaking } = setup();
    const sent = stubFetch(reply);
    const error = await failure(matchmaking.createTicket(input));
    expect(error.code).toBe('invalid_response');
    expect(error.status).toBe(reply().status);
    expect(sent).toHaveLength(1);
  });

  it('cancelTicket: a waiting reply, or another ID, is invalid_response', async () => {
    const { matchmaking } = setup();
    stubFetch(() => json(200, waiting));
    expect(await failure(matchmaking.cancelTicket(input.id))).toMatchObject({ code: 'invalid_response', status: 200 });
    stubFetch(() => json(200, { ...cancelled, id: 'other' }));
    expect(await failure(matchmaking.cancelTicket(input.id))).toMatchObject({ code: 'invalid_response', status: 200 });
  });

  it('listTickets: a malformed page, over 25 tickets, or a ticket outside the ID filter is invalid_response', async () => {
    const { matchmaking } = setup();
    for (const page of [
      { tickets: [] },
      { tickets: {}, nextCursor: null },
      { tickets: [], nextCursor: '' },
      { tickets: [], nextCursor: 5 },
      { tickets: Array.from({ length: 26 }, () => waiting), nextCursor: null },
      { tickets: [{ ...waiting, state: 'gone' }], nextCursor: null },
    ]) {
      stubFetch(() => json(200, page));
      expect(await failure(matchmaking.listTickets())).toMatchObject({ code: 'invalid_response', status: 200 });
    }
    stubFetch(() => json(200, { tickets: [waiting], nextCursor: null }));
    expect(await failure(matchmaking.listTickets({ id: 'other' }))).toMatchObject({ code: 'invalid_response' });
    await expect(matchmaking.listTickets({ id: input.id })).resolves.toEqual({ tickets: [waiting], nextCursor: null });
  });
});

describe('network failures and the 30-second timeout', () => {
  it('a network failure is unavailable with status null, not retried', async () => {
    const { matchmaking } = setup();
    const sent = stubFetch(() => {
      throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
    });
    const error = await failure(matchmaking.createTicket(input));
    expect(error).toMatchObject({ code: 'unavailable', status: null });
    expect(error.message).toContain('ECONNREFUSED');
    expect(sent).toHaveLength(1);
  });

  /** Resolves when the stubbed fetch is called (signing the token takes real time first). */
  let called: Promise<void>;
  let markCalled: () => void;
  beforeEach(() => {
    called = new Promise<void>((resolve) => (markCalled = resolve));
  });

  /** A fetch that answers nothing until its signal aborts. */
  const hang = (request: SentRequest) => {
    markCalled();
    return new Promise<Response>((_resolve, reject) => {
      request.signal!.addEventListener('abort', () => reject(request.signal!.reason), { once: true });
    });
  };

  it('no reply within 30 seconds is unavailable with status null; at 29.9 s the call is still waiting', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { matchmaking } = setup();
    const sent = stubFetch(hang);
    const outcome = matchmaking.createTicket(input).then(
      () => 'resolved',
      (e: unknown) => e,
    );
    await called;
    await vi.advanceTimersByTimeAsync(29_900);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.signal!.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(100);
    const error = await outcome;
    expect(error).toBeInstanceOf(MatchmakingError);
    expect(error).toMatchObject({ code: 'unavailable', status: null });
    expect(sent).toHaveLength(1);
  });

  it('the 30 seconds include reading the body: a stalled body is unavailable and keeps status 200', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { matchmaking } = setup();
    stubFetch((request) => {
      markCalled();
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"id":"ticket-1",'));
          request.signal!.addEventListener('abort', () => controller.error(request.signal!.reason), { once: true });
        },
      });
      return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
    });
    const outcome = matchmaking.listTickets().then(
      () => 'resolved',
      (e: unknown) => e,
    );
    await called;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(await outcome).toMatchObject({ code: 'unavailable', status: 200 });
  });

  it('a reply within the time clears its timer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { matchmaking } = setup();
    stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    await matchmaking.listTickets();
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('types', () => {
  it('is generic over the payload type', async () => {
    const { matchmaking } = setup();
    stubFetch(() => json(200, matched));
    const ticket: Ticket<{ seed: number }> = await matchmaking.createTicket(input);
    if (ticket.state !== 'matched') throw new Error('expected matched');
    const seed: number = ticket.match.payload.seed;
    expect(seed).toBe(7);
    // @ts-expect-error the payload type is enforced
    await expect(matchmaking.createTicket({ ...input, payload: { seed: 'x' } })).resolves.toBeDefined();
  });
});
