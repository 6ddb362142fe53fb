import { randomBytes } from 'node:crypto';
import bs58 from 'bs58';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signLegacyPushToken } from '../../src/client/push.js';
import { generateKeyPair, parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { startServer } from '../../src/http/server.js';
import { signToken, testConfig, testPrefix, type TestApp } from '../helpers/harness.js';
import { Wallet } from './support/wallet.js';
import { PushWorld } from './support/env.js';

/**
 * The notification API without a worker: every refusal of spec section 7B with the statuses of
 * DESIGN.md, in DESIGN.md's order, and what an accepted send puts on the queue.
 */
const DAY = 86_400_000;
const T0 = 1_800_000_000_000;
let world: PushWorld;
let app: TestApp;
let to: string;

beforeAll(async () => {
  world = await PushWorld.start();
  app = await world.harness.registerApp({ name: 'Quiz Night', audienceDays: 30 });
  await world.harness.setClock(app, T0);
  to = (await world.user(app)).wallet.address;
});
afterAll(async () => {
  await world?.stop();
});

const refused = (code: string, status: number) => ({ status, body: { error: code } });

/** The queued job's plaintext payload. */
async function payloadOf(id: string): Promise<Record<string, unknown>> {
  const job = await world.queue.getJob(id);
  return JSON.parse(job!.data.payload);
}

/** A legacy token with any header, claims or key. */
async function legacyToken(options: { key?: string; typ?: string; claims?: Record<string, unknown>; exact?: Record<string, unknown>; alg?: string } = {}): Promise<string> {
  const pair = parseSecretKey(options.key ?? app.secretKey)!;
  const now = Math.floor(Date.now() / 1000);
  const claims = options.exact ?? { iss: app.origin, aud: 'service-push', iat: now, exp: now + 60, sub: to, title: 't', body: 'b', ...options.claims };
  return new SignJWT(claims).setProtectedHeader({ alg: options.alg ?? 'EdDSA', typ: options.typ ?? 'service-push+jwt' } as { alg: string }).sign(privateKeyObject(pair));
}

describe('POST /api/push, JSON mode', () => {
  it('accepts: 202 {"id"} only; the queued payload has the app name on the trimmed title, the trimmed body and the URL', async () => {
    const reply = await world.send(app, { to, title: '\n  Round 3 \t', body: '  Join now!  ', path: '/rooms/7?seat=2' });
    expect(reply.status).toBe(202);
    expect(Object.keys(reply.body)).toEqual(['id']);
    expect(reply.body.id).toMatch(/^n[A-Za-z0-9_-]{22}$/);
    expect(await payloadOf(reply.body.id)).toEqual({
      id: reply.body.id,
      title: 'Quiz Night: Round 3',
      body: 'Join now!',
      url: `${app.origin}/rooms/7?seat=2`,
      origin: app.origin,
    });
    const defaultPath = await world.send(app, { to, title: 't', body: 'b' });
    expect((await payloadOf(defaultPath.body.id))['url']).toBe(`${app.origin}/`);
  });

  it('unauthenticated (401): missing, malformed, badly signed, wrong typ or aud, expired or too long-lived tokens', async () => {
    const body = JSON.stringify({ to, title: 't', body: 'b' });
    const post = (authorization?: string) => world.harness.post('/api/push', body, authorization ? { authorization } : {});
    const other = generateKeyPair();
    const now = Math.floor(Date.now() / 1000);
    for (const authorization of [
      undefined,
      'Bearer nope',
      `Basic ${await app.token()}`,
      `Bearer ${await signToken(other.secretKey, app.origin)}`,
      `Bearer ${await signToken(app.secretKey, app.origin, { header: { typ: 'JWT' } })}`,
      `Bearer ${await signToken(app.secretKey, app.origin, { claims: { aud: 'service-push' } })}`,
      `Bearer ${await signToken(app.secretKey, app.origin, { claims: { iat: now - 400, exp: now - 100 } })}`,
      `Bearer ${await signToken(app.secretKey, app.origin, { claims: { iat: now, exp: now + 600 } })}`,
      `Bearer ${await legacyToken()}`,
    ]) {
      const reply = await post(authorization);
      expect({ status: reply.status, body: reply.body }, String(authorization)).toEqual(refused('unauthenticated', 401));
    }
  });

  it('app_not_verified (403): unknown origin, unverified app, an app verified for the other environment', async () => {
    const keys = generateKeyPair();
    const unknown = { token: () => signToken(keys.secretKey, 'https://nobody.example') } as TestApp;
    const unverified = await world.harness.registerApp({ verified: false });
    const staging = await world.harness.registerApp({ environment: 'staging' });
    for (const a of [unknown, unverified, staging]) expect(await world.send(a, { to, title: 't', body: 'b' })).toEqual(refused('app_not_verified', 403));
  });

  it('push_not_declared, push_muted (403), push_not_enabled (503), in that order and before the fields', async () => {
    const undeclared = await world.harness.registerApp({ push: false, pushMuted: true });
    expect(await world.send(undeclared, { to, title: '', body: 'b' })).toEqual(refused('push_not_declared', 403));
    const muted = await world.harness.registerApp({ pushMuted: true });
    expect(await world.send(muted, { to, title: '', body: 'b' })).toEqual(refused('push_muted', 403));
    expect(await world.send(muted, { title: 't', body: 'b' }, { broadcast: true })).toEqual(refused('push_muted', 403));

    const noVapid = await PushWorld.start({ vapid: false });
    try {
      const a = await noVapid.harness.registerApp();
      expect(await noVapid.send(a, { to, title: '', body: 'b' })).toEqual(refused('push_not_enabled', 503));
      expect(await noVapid.send(a, { title: 't', body: 'b' }, { broadcast: true })).toEqual(refused('push_not_enabled', 503));
    } finally {
      await noVapid.stop();
    }
  });

  it('invalid_request (400): not a JSON object, unknown members, `to` missing or not a wallet address, wrong Content-Type, bad Idempotency-Key', async () => {
    const headers = async () => ({ authorization: `Bearer ${await app.token()}` });
    for (const body of ['[1]', '"x"', 'null', '{', '{"to":"a","title":"t","body":"b"', '\u00ff']) {
      const reply = await world.harness.post('/api/push', body, await headers());
      expect({ status: reply.status, body: reply.body }, body).toEqual(refused('invalid_request', 400));
    }
    const shortKey = bs58.encode(randomBytes(31));
    for (const content of [
      { to, title: 't', body: 'b', extra: 1 },
      { title: 't', body: 'b' },
      { to: 'not a wallet', title: 't', body: 'b' },
      { to: shortKey, title: 't', body: 'b' },
      { to: `1${to}`, title: 't', body: 'b' },
      { to: 42, title: 't', body: 'b' },
      { to: null, title: 't', body: 'b' },
      // `to` is checked before the title.
      { to: 'x', title: '', body: 'b' },
    ]) {
      expect(await world.send(app, content), JSON.stringify(content)).toEqual(refused('invalid_request', 400));
    }
    expect(await world.send(app, { to, title: 't', body: 'b' }, { headers: { 'content-type': 'text/plain' } })).toEqual(refused('invalid_request', 400));
    for (const idempotency of [{}, { 'idempotency-key': 'empty-body' }]) {
      const empty = await fetch(`${world.harness.url}/api/push`, { method: 'POST', headers: { ...(await headers()), 'content-type': 'application/json', ...idempotency } });
      expect({ status: empty.status, body: await empty.json() }).toEqual(refused('invalid_request', 400));
    }
    expect(await world.send(app, { to, title: 't', body: 'b' }, { idempotencyKey: 'x'.repeat(256) })).toEqual(refused('invalid_request', 400));
    expect(await world.send(app, { to, title: 't', body: 'b' }, { idempotencyKey: 'has space' })).toEqual(refused('invalid_request', 400));
    expect(await world.send(app, { to, title: 't', body: 'b' }, { broadcast: true })).toEqual(refused('invalid_request', 400));
    const huge = await world.harness.post('/api/push', JSON.stringify({ to, title: 't', body: 'x'.repeat(70_000) }), await headers());
    expect({ status: huge.status, body: huge.body }).toEqual(refused('invalid_request', 413));
  });

  it('invalid_title and invalid_body (400): missing, not a string, blank after trimming, too long in code points', async () => {
    for (const title of [undefined, 5, null, '', '   \n\t', 'x'.repeat(121), '😀'.repeat(121)]) {
      expect(await world.send(app, { to, title, body: 'b' }), String(title)).toEqual(refused('invalid_title', 400));
    }
    for (const body of [undefined, [], '', '  ', 'x'.repeat(1001), '😀'.repeat(1001)]) {
      expect(await world.send(app, { to, title: 't', body }), String(body)).toEqual(refused('invalid_body', 400));
    }
    // Title before body before path.
    expect(await world.send(app, { to, title: '', body: '', path: 'x' })).toEqual(refused('invalid_title', 400));
    expect(await world.send(app, { to, title: 't', body: '', path: 'x' })).toEqual(refused('invalid_body', 400));
    // The limits themselves, after trimming.
    const longest = await world.send(app, { to, title: ` ${'😀'.repeat(120)} `, body: `  ${'x'.repeat(1000)}  ` });
    expect(longest.status).toBe(202);
    expect((await payloadOf(longest.body.id))['title']).toBe(`Quiz Night: ${'😀'.repeat(120)}`);
    // A body within 1000 characters that no push service would carry (over 4 KB encrypted).
    expect(await world.send(app, { to, title: 't', body: '😀'.repeat(1000) })).toEqual(refused('invalid_body', 400));
  });

  it('invalid_path (400): must start with "/" and not "//"; no control characters, backslashes or fragment; at most 2048 bytes', async () => {
    for (const path of ['', 'games', 'https://evil.example/', '//evil.example', '/a\\b', '/\\evil', '/a#b', '/a\u0000', '/a\nb', '/a\u007f', '/a\u0085', `/${'x'.repeat(2048)}`, null, 7]) {
      expect(await world.send(app, { to, title: 't', body: 'b', path }), JSON.stringify(path)).toEqual(refused('invalid_path', 400));
    }
    for (const path of ['/', '/games/1?x=1&y=%20z', '/ü', `/${'x'.repeat(2047)}`, '/a/../b']) {
      const reply = await world.send(app, { to, title: 't', body: 'b', path });
      expect(reply.status, path).toBe(202);
      expect((await payloadOf(reply.body.id))['url']).toBe(`${app.origin}${path}`);
    }
  });

  it('unknown_user (404), not_your_user (403) and the user window; a muted user is accepted', async () => {
    const stranger = bs58.encode(randomBytes(32));
    expect(await world.send(app, { to: stranger, title: 't', body: 'b' })).toEqual(refused('unknown_user', 404));
    // Known (subscribed) but never opened this app; opened another app only.
    const subscribedOnly = await world.user(null);
    expect(await world.send(app, { to: subscribedOnly.wallet.address, title: 't', body: 'b' })).toEqual(refused('not_your_user', 403));
    const other = await world.harness.registerApp();
    const elsewhere = await world.user(other);
    expect(await world.send(app, { to: elsewhere.wallet.address, title: 't', body: 'b' })).toEqual(refused('not_your_user', 403));
    // A visit alone makes a wallet known.
    const visitor = await world.user(app, { subscribe: false });
    expect((await world.send(app, { to: visitor.wallet.address, title: 't', body: 'b' })).status).toBe(202);

    // The window (default 90 days) on the app's clock.
    const windowed = await world.harness.registerApp();
    await world.harness.setClock(windowed, T0);
    const user = await world.user(windowed);
    await world.harness.setClock(windowed, T0 + 90 * DAY);
    expect((await world.send(windowed, { to: user.wallet.address, title: 't', body: 'b' })).status).toBe(202);
    await world.harness.setClock(windowed, T0 + 90 * DAY + 1);
    expect(await world.send(windowed, { to: user.wallet.address, title: 't', body: 'b' })).toEqual(refused('not_your_user', 403));
    // A wider window set by the operator (apps audience --user-days).
    const wide = await world.harness.registerApp({ userDays: 120 });
    await world.harness.setClock(wide, T0);
    const patient = await world.user(wide);
    await world.harness.setClock(wide, T0 + 119 * DAY);
    expect((await world.send(wide, { to: patient.wallet.address, title: 't', body: 'b' })).status).toBe(202);

    const muted = await world.user(app);
    expect((await world.host('/api/host/mutes', muted.wallet, { origin: app.origin, muted: true })).status).toBe(204);
    expect((await world.send(app, { to: muted.wallet.address, title: 't', body: 'b' })).status).toBe(202);
  });

  it('fields are checked before the audience', async () => {
    const stranger = bs58.encode(randomBytes(32));
    expect(await world.send(app, { to: stranger, title: '', body: 'b' })).toEqual(refused('invalid_title', 400));
    const unconfigured = await world.harness.registerApp({ audienceDays: null });
    expect(await world.send(unconfigured, { title: 't', body: '', path: '/' }, { broadcast: true })).toEqual(refused('invalid_body', 400));
  });
});

describe('POST /api/push/broadcast', () => {
  it('202 {"id"}: one broadcast job carrying the audience window', async () => {
    const reply = await world.send(app, { title: 'All', body: 'hands' }, { broadcast: true });
    expect(reply.status).toBe(202);
    const job = await world.queue.getJob(reply.body.id);
    expect(job!.data).toMatchObject({ kind: 'broadcast', days: 30, appId: app.appId });
  });

  it('broadcast_not_configured (409) until the operator sets an audience', async () => {
    const unconfigured = await world.harness.registerApp({ audienceDays: null });
    expect(await world.send(unconfigured, { title: 't', body: 'b' }, { broadcast: true })).toEqual(refused('broadcast_not_configured', 409));
  });
});

describe('legacy mode (application/jwt)', () => {
  it('accepts a one-user and a broadcast token signed with the app key', async () => {
    const user = await world.sendLegacy(await signLegacyPushToken(app.secretKey, app.origin, { to, title: ' Hello ', body: 'World', path: '/x' }));
    expect(user.status).toBe(202);
    expect(await payloadOf(user.body.id)).toMatchObject({ title: 'Quiz Night: Hello', body: 'World', url: `${app.origin}/x` });
    const all = await world.sendLegacy(await signLegacyPushToken(app.secretKey, app.origin, { title: 'Hi', body: 'all' }), true);
    expect(all.status).toBe(202);
  });

  it('uses the legacy push key of capabilities.push when the manifest has one (and not appKey)', async () => {
    const pushKey = generateKeyPair();
    const legacyApp = await world.harness.registerApp({ push: pushKey.publicKey, appKey: null });
    const { wallet } = await world.user(legacyApp);
    const fields = { to: wallet.address, title: 't', body: 'b' };
    expect((await world.sendLegacy(await signLegacyPushToken(pushKey.secretKey, legacyApp.origin, fields))).status).toBe(202);
    expect(await world.sendLegacy(await signLegacyPushToken(legacyApp.secretKey, legacyApp.origin, fields))).toEqual(refused('unauthenticated', 401));
    // No appKey: the shared app JWT cannot be used.
    expect(await world.send(legacyApp, fields)).toEqual(refused('app_not_verified', 403));
  });

  it('unauthenticated (401) and unauthorized (403)', async () => {
    const now = Math.floor(Date.now() / 1000);
    const other = generateKeyPair();
    for (const token of [
      'not-a-jwt',
      await legacyToken({ key: other.secretKey }),
      await legacyToken({ typ: 'JWT' }),
      await legacyToken({ typ: 'service-app-auth+jwt' }),
      await legacyToken({ claims: { aud: 'service-api' } }),
      await legacyToken({ claims: { iat: now - 400, exp: now - 100 } }),
      await legacyToken({ claims: { iat: now, exp: now + 301 } }),
      await legacyToken({ claims: { iat: now + 120, exp: now + 150 } }),
      await legacyToken({ claims: { iss: 5 } }),
    ]) {
      expect(await world.sendLegacy(token), token.slice(0, 60)).toEqual(refused('unauthenticated', 401));
    }
    expect(await world.sendLegacy(await legacyToken({ claims: { iss: 'https://nobody.example' } }))).toEqual(refused('app_not_verified', 403));
    expect(await world.sendLegacy(await legacyToken({ claims: { iss: app.origin.toUpperCase() } }))).toEqual(refused('app_not_verified', 403));
    // Correctly signed tokens that do not grant the request.
    expect(await world.sendLegacy(await legacyToken({ typ: 'service-push-broadcast+jwt' }))).toEqual(refused('unauthorized', 403));
    expect(await world.sendLegacy(await legacyToken(), true)).toEqual(refused('unauthorized', 403));
    expect(await world.sendLegacy(await legacyToken({ exact: { iss: app.origin, aud: 'service-push', iat: now, exp: now + 60, title: 't', body: 'b' } }))).toEqual(
      refused('unauthorized', 403),
    );
  });

  it('the same checks as JSON mode after the token: policy, then fields', async () => {
    const undeclaredKey = generateKeyPair();
    const undeclared = await world.harness.registerApp({ push: false, appKey: null });
    expect(await world.sendLegacy(await legacyToken({ key: undeclaredKey.secretKey, claims: { iss: undeclared.origin } }))).toEqual(refused('push_not_declared', 403));
    const muted = await world.harness.registerApp({ pushMuted: true });
    expect(await world.sendLegacy(await legacyToken({ key: muted.secretKey, claims: { iss: muted.origin, title: '' } }))).toEqual(refused('push_muted', 403));
    expect(await world.sendLegacy(await legacyToken({ claims: { sub: 'nobody' } }))).toEqual(refused('invalid_request', 400));
    expect(await world.sendLegacy(await legacyToken({ claims: { color: 'red' } }))).toEqual(refused('invalid_request', 400));
    expect(await world.sendLegacy(await legacyToken({ typ: 'service-push-broadcast+jwt', claims: {} }), true)).toEqual(refused('invalid_request', 400));
    expect(await world.sendLegacy(await legacyToken({ claims: { title: '   ' } }))).toEqual(refused('invalid_title', 400));
    expect(await world.sendLegacy(await legacyToken({ claims: { body: 3 } }))).toEqual(refused('invalid_body', 400));
    expect(await world.sendLegacy(await legacyToken({ claims: { path: '//x' } }))).toEqual(refused('invalid_path', 400));
    expect(await world.sendLegacy(await legacyToken({ claims: { sub: bs58.encode(randomBytes(32)) } }))).toEqual(refused('unknown_user', 404));
    expect(await world.sendLegacy(await legacyToken({ claims: { jti: 'x', nbf: Math.floor(Date.now() / 1000) - 5 } }))).toMatchObject({ status: 202 });
  });
});

describe('idempotency on the API', () => {
  it('a retry answers the first answer even after the app was muted; the queue holds one job', async () => {
    const a = await world.harness.registerApp();
    const { wallet } = await world.user(a);
    const first = await world.send(a, { to: wallet.address, title: 't', body: 'b' }, { idempotencyKey: 'k1' });
    expect(first.status).toBe(202);
    await world.harness.registry.update(a.origin, { pushMuted: true });
    await world.harness.server.services.registry.fetch(a.origin); // drops the API's cached record
    expect(await world.send(a, { to: wallet.address, title: 't', body: 'b' }, { idempotencyKey: 'k1' })).toEqual({ status: 202, body: { id: first.body.id } });
    expect(await world.send(a, { to: wallet.address, title: 't', body: 'b' }, { idempotencyKey: 'k2' })).toEqual(refused('push_muted', 403));
    const jobs = await world.queue.getJobs(['wait', 'prioritized']);
    expect(jobs.filter((j) => j.data.appId === a.appId)).toHaveLength(1);
  });

  it('a refusal is not remembered: the same key succeeds once the request is valid', async () => {
    const a = await world.harness.registerApp();
    const { wallet } = await world.user(a);
    expect(await world.send(a, { to: wallet.address, title: '', body: 'b' }, { idempotencyKey: 'fix-me' })).toEqual(refused('invalid_title', 400));
    expect((await world.send(a, { to: wallet.address, title: 't', body: 'b' }, { idempotencyKey: 'fix-me' })).status).toBe(202);
  });
});

describe('Redis unavailable', () => {
  it('notification and host requests answer 503 unavailable at once, not after a long wait', async () => {
    const config = testConfig(testPrefix(), { REDIS_URL: 'redis://127.0.0.1:1', VAPID_PUBLIC_KEY: world.vapid.publicKey, VAPID_PRIVATE_KEY: world.vapid.privateKey });
    const server = await startServer(config, { port: 0, host: '127.0.0.1' });
    try {
      const push = await fetch(`${server.url}/api/push`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await app.token()}` },
        body: JSON.stringify({ to, title: 't', body: 'b' }),
      });
      expect({ status: push.status, body: await push.json() }).toEqual({ status: 503, body: { error: 'unavailable' } });
      const wallet = new Wallet();
      const { body, signature } = wallet.sign({ origin: app.origin });
      const host = await fetch(`${server.url}/api/host/visits`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-wallet-signature': signature }, body });
      expect({ status: host.status, body: await host.json() }).toEqual({ status: 503, body: { error: 'unavailable' } });
      const ready = await fetch(`${server.url}/readyz`);
      expect(ready.status).toBe(503);
    } finally {
      await server.close();
    }
  });
});
