import { randomBytes, sign as signBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_HTTP_TIMEOUTS, loadConfig } from '../../src/config.js';
import { httpServerOptions } from '../../src/http/server.js';
import { generateKeyPair, parsePublicKey, parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { signToken, type TestApp } from '../helpers/harness.js';
import { ticket } from '../helpers/tickets.js';
import { Wallet } from '../push/support/wallet.js';
import { hostCommon, LoggedServer, rawExchange, type Reply, STACK_OR_PATH, subscriptionJson } from './support.js';

/**
 * Hostile input (issue 6, item 4) against the real server and Redis. Every refusal is checked
 * three ways: the exact `{"error": code}` body with its status, no key under the server's prefix
 * changed (tickets, tombstones, queue policies, subscriptions, visits, mutes, nonces, push jobs),
 * and nothing at warn level or above, and no stack or source path, in the server's log.
 *
 * Already covered elsewhere and not repeated here: the auth failure table on listTickets and the
 * legacy token table (test/apps/auth.test.ts, test/push/api.test.ts), malformed/truncated/
 * other-filter cursors and another app's cursor without filters (test/matchmaking/
 * cancel-list.test.ts), matchmaking's invalid UTF-8, lone surrogates, 1e400 in a payload, 413
 * and 30,000-deep payloads (test/matchmaking/validation.test.ts), push 413 and non-object bodies
 * (test/push/api.test.ts), host shapes and signatures (test/push/host.test.ts).
 */
let s: LoggedServer;
let app: TestApp;
let other: TestApp;
/** A wallet that subscribed and opened `app`: a valid send to it is accepted (202). */
let user: Wallet;
let logMark = 0;

beforeAll(async () => {
  s = await LoggedServer.start();
  app = await s.registerApp({ audienceDays: 30 });
  other = await s.registerApp({ audienceDays: 30 });
  user = new Wallet();
  const subscribed = await s.host('/api/host/subscriptions', user, JSON.stringify({ ...hostCommon(user), subscription: subscriptionJson() }));
  const visited = await s.host('/api/host/visits', user, JSON.stringify({ ...hostCommon(user), origin: app.origin }));
  if (subscribed.status !== 204 || visited.status !== 204) throw new Error(`setup: ${subscribed.text} ${visited.text}`);
});
afterAll(async () => {
  await s?.stop();
});
beforeEach(() => {
  logMark = s.log.length;
});
afterEach(() => {
  // A client's hostile input is never a server error: nothing at warn or above, no stack, no path.
  expect(s.logProblems(logMark)).toEqual([]);
});

const now = () => Math.floor(Date.now() / 1000);
const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64url');

/** The exact refusal: status, `{"error": code}` and nothing else, as JSON, without stack or path. */
function expectRefusal(reply: Reply, status: number, code: string, label = ''): void {
  expect({ status: reply.status, text: reply.text }, label).toEqual({ status, text: JSON.stringify({ error: code }) });
  expect(reply.contentType, label).toMatch(/^application\/json/);
  expect(reply.text, label).not.toMatch(STACK_OR_PATH);
}

/** Runs `request` and checks that it changed no key under the server's prefix. */
const unchanged = <T>(request: () => Promise<T>): Promise<T> => s.unchanged(request);

/** A compact JWS over any header and payload text, signed with Ed25519 by `secretKey` (jose refuses to sign some of these). */
function rawJws(header: string, payload: string, secretKey: string): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const signature = signBytes(null, Buffer.from(input), privateKeyObject(parseSecretKey(secretKey)!));
  return `${input}.${signature.toString('base64url')}`;
}

const createBody = (input: unknown) => JSON.stringify({ operation: 'createTicket', input });
const sendBody = () => JSON.stringify({ to: user.address, title: 'Round 3', body: 'Join now' });

