import { afterEach, describe, expect, it, vi } from 'vitest';
import { notifyAudience, notifyUser, PushError } from '../../src/client/index.js';
import { APP_AUTH_AUD, APP_AUTH_TYP, DEFAULT_API_URL, LEGACY_BROADCAST_TYP, LEGACY_PUSH_AUD, LEGACY_PUSH_TYP } from '../../src/shared/protocol.js';
import { bearer, isolateClientEnv, json, newKey, ORIGIN, restoreFetch, stubFetch, text, verifyJwt, type SentRequest } from './support.js';

/*
 * The notification endpoints are not on the server yet: these unit tests check exactly what
 * the client sends and how it reads replies, with fetch stubbed.
 */

isolateClientEnv();
restoreFetch();
afterEach(() => {
  vi.useRealTimers();
});

const wallet = newKey().publicKey;
const accepted = () => json(202, { id: 'n-1' });

async function failure(promise: Promise<unknown>): Promise<PushError> {
  const error = await promise.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PushError);
  return error as PushError;
}

describe('with SERVICE_APP_KEY: JSON body and the shared app JWT', () => {
  it('notifyUser posts {to, title, body, path} (trimmed) to /api/push with a Bearer app token', async () => {
    const key = newKey();
    process.env['SERVICE_APP_KEY'] = key.secretKey;
    process.env['SERVICE_PUSH_KEY'] = newKey().secretKey; // ignored when the app key is set
    process.env['SERVICE_API_URL'] = 'http://127.0.0.1:4010';
    const sent = stubFetch(accepted);
    const receipt = await notifyUser({ origin: ORIGIN, to: wallet, title: '  Your turn ', body: '\nAlice moved.\t', path: '/game/42?tab=moves' });
    expect(receipt).toEqual({ id: 'n-1' });
    expect(sent).toHaveLength(1);
    const request = sent[0]!;
    expect(request.url).toBe('http://127.0.0.1:4010/api/push');
    expect(request.method).toBe('POST');
    expect(request.redirect).toBe('manual');
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['idempotency-key']).toBeUndefined();
    expect(JSON.parse(request.body)).toEqual({ to: wallet, title: 'Your turn', body: 'Alice moved.', path: '/game/42?tab=moves' });
    const { header, claims } = await verifyJwt(bearer(request), key.publicKey);
    expect(header).toEqual({ alg: 'EdDSA', typ: APP_AUTH_TYP });
    expect(claims).toEqual({ iss: ORIGIN, aud: APP_AUTH_AUD, iat: claims.iat, exp: claims.iat! + 60 });
  });

  it('notifyAudience posts {title, body} to /api/push/broadcast; path is omitted when not given (the service defaults to /)', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(accepted);
    await notifyAudience({ origin: ORIGIN, title: 'Season 2', body: 'New maps are live' });
    expect(sent[0]!.url).toBe(`${DEFAULT_API_URL}/api/push/broadcast`);
    expect(JSON.parse(sent[0]!.body)).toEqual({ title: 'Season 2', body: 'New maps are live' });
  });

  it('sends idempotencyKey as the Idempotency-Key header', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(accepted);
    await notifyUser({ origin: ORIGIN, to: wallet, title: 't', body: 'b', idempotencyKey: 'turn-42-alice' });
    await notifyAudience({ origin: ORIGIN, title: 't', body: 'b', idempotencyKey: 'season-2' });
    expect(sent.map((r) => r.headers['idempotency-key'])).toEqual(['turn-42-alice', 'season-2']);
    expect(JSON.parse(sent[0]!.body)).not.toHaveProperty('idempotencyKey');
  });
});

