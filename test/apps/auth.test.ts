import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { Harness, signToken, type TestApp } from '../helpers/harness.js';

let h: Harness;
let app: TestApp;

beforeAll(async () => {
  h = await Harness.start();
  app = await h.registerApp();
});
afterAll(async () => {
  await h.stop();
});

const listWith = (authorization?: string) =>
  h.post('/api/matchmaking', JSON.stringify({ operation: 'listTickets' }), authorization === undefined ? {} : { authorization });

const now = () => Math.floor(Date.now() / 1000);

describe('app authentication', () => {
  it('accepts a valid shared app JWT', async () => {
    expect((await listWith(`Bearer ${await app.token()}`)).status).toBe(200);
  });

  it('answers 401 unauthenticated for missing, malformed or badly signed tokens', async () => {
    const other = generateKeyPair();
    const unsigned = `${Buffer.from('{"alg":"none","typ":"service-app-auth+jwt"}').toString('base64url')}.${Buffer.from(
      JSON.stringify({ iss: app.origin, aud: 'service-api', iat: now(), exp: now() + 60 }),
    ).toString('base64url')}.`;
    const hs256 = await new SignJWT({ iss: app.origin, aud: 'service-api', iat: now(), exp: now() + 60 })
      .setProtectedHeader({ alg: 'HS256', typ: 'service-app-auth+jwt' })
      .sign(new TextEncoder().encode(app.publicKey));
    const valid = await app.token();
    const [head, body, sig] = valid.split('.');
    const tamperedBody = Buffer.from(JSON.stringify({ iss: app.origin, aud: 'service-api', iat: now(), exp: now() + 120 })).toString('base64url');
    const cases: Record<string, string | undefined> = {
      missing: undefined,
      'not bearer': `Basic ${valid}`,
      garbage: 'Bearer abc',
      'alg none': `Bearer ${unsigned}`,
      'HS256 with the public key': `Bearer ${hs256}`,
      'signed by another key': `Bearer ${await signToken(other.secretKey, app.origin)}`,
      'tampered claims': `Bearer ${head}.${tamperedBody}.${sig}`,
      'wrong typ': `Bearer ${await signToken(app.secretKey, app.origin, { header: { typ: 'JWT' } })}`,
      'legacy push typ': `Bearer ${await signToken(app.secretKey, app.origin, { header: { typ: 'service-push+jwt' }, claims: { aud: 'service-push' } })}`,
      'wrong aud': `Bearer ${await signToken(app.secretKey, app.origin, { claims: { aud: 'service-push' } })}`,
      expired: `Bearer ${await signToken(app.secretKey, app.origin, { claims: { iat: now() - 200, exp: now() - 31 } })}`,
      'lifetime over 300 s': `Bearer ${await signToken(app.secretKey, app.origin, { claims: { iat: now(), exp: now() + 301 } })}`,
      'iat in the future': `Bearer ${await signToken(app.secretKey, app.origin, { claims: { iat: now() + 60, exp: now() + 120 } })}`,
      'no exp': `Bearer ${await signToken(app.secretKey, app.origin, { exactClaims: { iss: app.origin, aud: 'service-api', iat: now() } })}`,
      'no iss': `Bearer ${await signToken(app.secretKey, app.origin, { exactClaims: { aud: 'service-api', iat: now(), exp: now() + 60 } })}`,
      oversized: `Bearer ${head}.${'A'.repeat(5000)}.${sig}`,
    };
    for (const [name, header] of Object.entries(cases)) {
      const res = await listWith(header);
      expect(res, name).toMatchObject({ status: 401, body: { error: 'unauthenticated' } });
    }
  });

  it('tolerates 30 s of clock skew, no more', async () => {
    const skewed = await signToken(app.secretKey, app.origin, { claims: { iat: now() + 25, exp: now() + 85 } });
    expect((await listWith(`Bearer ${skewed}`)).status).toBe(200);
    const justExpired = await signToken(app.secretKey, app.origin, { claims: { iat: now() - 100, exp: now() - 20 } });
    expect((await listWith(`Bearer ${justExpired}`)).status).toBe(200);
  });

  it('ignores kid, jku and jwk header members: the stored key always verifies', async () => {
    const other = generateKeyPair();
    const token = await signToken(other.secretKey, app.origin, {
      header: { kid: 'x', jku: 'https://evil.example/jwks', jwk: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(other.publicKey).toString('base64url') } },
    });
    expect((await listWith(`Bearer ${token}`)).status).toBe(401);
  });

  it('answers 403 app_not_verified for unknown, unverified, other-environment and key-less apps', async () => {
    const keys = generateKeyPair();
    const unknown = await signToken(keys.secretKey, 'https://unknown.example');
    expect(await listWith(`Bearer ${unknown}`)).toMatchObject({ status: 403, body: { error: 'app_not_verified' } });
    for (const change of [{ verified: false }, { environment: 'staging' as const }, { appKey: null }]) {
      const other = await h.registerApp(change);
      const token = change.appKey === null ? await signToken(other.secretKey, other.origin) : await other.token();
      expect(await listWith(`Bearer ${token}`), JSON.stringify(change)).toMatchObject({ status: 403, body: { error: 'app_not_verified' } });
    }
  });

  it('a token of one app cannot act for another', async () => {
    const other = await h.registerApp();
    const token = await signToken(app.secretKey, other.origin);
    expect((await listWith(`Bearer ${token}`)).status).toBe(401);
  });

  it('authenticates before reading the body', async () => {
    const res = await h.post('/api/matchmaking', '{not json');
    expect(res).toMatchObject({ status: 401, body: { error: 'unauthenticated' } });
  });
});