describe('app tokens on requests that would write: refused, and nothing is written', () => {
  /** [name, Authorization header, status, code] */
  async function hostileTokens(): Promise<Array<[string, string, number, string]>> {
    const t = now();
    const claims = { iss: app.origin, aud: 'service-api', iat: t, exp: t + 60 };
    const header = { alg: 'EdDSA', typ: 'service-app-auth+jwt' };
    const hs256 = (secret: Uint8Array) => new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: header.typ }).sign(secret);
    const publicKeyBytes = parsePublicKey(app.publicKey)!;
    const otherKeys = generateKeyPair();
    const bearer = (token: string) => `Bearer ${token}`;
    const unauthenticated = (name: string, token: string): [string, string, number, string] => [name, bearer(token), 401, 'unauthenticated'];
    return [
      unauthenticated('alg none, empty signature', `${b64(JSON.stringify({ alg: 'none', typ: header.typ }))}.${b64(JSON.stringify(claims))}.`),
      unauthenticated('alg none, junk signature', `${b64(JSON.stringify({ alg: 'none', typ: header.typ }))}.${b64(JSON.stringify(claims))}.AAAA`),
      unauthenticated('HS256 keyed with the base58 public key', await hs256(new TextEncoder().encode(app.publicKey))),
      unauthenticated('HS256 keyed with the raw public key bytes', await hs256(publicKeyBytes)),
      unauthenticated('HS256 keyed with the base64url public key (JWK x)', await hs256(new TextEncoder().encode(Buffer.from(publicKeyBytes).toString('base64url')))),
      unauthenticated('EdDSA header over an HMAC signature', `${b64(JSON.stringify(header))}.${b64(JSON.stringify(claims))}.${(await hs256(publicKeyBytes)).split('.')[2]}`),
      unauthenticated('typ JWT', await signToken(app.secretKey, app.origin, { header: { typ: 'JWT' } })),
      unauthenticated('no typ', rawJws(JSON.stringify({ alg: 'EdDSA' }), JSON.stringify(claims), app.secretKey)),
      unauthenticated('typ of a manifest', await signToken(app.secretKey, app.origin, { header: { typ: 'service-app-manifest+jwt' } })),
      unauthenticated('aud service-push', await signToken(app.secretKey, app.origin, { claims: { aud: 'service-push' } })),
      unauthenticated('aud missing', await signToken(app.secretKey, app.origin, { exactClaims: { iss: app.origin, iat: t, exp: t + 60 } })),
      unauthenticated('iss of another app, signed with this key', await signToken(app.secretKey, other.origin)),
      unauthenticated('iss a number', await signToken(app.secretKey, app.origin, { claims: { iss: 42 } })),
      ['iss an unknown origin', bearer(await signToken(app.secretKey, 'https://nobody.example')), 403, 'app_not_verified'],
      ['iss the origin in capitals', bearer(await signToken(app.secretKey, app.origin.toUpperCase())), 403, 'app_not_verified'],
      unauthenticated('a token of another app (its key) claiming this app', await signToken(other.secretKey, app.origin)),
      unauthenticated('signed by a key nobody registered', await signToken(otherKeys.secretKey, app.origin)),
      unauthenticated('far-future exp: 1 hour lifetime', await signToken(app.secretKey, app.origin, { claims: { iat: t, exp: t + 3600 } })),
      unauthenticated('far-future exp: 10 years', await signToken(app.secretKey, app.origin, { claims: { iat: t, exp: t + 10 * 365 * 86_400 } })),
      unauthenticated('far-future exp: 1e300', await signToken(app.secretKey, app.origin, { claims: { iat: t, exp: 1e300 } })),
      unauthenticated('far-future exp: 1e400 (Infinity)', rawJws(JSON.stringify(header), `{"iss":${JSON.stringify(app.origin)},"aud":"service-api","iat":${t},"exp":1e400}`, app.secretKey)),
      unauthenticated('short lifetime, both in 2100', await signToken(app.secretKey, app.origin, { claims: { iat: 4_102_444_800, exp: 4_102_444_860 } })),
      unauthenticated('iat 1 hour ahead', await signToken(app.secretKey, app.origin, { claims: { iat: t + 3600, exp: t + 3660 } })),
      unauthenticated('exp as a string', await signToken(app.secretKey, app.origin, { claims: { exp: String(t + 60) } })),
      unauthenticated('exp before iat', await signToken(app.secretKey, app.origin, { claims: { iat: t, exp: t - 1 } })),
      unauthenticated('no iat', await signToken(app.secretKey, app.origin, { exactClaims: { iss: app.origin, aud: 'service-api', exp: t + 60 } })),
      unauthenticated('expired a day ago', await signToken(app.secretKey, app.origin, { claims: { iat: t - 86_400, exp: t - 86_340 } })),
      unauthenticated('nbf in the future', await signToken(app.secretKey, app.origin, { claims: { nbf: t + 3600 } })),
      unauthenticated('an unknown critical header', rawJws(JSON.stringify({ ...header, crit: ['x-hostile'], 'x-hostile': true }), JSON.stringify(claims), app.secretKey)),
      unauthenticated('unencoded payload (b64: false)', rawJws(JSON.stringify({ ...header, b64: false, crit: ['b64'] }), JSON.stringify(claims), app.secretKey)),
      unauthenticated('header not JSON', rawJws('{"alg":"EdDSA",', JSON.stringify(claims), app.secretKey)),
      unauthenticated('payload not JSON', rawJws(JSON.stringify(header), '{"iss":', app.secretKey)),
      unauthenticated('payload a JSON array', rawJws(JSON.stringify(header), '[1,2]', app.secretKey)),
      unauthenticated('token padded to 12 KB (under the header limit)', `${(await app.token()).split('.')[0]}.${'A'.repeat(12_000)}.${(await app.token()).split('.')[2]}`),
      unauthenticated('two tokens', `${await app.token()} ${await app.token()}`),
      ['a token in a Basic header', `Basic ${await app.token()}`, 401, 'unauthenticated'],
    ];
  }

  it('createTicket: every hostile token is refused with its code and creates no ticket, tombstone or queue policy', async () => {
    for (const [name, authorization, status, code] of await hostileTokens()) {
      const reply = await unchanged(() => s.post('/api/matchmaking', createBody(ticket()), { authorization }));
      expectRefusal(reply, status, code, name);
    }
    // The same request with a valid token does write: the refusals above were not vacuous.
    const accepted = await s.post('/api/matchmaking', createBody(ticket({ id: 'control' })), { authorization: `Bearer ${await app.token()}` });
    expect(accepted.status).toBe(200);
    expect((await s.call(app, 'listTickets', { id: 'control' })).body.tickets).toHaveLength(1);
  });

  it('cancelTicket and notifications (one user, broadcast): every hostile token is refused and writes nothing (no tombstone, no job)', async () => {
    const tokens = await hostileTokens();
    for (const [name, authorization, status, code] of tokens) {
      const cancel = await unchanged(() => s.post('/api/matchmaking', JSON.stringify({ operation: 'cancelTicket', input: { id: `never-${name}` } }), { authorization }));
      expectRefusal(cancel, status, code, `cancel: ${name}`);
      const one = await unchanged(() => s.post('/api/push', sendBody(), { authorization }));
      expectRefusal(one, status, code, `push: ${name}`);
      const all = await unchanged(() => s.post('/api/push/broadcast', JSON.stringify({ title: 't', body: 'b' }), { authorization }));
      expectRefusal(all, status, code, `broadcast: ${name}`);
    }
    expect((await s.post('/api/push', sendBody(), { authorization: `Bearer ${await app.token()}` })).status).toBe(202);
  });

  it("another app's valid token acts only in that app: cancelling this app's ticket ID leaves this app's ticket untouched", async () => {
    const mine = ticket({ id: 'mine-1', queue: { key: 'isolation', size: 2 } });
    expect((await s.call(app, 'createTicket', mine)).body.state).toBe('waiting');
    const cancelled = await s.call(other, 'cancelTicket', { id: 'mine-1' });
    expect(cancelled.body).toMatchObject({ id: 'mine-1', state: 'cancelled', admission: null });
    expect((await s.call(app, 'listTickets', { id: 'mine-1' })).body.tickets[0]).toMatchObject({ state: 'waiting' });
    expect((await s.call(other, 'listTickets', { player: mine.player })).body.tickets).toEqual([]);
  });
});