describe('with only SERVICE_PUSH_KEY: the legacy signed-body JWT', () => {
  it('notifyUser: application/jwt body, no Authorization; typ service-push+jwt, aud, iss, sub, content claims, 60 s', async () => {
    const key = newKey();
    process.env['SERVICE_PUSH_KEY'] = key.secretKey;
    const sent = stubFetch(accepted);
    await notifyUser({ origin: ORIGIN, to: wallet, title: ' Your turn ', body: 'Alice moved', path: '/game/42', idempotencyKey: 'k1' });
    const request = sent[0]!;
    expect(request.url).toBe(`${DEFAULT_API_URL}/api/push`);
    expect(request.headers['content-type']).toBe('application/jwt');
    expect(request.headers['authorization']).toBeUndefined();
    expect(request.headers['idempotency-key']).toBe('k1');
    const { header, claims } = await verifyJwt(request.body, key.publicKey);
    expect(header).toEqual({ alg: 'EdDSA', typ: LEGACY_PUSH_TYP });
    expect(claims).toEqual({
      iss: ORIGIN,
      aud: LEGACY_PUSH_AUD,
      sub: wallet,
      title: 'Your turn',
      body: 'Alice moved',
      path: '/game/42',
      iat: claims.iat,
      exp: claims.iat! + 60,
    });
    expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(5);
  });

  it('notifyAudience: typ service-push-broadcast+jwt, no sub, no path when not given', async () => {
    const key = newKey();
    process.env['SERVICE_PUSH_KEY'] = key.secretKey;
    const sent = stubFetch(accepted);
    await notifyAudience({ origin: ORIGIN, title: 'Season 2', body: 'New maps' });
    expect(sent[0]!.url).toBe(`${DEFAULT_API_URL}/api/push/broadcast`);
    const { header, claims } = await verifyJwt(sent[0]!.body, key.publicKey);
    expect(header).toEqual({ alg: 'EdDSA', typ: LEGACY_BROADCAST_TYP });
    expect(claims).toEqual({ iss: ORIGIN, aud: LEGACY_PUSH_AUD, title: 'Season 2', body: 'New maps', iat: claims.iat, exp: claims.iat! + 60 });
  });
});

describe('local refusals (nothing sent, status null)', () => {
  async function refusedLocally(run: () => Promise<unknown>): Promise<PushError> {
    const sent = stubFetch(accepted);
    const error = await failure(run());
    expect(error.status).toBeNull();
    expect(sent).toHaveLength(0);
    return error;
  }

  it('title and body are trimmed and must be nonempty strings', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    for (const title of ['', '   ', '\n\t', 5]) {
      expect((await refusedLocally(() => notifyUser({ origin: ORIGIN, to: wallet, title: title as string, body: 'b' }))).code).toBe('invalid_title');
    }
    for (const body of ['', '  ', undefined]) {
      expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't', body: body as string }))).code).toBe('invalid_body');
    }
  });

  it('title at most 120 characters and body at most 1000, after trimming', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(accepted);
    await notifyAudience({ origin: ORIGIN, title: ` ${'😀'.repeat(120)} `, body: 'b'.repeat(1000) });
    expect(sent).toHaveLength(1);
    expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't'.repeat(121), body: 'b' }))).code).toBe('invalid_title');
    expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't', body: 'b'.repeat(1001) }))).code).toBe('invalid_body');
  });

  it('path must start with / and not //; no control characters, backslashes or fragment', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    for (const path of ['', 'game/1', '//evil.example/x', 'https://evil.example', '/a\\b', '/a#b', '/a\nb', `/${'x'.repeat(2048)}`]) {
      expect((await refusedLocally(() => notifyUser({ origin: ORIGIN, to: wallet, title: 't', body: 'b', path }))).code).toBe('invalid_path');
    }
    const sent = stubFetch(accepted);
    await notifyUser({ origin: ORIGIN, to: wallet, title: 't', body: 'b', path: '/' });
    expect(JSON.parse(sent[0]!.body).path).toBe('/');
  });

  it('`to` must be a wallet address; origin must be a canonical public HTTPS origin; unknown options are refused', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    for (const to of ['', 'not-a-wallet', newKey().secretKey, 42]) {
      expect((await refusedLocally(() => notifyUser({ origin: ORIGIN, to: to as string, title: 't', body: 'b' }))).code).toBe('invalid_request');
    }
    for (const origin of ['http://game.example', 'https://game.example/', 'https://localhost']) {
      expect((await refusedLocally(() => notifyAudience({ origin, title: 't', body: 'b' }))).code).toBe('invalid_request');
    }
    const withTypo = { origin: ORIGIN, title: 't', body: 'b', idempotency_key: 'x' } as never;
    expect((await refusedLocally(() => notifyAudience(withTypo))).code).toBe('invalid_request');
    expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't', body: 'b', idempotencyKey: '' }))).code).toBe('invalid_request');
    expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't', body: 'b', apiUrl: 'http://api.example' }))).code).toBe('invalid_request');
  });

  it('no key, or a set but empty or malformed key, is unauthenticated (no fall-through to the legacy key)', async () => {
    expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't', body: 'b' }))).code).toBe('unauthenticated');
    process.env['SERVICE_PUSH_KEY'] = newKey().secretKey;
    process.env['SERVICE_APP_KEY'] = '';
    expect((await refusedLocally(() => notifyAudience({ origin: ORIGIN, title: 't', body: 'b' }))).code).toBe('unauthenticated');
    delete process.env['SERVICE_APP_KEY'];
    process.env['SERVICE_PUSH_KEY'] = newKey().publicKey; // 32 bytes
    expect((await refusedLocally(() => notifyUser({ origin: ORIGIN, to: wallet, title: 't', body: 'b' }))).code).toBe('unauthenticated');
  });
});

