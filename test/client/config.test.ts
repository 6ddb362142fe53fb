import bs58 from 'bs58';
import { describe, expect, it } from 'vitest';
import { createMatchmaking, MatchmakingError } from '../../src/client/index.js';
import { DEFAULT_API_URL } from '../../src/shared/protocol.js';
import { bearer, isolateClientEnv, json, newKey, ORIGIN, restoreFetch, stubFetch, verifyJwt } from './support.js';

isolateClientEnv();
restoreFetch();

const waiting = (id: string) => ({
  id,
  state: 'waiting',
  admission: { input: { id, player: 'p', queue: { key: 'q', size: 2 }, payload: null }, createdAt: 1, payload: null },
});
const input = { id: 't1', player: 'p', queue: { key: 'q', size: 2 as const }, payload: null };

/** Runs one call and returns the local refusal (the stub fails the test if anything is sent). */
async function localFailure(run: () => Promise<unknown>): Promise<MatchmakingError> {
  const sent = stubFetch(() => {
    throw new Error('nothing may be sent');
  });
  const error = await run().then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => e,
  );
  expect(sent).toHaveLength(0);
  expect(error).toBeInstanceOf(MatchmakingError);
  return error as MatchmakingError;
}

describe('origin option', () => {
  it.each(['https://game.example', 'https://game.example:8443', 'https://sub.game.example', 'https://demo.versus.localhost', 'https://93.184.216.34'])(
    'accepts the canonical public HTTPS origin %s',
    (origin) => {
      expect(() => createMatchmaking({ origin })).not.toThrow();
    },
  );

  it.each([
    ['plain HTTP', 'http://game.example'],
    ['a trailing slash', 'https://game.example/'],
    ['a path', 'https://game.example/app'],
    ['a query', 'https://game.example?x=1'],
    ['a fragment', 'https://game.example#x'],
    ['credentials', 'https://user:pw@game.example'],
    ['uppercase', 'https://Game.example'],
    ['the default port', 'https://game.example:443'],
    ['no scheme', 'game.example'],
    ['empty', ''],
    ['loopback name', 'https://localhost'],
    ['loopback IPv4', 'https://127.0.0.1'],
    ['loopback IPv6', 'https://[::1]'],
    ['a private address', 'https://10.1.2.3'],
    ['a private address (192.168)', 'https://192.168.0.10:8443'],
    ['a link-local address', 'https://169.254.169.254'],
    ['an IPv6 unique-local address', 'https://[fd00::1]'],
  ])('refuses %s with invalid_argument (status null), at once', (_what, origin) => {
    let error: unknown;
    try {
      createMatchmaking({ origin });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MatchmakingError);
    expect(error).toMatchObject({ code: 'invalid_argument', status: null });
  });

  it('refuses a non-string origin, a missing options object, and an unknown option (a typo would silently reach production)', () => {
    for (const options of [{ origin: 42 }, {}, null, undefined, { origin: ORIGIN, apiURL: 'http://127.0.0.1:1' }]) {
      expect(() => createMatchmaking(options as never)).toThrow(expect.objectContaining({ code: 'invalid_argument', status: null }));
    }
  });
});

describe('apiUrl', () => {
  it.each([
    ['https://api.example', 'https://api.example'],
    ['https://api.example/', 'https://api.example'],
    ['https://api.example:8443', 'https://api.example:8443'],
    ['http://127.0.0.1:8080', 'http://127.0.0.1:8080'],
    ['http://localhost:3000', 'http://localhost:3000'],
    ['http://[::1]:3000', 'http://[::1]:3000'],
  ])('accepts %s and posts to <origin>/api/matchmaking', async (apiUrl, origin) => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    await createMatchmaking({ origin: ORIGIN, apiUrl }).listTickets();
    expect(sent[0]!.url).toBe(`${origin}/api/matchmaking`);
  });

  it.each([
    ['plain HTTP to a public host', 'http://api.example'],
    ['plain HTTP to a private address', 'http://10.0.0.5:8080'],
    ['a path', 'https://api.example/v1'],
    ['a dot path', 'https://api.example/.'],
    ['a query', 'https://api.example?x=1'],
    ['an empty query', 'https://api.example/?'],
    ['a fragment', 'https://api.example#top'],
    ['credentials', 'https://user:pw@api.example'],
    ['another scheme', 'ftp://api.example'],
    ['surrounding whitespace', ' https://api.example'],
    ['empty', ''],
    ['not a URL', 'api.example'],
  ])('refuses %s with invalid_argument (status null)', (_what, apiUrl) => {
    expect(() => createMatchmaking({ origin: ORIGIN, apiUrl })).toThrow(expect.objectContaining({ code: 'invalid_argument', status: null }));
  });

  it('defaults to SERVICE_API_URL, read at each call, else the production API', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    const matchmaking = createMatchmaking({ origin: ORIGIN });
    await matchmaking.listTickets();
    process.env['SERVICE_API_URL'] = 'http://127.0.0.1:9999';
    await matchmaking.listTickets();
    expect(sent.map((r) => r.url)).toEqual([`${DEFAULT_API_URL}/api/matchmaking`, 'http://127.0.0.1:9999/api/matchmaking']);
  });

  it('an explicit apiUrl wins over SERVICE_API_URL', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    process.env['SERVICE_API_URL'] = 'https://ignored.example';
    const sent = stubFetch(() => json(200, { tickets: [], nextCursor: null }));
    await createMatchmaking({ origin: ORIGIN, apiUrl: 'https://chosen.example' }).listTickets();
    expect(sent[0]!.url).toBe('https://chosen.example/api/matchmaking');
  });

  it('a bad SERVICE_API_URL (including a set but empty one) fails the call locally with invalid_argument', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const matchmaking = createMatchmaking({ origin: ORIGIN });
    for (const value of ['http://api.example', 'https://api.example/v1', '']) {
      process.env['SERVICE_API_URL'] = value;
      expect(await localFailure(() => matchmaking.listTickets())).toMatchObject({ code: 'invalid_argument', status: null });
    }
  });
});