describe('oversized headers', () => {
  /** A request whose Authorization (or another) header is 100 KB, over Node's 16 KiB header limit. */
  const hugeHeader = (path: string, name: string, body = '{}') =>
    `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${name}: ${'A'.repeat(100_000)}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  it('a 100 KB Authorization header is refused by HTTP itself with 431 and the connection closed; nothing written; the server serves on', async () => {
    const cases: Array<[string, string]> = [
      ['/api/matchmaking', 'Authorization'],
      ['/api/push', 'Authorization'],
      ['/api/host/visits', 'X-Wallet-Signature'],
      ['/api/matchmaking', 'X-Padding'],
    ];
    for (const [path, name] of cases) {
      const body = path === '/api/matchmaking' ? createBody(ticket()) : JSON.stringify({ ...hostCommon(user), origin: app.origin });
      const { closed, response } = await unchanged(() => rawExchange(s.port, [hugeHeader(path, name, body)]));
      expect(closed, `${path} ${name}`).toBe(true);
      expect(response, `${path} ${name}`).toMatch(/^HTTP\/1\.1 431 /);
      expect(response).not.toMatch(STACK_OR_PATH);
    }
    // Many small headers adding up past the limit: the same.
    const many = Array.from({ length: 600 }, (_, i) => `X-H${i}: ${'b'.repeat(40)}\r\n`).join('');
    const { response } = await unchanged(() => rawExchange(s.port, [`POST /api/matchmaking HTTP/1.1\r\nHost: localhost\r\n${many}Content-Length: 2\r\n\r\n{}`]));
    expect(response).toMatch(/^HTTP\/1\.1 431 /);
    expect((await s.call(app, 'listTickets')).status).toBe(200);
  });

  it('header values with bytes past ASCII are 401 JSON; with control characters, a 400 from HTTP itself; nothing written', async () => {
    const body = createBody(ticket());
    const request = (authorization: Buffer) =>
      Buffer.concat([
        Buffer.from('POST /api/matchmaking HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\nAuthorization: '),
        authorization,
        Buffer.from(`\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
      ]);
    const token = Buffer.from(await app.token());
    const highBytes = await unchanged(() => rawExchange(s.port, [request(Buffer.concat([Buffer.from('Bearer '), token, Buffer.from([0x80, 0xff, 0xc3, 0xa9])]))]));
    expect(highBytes.response).toMatch(/^HTTP\/1\.1 401 [\s\S]*\r\n\r\n\{"error":"unauthenticated"\}$/);
    for (const control of [0x00, 0x01, 0x7f]) {
      const { response } = await unchanged(() => rawExchange(s.port, [request(Buffer.concat([Buffer.from('Bearer '), token, Buffer.from([control])]))]));
      expect(response, `0x${control.toString(16)}`).toMatch(/^HTTP\/1\.1 400 /);
      expect(response).not.toMatch(STACK_OR_PATH);
    }
  });
});