describe('replies', () => {
  it.each([
    ['unauthenticated', 401],
    ['unauthorized', 403],
    ['app_not_verified', 403],
    ['push_not_declared', 403],
    ['push_muted', 403],
    ['not_your_user', 403],
    ['unknown_user', 404],
    ['broadcast_not_configured', 409],
    ['invalid_request', 400],
    ['invalid_title', 400],
    ['invalid_body', 400],
    ['invalid_path', 400],
    ['unavailable', 503],
    ['push_not_enabled', 503],
    ['some_future_reason', 418],
  ])('a refusal %s (HTTP %i) throws PushError with the service’s reason, sent once', async (code, status) => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(() => json(status, { error: code }));
    const error = await failure(notifyUser({ origin: ORIGIN, to: wallet, title: 't', body: 'b' }));
    expect(error).toMatchObject({ code, status, name: 'PushError' });
    expect(sent).toHaveLength(1);
  });

  it('an unreadable reply is invalid_response; an accepted reply without an id too', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    for (const reply of [() => text(502, '<html>', 'text/html'), () => json(500, {}), () => json(202, {}), () => text(202, ''), () => new Response(null, { status: 302, headers: { location: 'https://x.example' } })]) {
      stubFetch(reply);
      const error = await failure(notifyAudience({ origin: ORIGIN, title: 't', body: 'b' }));
      expect(error).toMatchObject({ code: 'invalid_response', status: reply().status });
    }
  });

  it('a network failure is unavailable with status null, not retried', async () => {
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    const sent = stubFetch(() => {
      throw new TypeError('fetch failed');
    });
    expect(await failure(notifyAudience({ origin: ORIGIN, title: 't', body: 'b' }))).toMatchObject({ code: 'unavailable', status: null });
    expect(sent).toHaveLength(1);
  });

  it('times out after 30 seconds: unavailable, status null', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    process.env['SERVICE_APP_KEY'] = newKey().secretKey;
    let markCalled!: () => void;
    const called = new Promise<void>((resolve) => (markCalled = resolve));
    stubFetch((request: SentRequest) => {
      markCalled();
      return new Promise<Response>((_resolve, reject) => {
        request.signal!.addEventListener('abort', () => reject(request.signal!.reason), { once: true });
      });
    });
    const outcome = notifyAudience({ origin: ORIGIN, title: 't', body: 'b' }).then(
      () => 'resolved',
      (e: unknown) => e,
    );
    await called; // signing the token takes real time before the request (and its timer) starts
    await vi.advanceTimersByTimeAsync(29_900);
    expect(await Promise.race([outcome, Promise.resolve('pending')])).toBe('pending');
    await vi.advanceTimersByTimeAsync(100);
    expect(await outcome).toMatchObject({ code: 'unavailable', status: null });
  });
});