describe('app key selection', () => {
  const ticketReply = (request: { body: string }) => json(200, waiting(JSON.parse(request.body).input.id));

  async function signerOf(run: () => Promise<unknown>, candidates: Record<string, string>): Promise<string> {
    const sent = stubFetch(ticketReply);
    await run();
    const token = bearer(sent[0]!);
    for (const [name, publicKey] of Object.entries(candidates)) {
      if (await verifyJwt(token, publicKey).then(() => true, () => false)) return name;
    }
    return 'none';
  }

  it('takes the explicit option, else SERVICE_APP_KEY, else SERVICE_PUSH_KEY', async () => {
    const [option, app, push] = [newKey(), newKey(), newKey()];
    const keys = { option: option.publicKey, app: app.publicKey, push: push.publicKey };
    process.env['SERVICE_APP_KEY'] = app.secretKey;
    process.env['SERVICE_PUSH_KEY'] = push.secretKey;
    expect(await signerOf(() => createMatchmaking({ origin: ORIGIN, key: option.secretKey }).createTicket(input), keys)).toBe('option');
    expect(await signerOf(() => createMatchmaking({ origin: ORIGIN }).createTicket(input), keys)).toBe('app');
    delete process.env['SERVICE_APP_KEY'];
    expect(await signerOf(() => createMatchmaking({ origin: ORIGIN }).createTicket(input), keys)).toBe('push');
  });

  it('reads the environment at each call, so a rotated key takes effect on the next call', async () => {
    const [first, second] = [newKey(), newKey()];
    const matchmaking = createMatchmaking({ origin: ORIGIN });
    process.env['SERVICE_APP_KEY'] = first.secretKey;
    const keys = { first: first.publicKey, second: second.publicKey };
    expect(await signerOf(() => matchmaking.createTicket(input), keys)).toBe('first');
    process.env['SERVICE_APP_KEY'] = second.secretKey;
    expect(await signerOf(() => matchmaking.createTicket(input), keys)).toBe('second');
  });

  it('fails locally with unauthenticated (status null) when no key is set', async () => {
    const matchmaking = createMatchmaking({ origin: ORIGIN });
    const error = await localFailure(() => matchmaking.listTickets());
    expect(error).toMatchObject({ code: 'unauthenticated', status: null });
  });

  const seed = newKey();
  const seedBytes = bs58.decode(seed.secretKey);
  const otherPublic = bs58.decode(newKey().publicKey);
  const malformed: Array<[string, string]> = [
    ['empty', ''],
    ['not base58 (0, O, I, l)', `0OIl${seed.secretKey.slice(4)}`],
    ['surrounded by whitespace', ` ${seed.secretKey}\n`],
    ['32 bytes (a public key)', seed.publicKey],
    ['63 bytes', bs58.encode(seedBytes.slice(0, 63))],
    ['65 bytes', bs58.encode(new Uint8Array([...seedBytes, 1]))],
    ['64 bytes whose public half is not the seed’s', bs58.encode(new Uint8Array([...seedBytes.slice(0, 32), ...otherPublic]))],
  ];

  it.each(malformed)('refuses a selected key that is %s: unauthenticated, status null, nothing sent', async (_what, key) => {
    expect(await localFailure(() => createMatchmaking({ origin: ORIGIN, key }).listTickets())).toMatchObject({ code: 'unauthenticated', status: null });
    process.env['SERVICE_APP_KEY'] = key;
    expect(await localFailure(() => createMatchmaking({ origin: ORIGIN }).cancelTicket('t1'))).toMatchObject({ code: 'unauthenticated', status: null });
    delete process.env['SERVICE_APP_KEY'];
    process.env['SERVICE_PUSH_KEY'] = key;
    expect(await localFailure(() => createMatchmaking({ origin: ORIGIN }).createTicket(input))).toMatchObject({ code: 'unauthenticated', status: null });
  });

  it('a selected but empty or malformed key does not fall through to the next source', async () => {
    process.env['SERVICE_PUSH_KEY'] = newKey().secretKey;
    process.env['SERVICE_APP_KEY'] = '';
    expect(await localFailure(() => createMatchmaking({ origin: ORIGIN }).listTickets())).toMatchObject({ code: 'unauthenticated', status: null });
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    expect(await localFailure(() => createMatchmaking({ origin: ORIGIN, key: 'nope' }).listTickets())).toMatchObject({ code: 'unauthenticated' });
  });
});