describe('listTickets cursors', () => {
  it("forged, overlong, non-ASCII cursors and app A's cursor used by app B with the same filter: invalid_argument", async () => {
    const a = await s.registerApp();
    const b = await s.registerApp();
    for (let i = 0; i < 27; i++) await s.call(a, 'createTicket', ticket({ player: 'shared-player' }));
    for (let i = 0; i < 27; i++) await s.call(b, 'createTicket', ticket({ player: 'shared-player' }));
    const cursor: string = (await s.call(a, 'listTickets', { player: 'shared-player' })).body.nextCursor;
    expect(typeof cursor).toBe('string');
    const [snapshot, after] = Buffer.from(cursor, 'base64url').toString('latin1').split('.');
    const forged = [
      // Well-formed, with a check of the right length that is not the right one.
      b64(`${snapshot}.${after}.AAAAAAAAAAAAAAAA`),
      b64(`${snapshot}.0.${Buffer.from(cursor, 'base64url').toString('latin1').split('.')[2]}`),
      b64(`999999999999999.999999999999999.AAAAAAAAAAAAAAAA`),
      b64(`${snapshot}.${after}.${'A'.repeat(16)}.extra`),
      b64(`-1.${after}.AAAAAAAAAAAAAAAA`),
      `${cursor}==`,
      'é'.repeat(10),
      '\u0000',
      'A'.repeat(513),
    ];
    for (const bad of forged) {
      const reply = await unchanged(() => s.call(a, 'listTickets', { player: 'shared-player', cursor: bad }));
      expectRefusal(reply, 400, 'invalid_argument', bad.slice(0, 40));
    }
    const cross = await unchanged(() => s.call(b, 'listTickets', { player: 'shared-player', cursor }));
    expectRefusal(cross, 400, 'invalid_argument', "A's cursor used by B");
    expect((await s.call(a, 'listTickets', { player: 'shared-player', cursor })).status).toBe(200);
  });
});

describe('duplicate member names: refused with the endpoint’s bad-input code, nothing written', () => {
  const mm = (body: string) => app.token().then((token) => s.post('/api/matchmaking', body, { authorization: `Bearer ${token}` }));
  const input = (id: string) => JSON.stringify(ticket({ id })).slice(1, -1);

  it('matchmaking: in the envelope, the input, the queue, the rating policy and anywhere in the payload', async () => {
    const deepDup = `${'['.repeat(60)}{"k":1,"x":{"a":[1,{"z":1,"z":2}]}}${']'.repeat(60)}`;
    const bodies = [
      `{"operation":"listTickets","operation":"createTicket","input":{${input('dup-1')}}}`,
      `{"operation":"createTicket","input":{${input('dup-2')}},"input":{${input('dup-2b')}}}`,
      `{"operation":"createTicket","input":{${input('dup-3')},"id":"dup-3-other"}}`,
      `{"operation":"createTicket","input":{"id":"dup-4","player":"p","queue":{"key":"q","size":2,"key":"other"},"payload":1}}`,
      `{"operation":"createTicket","input":{"id":"dup-5","player":"p","queue":{"key":"rq","size":2,"rating":{"initial":1,"widenPerSecond":1,"initial":2}},"rating":1,"payload":1}}`,
      `{"operation":"createTicket","input":{"id":"dup-6","player":"p","queue":{"key":"q","size":2},"payload":{"seed":1,"seed":2}}}`,
      `{"operation":"createTicket","input":{"id":"dup-7","player":"p","queue":{"key":"q","size":2},"payload":${deepDup}}}`,
      // The same name spelled with an escape is the same name.
      `{"operation":"createTicket","input":{"id":"dup-8","player":"p","queue":{"key":"q","size":2},"payload":{"a":1,"\\u0061":2}}}`,
      `{"operation":"createTicket","input":{"id":"dup-9","player":"p","queue":{"key":"q","size":2},"payload":{"__proto__":1,"__proto__":2}}}`,
      `{"operation":"createTicket","input":{"id":"dup-10","player":"p","queue":{"key":"q","size":2},"payload":{"":1,"":1}}}`,
      `{"operation":"cancelTicket","input":{"id":"dup-11","id":"dup-11"}}`,
      `{"operation":"listTickets","input":{"player":"p","player":"q"}}`,
    ];
    for (const body of bodies) expectRefusal(await unchanged(() => mm(body)), 400, 'invalid_argument', body.slice(0, 120));
    for (const id of ['dup-1', 'dup-2', 'dup-2b', 'dup-3', 'dup-3-other', 'dup-6', 'dup-11']) {
      expect((await s.call(app, 'listTickets', { id })).body.tickets, id).toEqual([]);
    }
  });

  it('matchmaking: equal names in different objects, and colons, quotes and backslashes inside strings, are not duplicates', async () => {
    const payload = `[{"a":1},{"a":2,"b":{"a":3}},{"k:\\"a\\":1,\\\\":"v:\\\\\\"","k":":"},{"a\\"":1,"a":2}]`;
    const reply = await mm(`{"operation":"createTicket","input":{"id":"not-dup","player":"p","queue":{"key":"q","size":2},"payload":${payload}}}`);
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body.admission.input.payload).toEqual(JSON.parse(payload));
  });

  it('notifications: a duplicate `to`, title or path is invalid_request; no job is queued', async () => {
    const authorization = `Bearer ${await app.token()}`;
    for (const body of [
      `{"to":${JSON.stringify(new Wallet().address)},"to":${JSON.stringify(user.address)},"title":"t","body":"b"}`,
      `{"to":${JSON.stringify(user.address)},"title":"t","title":"u","body":"b"}`,
      `{"to":${JSON.stringify(user.address)},"title":"t","body":"b","path":"/a","path":"/b"}`,
    ]) {
      expectRefusal(await unchanged(() => s.post('/api/push', body, { authorization })), 400, 'invalid_request', body);
    }
    const broadcast = '{"title":"t","body":"b","body":"c"}';
    expectRefusal(await unchanged(() => s.post('/api/push/broadcast', broadcast, { authorization })), 400, 'invalid_request', broadcast);
  });

  it('host endpoints: a correctly signed body with a duplicate member is invalid_request; no visit, mute, subscription or nonce is stored', async () => {
    const wallet = new Wallet();
    const common = (extra: string) => {
      const c = hostCommon(wallet);
      return `{"wallet":${JSON.stringify(c.wallet)},"signedAt":${c.signedAt},"nonce":"${c.nonce}","aud":"service-host",${extra}}`;
    };
    const sub = subscriptionJson();
    const cases: Array<[string, string]> = [
      ['/api/host/visits', common(`"origin":${JSON.stringify(other.origin)},"origin":${JSON.stringify(app.origin)}`)],
      ['/api/host/visits', `${common(`"origin":${JSON.stringify(app.origin)}`).slice(0, -1)},"wallet":${JSON.stringify(user.address)}}`],
      ['/api/host/visits', `${common(`"origin":${JSON.stringify(app.origin)}`).slice(0, -1)},"nonce":"${randomBytes(18).toString('base64url')}"}`],
      ['/api/host/mutes', common(`"origin":${JSON.stringify(app.origin)},"muted":false,"muted":true`)],
      ['/api/host/subscriptions', common(`"subscription":{"endpoint":${JSON.stringify(sub.endpoint)},"keys":{"p256dh":"${sub.keys.p256dh}","auth":"${sub.keys.auth}","auth":"${sub.keys.auth}"}}`)],
      ['/api/host/subscriptions/remove', common(`"endpoint":"https://a.example/1","endpoint":"https://a.example/2"`)],
    ];
    for (const [path, body] of cases) {
      JSON.parse(body); // the bodies are otherwise valid JSON
      expectRefusal(await unchanged(() => s.host(path, wallet, body)), 400, 'invalid_request', `${path} ${body}`);
    }
    // Without the duplicate, the same kind of request is accepted: the refusals were for the duplicate.
    expect((await s.host('/api/host/visits', wallet, common(`"origin":${JSON.stringify(app.origin)}`))).status).toBe(204);
  });
});

describe('numbers: 1e400 refused, 1e308 accepted', () => {
  it('matchmaking: rating and expiresAt of 1e400 are invalid_argument (not "never expires"); 1e308, -1e308 and 1e-400 are accepted', async () => {
    const mm = async (body: string) => s.post('/api/matchmaking', body, { authorization: `Bearer ${await app.token()}` });
    for (const [member, value] of [['expiresAt', '1e400'], ['expiresAt', '-1e400'], ['rating', '1e400']] as const) {
      const queue = member === 'rating' ? '{"key":"rq","size":2,"rating":{"initial":1,"widenPerSecond":1}}' : '{"key":"q","size":2}';
      const body = `{"operation":"createTicket","input":{"id":"big-${member}-${value}","player":"p","queue":${queue},"payload":1,"${member}":${value}}}`;
      expectRefusal(await unchanged(() => mm(body)), 400, 'invalid_argument', body);
    }
    const ok = await mm('{"operation":"createTicket","input":{"id":"big-ok","player":"p","queue":{"key":"q","size":2},"payload":[1e308,-1e308,1e-400,-0]}}');
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.admission.input.payload).toEqual([1e308, -1e308, 0, 0]);
  });

  it('notifications and host endpoints: 1e400 anywhere is invalid_request at the body step; a subscription expirationTime of 1e308 is accepted', async () => {
    const authorization = `Bearer ${await app.token()}`;
    // A number as title would be invalid_title: invalid_request shows the body itself was refused.
    const push = `{"to":${JSON.stringify(user.address)},"title":1e400,"body":"b"}`;
    expectRefusal(await unchanged(() => s.post('/api/push', push, { authorization })), 400, 'invalid_request', push);
    const wallet = new Wallet();
    const sub = subscriptionJson();
    const c = hostCommon(wallet);
    const withExpiration = (n: string) =>
      `{"wallet":"${c.wallet}","signedAt":${Date.now()},"nonce":"${randomBytes(18).toString('base64url')}","aud":"service-host","subscription":{"endpoint":"${sub.endpoint}","keys":${JSON.stringify(sub.keys)},"expirationTime":${n}}}`;
    expectRefusal(await unchanged(() => s.host('/api/host/subscriptions', wallet, withExpiration('1e400'))), 400, 'invalid_request');
    const signedAtInfinite = `{"wallet":"${c.wallet}","signedAt":1e400,"nonce":"${c.nonce}","aud":"service-host","origin":${JSON.stringify(app.origin)}}`;
    expectRefusal(await unchanged(() => s.host('/api/host/visits', wallet, signedAtInfinite)), 400, 'invalid_request');
    expect((await s.host('/api/host/subscriptions', wallet, withExpiration('1e308'))).status).toBe(204);
  });
});

describe('invalid UTF-8 and lone surrogates in notification and host bodies', () => {
  /** Byte sequences that are not UTF-8: a stray byte, an overlong "/", an encoded surrogate, a truncated sequence. */
  const badBytes = [Buffer.from([0xff]), Buffer.from([0xc0, 0xaf]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xe2, 0x82]), Buffer.from([0xc3, 0x28])];
  const splice = (text: string, marker: string, bytes: Buffer) => {
    const at = text.indexOf(marker);
    return Buffer.concat([Buffer.from(text.slice(0, at)), bytes, Buffer.from(text.slice(at + marker.length))]);
  };

  it('notifications: invalid bytes or a lone surrogate escape in the title are invalid_request (not invalid_title); nothing queued', async () => {
    const authorization = `Bearer ${await app.token()}`;
    const template = `{"to":${JSON.stringify(user.address)},"title":"a@@b","body":"b"}`;
    for (const bytes of badBytes) {
      expectRefusal(await unchanged(() => s.post('/api/push', splice(template, '@@', bytes), { authorization })), 400, 'invalid_request', bytes.toString('hex'));
    }
    for (const escape of ['\\ud800', '\\udfff', '\\ud800\\ud800', '\\udc00\\ud800']) {
      const body = template.replace('@@', escape);
      expectRefusal(await unchanged(() => s.post('/api/push', body, { authorization })), 400, 'invalid_request', escape);
    }
    // A well-formed pair is fine.
    expect((await s.post('/api/push', template.replace('@@', '\\ud83d\\ude00'), { authorization })).status).toBe(202);
  });

  it('host endpoints: the same in a correctly signed body; no visit, subscription or nonce stored', async () => {
    const wallet = new Wallet();
    for (const [i, bytes] of badBytes.entries()) {
      const c = hostCommon(wallet);
      const template = `{"wallet":"${c.wallet}","signedAt":${c.signedAt},"nonce":"${c.nonce}","aud":"service-host","endpoint":"https://a.example/@@${i}"}`;
      const body = splice(template, '@@', bytes);
      expectRefusal(await unchanged(() => s.host('/api/host/subscriptions/remove', wallet, body)), 400, 'invalid_request', bytes.toString('hex'));
    }
    for (const escape of ['\\ud800', '\\udbff', '\\udc00']) {
      const c = hostCommon(wallet);
      const body = `{"wallet":"${c.wallet}","signedAt":${c.signedAt},"nonce":"${c.nonce}","aud":"service-host","origin":${JSON.stringify(app.origin)},"${escape}":1}`;
      expectRefusal(await unchanged(() => s.host('/api/host/visits', wallet, body)), 400, 'invalid_request', escape);
    }
  });
});

describe('deep nesting and bodies over the limit', () => {
  it('100,000 levels is over 64 KiB: 413 with the area’s code on every endpoint; nothing written; the server serves on', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const mm = `{"operation":"createTicket","input":{"id":"deep","player":"p","queue":{"key":"q","size":2},"payload":${deep}}}`;
    expectRefusal(await unchanged(async () => s.post('/api/matchmaking', mm, { authorization: `Bearer ${await app.token()}` })), 413, 'invalid_argument');
    expectRefusal(await unchanged(async () => s.post('/api/push', deep, { authorization: `Bearer ${await app.token()}` })), 413, 'invalid_request');
    expectRefusal(await unchanged(() => s.host('/api/host/visits', user, deep)), 413, 'invalid_request');
    expect((await s.call(app, 'listTickets')).status).toBe(200);
  });

  it('nesting that fits in 64 KiB (30,000 arrays, 10,000 objects) is invalid_request on notification and host endpoints', async () => {
    const arrays = `${'['.repeat(30_000)}${']'.repeat(30_000)}`;
    const objects = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    const inTitle = `{"to":${JSON.stringify(user.address)},"title":${objects},"body":"b"}`;
    for (const body of [arrays, objects, inTitle]) {
      expectRefusal(await unchanged(async () => s.post('/api/push', body, { authorization: `Bearer ${await app.token()}` })), 400, 'invalid_request');
      expectRefusal(await unchanged(async () => s.post('/api/push/broadcast', body, { authorization: `Bearer ${await app.token()}` })), 400, 'invalid_request');
    }
    const c = hostCommon(user);
    const hostBody = `{"wallet":"${c.wallet}","signedAt":${c.signedAt},"nonce":"${c.nonce}","aud":"service-host","subscription":${objects}}`;
    expectRefusal(await unchanged(() => s.host('/api/host/subscriptions', user, hostBody)), 400, 'invalid_request');
    expectRefusal(await unchanged(() => s.host('/api/host/visits', user, arrays)), 400, 'invalid_request');
  });

  it('host endpoints: a body over 64 KiB is 413 invalid_request', async () => {
    const c = hostCommon(user);
    const body = JSON.stringify({ ...c, endpoint: `https://a.example/${'x'.repeat(70_000)}` });
    expectRefusal(await unchanged(() => s.host('/api/host/subscriptions/remove', user, body)), 413, 'invalid_request');
  });

  it('a chunked body without Content-Length past 64 KiB, and a gzip bomb, are 413 (the limit counts decoded bytes)', async () => {
    const authorization = `Bearer ${await app.token()}`;
    const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const prefix = '{"operation":"createTicket","input":{"id":"chunked","player":"p","queue":{"key":"q","size":2},"payload":"';
    const request = `POST /api/matchmaking HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk(prefix)}${chunk('x'.repeat(40_000))}${chunk('x'.repeat(40_000))}${chunk('"}}')}0\r\n\r\n`;
    const { response } = await unchanged(() => rawExchange(s.port, [request]));
    expect(response).toMatch(/^HTTP\/1\.1 413 /);
    expect(response.endsWith('{"error":"invalid_argument"}')).toBe(true);

    const bomb = gzipSync(Buffer.from(createBody(ticket({ id: 'bomb', payload: ' '.repeat(10_000_000) as never }))));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const reply = await unchanged(() => s.post('/api/matchmaking', bomb, { authorization, 'content-encoding': 'gzip' }));
    expectRefusal(reply, 413, 'invalid_argument');
    const hostBomb = gzipSync(Buffer.from(JSON.stringify({ ...hostCommon(user), endpoint: `https://a.example/${'x'.repeat(1_000_000)}` })));
    expectRefusal(await unchanged(() => s.post('/api/host/subscriptions/remove', hostBomb, { 'content-encoding': 'gzip', 'x-wallet-signature': user.signBytes('x') })), 413, 'invalid_request');
  });
});

describe('slow and idle clients (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS, HTTP_KEEP_ALIVE_TIMEOUT_MS)', () => {
  let slow: LoggedServer;
  beforeAll(async () => {
    slow = await LoggedServer.start({ HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600', HTTP_KEEP_ALIVE_TIMEOUT_MS: '300' });
  });
  afterAll(async () => {
    await slow?.stop();
  });
  // The assertions are that the server closes these connections; the 15 s guard is not a speed limit.
  const closedOr408 = (result: { closed: boolean; response: string }) => {
    expect(result.closed).toBe(true);
    if (result.response !== '') expect(result.response).toMatch(/^HTTP\/1\.1 408 /);
  };

  it('half a request header: the server answers 408 or closes', async () => {
    closedOr408(await rawExchange(slow.port, ['POST /api/matchmaking HTTP/1.1\r\nHost: localhost\r\nAuthorizat']));
  });

  it('complete headers, then part of the body and silence: closed, nothing written, no error logged', async () => {
    const mark = slow.log.length;
    const before = await slow.snapshot();
    const result = await rawExchange(slow.port, [
      `POST /api/host/visits HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 500\r\nX-Wallet-Signature: x\r\n\r\n{"wallet":`,
    ]);
    closedOr408(result);
    expect(await slow.snapshot()).toEqual(before);
    expect(slow.logProblems(mark)).toEqual([]);
  });

  it('an idle keep-alive connection is closed after a complete exchange', async () => {
    const result = await rawExchange(slow.port, ['GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n']);
    expect(result.closed).toBe(true);
    expect(result.response).toMatch(/^HTTP\/1\.1 200 [\s\S]*\{"status":"ok"\}$/);
  });

  it('the settings come from configuration, with defaults, and bad values stop the start naming the variable', () => {
    expect(loadConfig({}).http).toEqual(DEFAULT_HTTP_TIMEOUTS);
    expect(DEFAULT_HTTP_TIMEOUTS).toEqual({ requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000 });
    const set = loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '20000', HTTP_HEADERS_TIMEOUT_MS: '4000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '65000' });
    expect(set.http).toEqual({ requestTimeoutMs: 20_000, headersTimeoutMs: 4000, keepAliveTimeoutMs: 65_000 });
    expect(httpServerOptions(set)).toEqual({ requestTimeout: 20_000, headersTimeout: 4000, keepAliveTimeout: 65_000, connectionsCheckingInterval: 1000 });
    // A short request deadline alone pulls the headers deadline down with it.
    expect(loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '5000' }).http.headersTimeoutMs).toBe(5000);
    // Node checks deadlines every 30 s unless told otherwise: short deadlines need a shorter check.
    expect(httpServerOptions(loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '600', HTTP_HEADERS_TIMEOUT_MS: '300' })).connectionsCheckingInterval).toBe(75);
    expect(httpServerOptions(loadConfig({})).connectionsCheckingInterval).toBe(2500);
    for (const [name, value] of [
      ['HTTP_REQUEST_TIMEOUT_MS', 'soon'],
      ['HTTP_REQUEST_TIMEOUT_MS', '0'],
      ['HTTP_REQUEST_TIMEOUT_MS', '-5'],
      ['HTTP_REQUEST_TIMEOUT_MS', '1.5'],
      ['HTTP_REQUEST_TIMEOUT_MS', '3600001'],
      ['HTTP_HEADERS_TIMEOUT_MS', '0'],
      ['HTTP_KEEP_ALIVE_TIMEOUT_MS', '0'],
      ['HTTP_KEEP_ALIVE_TIMEOUT_MS', '1e3'],
    ] as const) {
      expect(() => loadConfig({ [name]: value }), `${name}=${value}`).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^${name}: `));
    }
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '1000', HTTP_HEADERS_TIMEOUT_MS: '2000' })).toThrow(/^HTTP_HEADERS_TIMEOUT_MS: must not exceed/);
  });
});
