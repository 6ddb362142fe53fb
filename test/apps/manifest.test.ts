import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import bs58 from 'bs58';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueManifest, ManifestError, verifyKeyProof, verifyManifest } from '../../src/apps/manifest.js';
import { AppRegistry } from '../../src/apps/registry.js';
import { registerManifest, verifyApp, VerificationError } from '../../src/apps/verification.js';
import { Keys } from '../../src/redis/keys.js';
import { generateKeyPair, parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { createKeyProof, signAppToken } from '../../src/shared/tokens.js';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { redisUrl } from '../setup/redis-url.js';

const service = generateKeyPair();
const app = generateKeyPair();
const ORIGIN = 'https://game.example';
const production = { signingPublicKey: service.publicKey, environment: 'production' as const };
const now = () => Math.floor(Date.now() / 1000);

async function manifestFor(origin = ORIGIN, extra: { push?: true | string; staging?: boolean } = {}) {
  return issueManifest({ signingKey: service.secretKey, origin, name: 'Game', appKey: app.publicKey, proof: await createKeyProof(app.secretKey, origin), ...extra });
}

/** Signs arbitrary manifest claims with a key, for the refusal cases. */
async function forge(claims: Record<string, unknown>, header: Record<string, unknown> = {}, key = service.secretKey) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', typ: 'service-app-manifest+jwt', ...header } as { alg: string })
    .sign(privateKeyObject(parseSecretKey(key)!));
}
const goodClaims = () => ({ sub: ORIGIN, aud: 'service-app-host', name: 'Game', manifestVersion: 1, iat: now(), appKey: app.publicKey, capabilities: { push: true } });

describe('key proofs', () => {
  it('accepts a fresh proof by the app key for the origin', async () => {
    await expect(verifyKeyProof(await createKeyProof(app.secretKey, ORIGIN), app.publicKey, ORIGIN)).resolves.toBeUndefined();
  });

  it('refuses a proof by another key, for another origin, expired, too long-lived, from the future, of the wrong typ, aud or alg', async () => {
    const other = generateKeyPair();
    const sign = (claims: Record<string, unknown>, typ = 'service-app-key-proof+jwt') =>
      new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ }).sign(privateKeyObject(parseSecretKey(app.secretKey)!));
    const base = { iss: ORIGIN, aud: 'service-app-key-proof', iat: now(), exp: now() + 60 };
    const unsigned = `${Buffer.from('{"alg":"none","typ":"service-app-key-proof+jwt"}').toString('base64url')}.${Buffer.from(JSON.stringify(base)).toString('base64url')}.`;
    const cases: Array<[string, string, RegExp]> = [
      ['another key', await createKeyProof(other.secretKey, ORIGIN), /signed by another key/],
      ['another origin', await createKeyProof(app.secretKey, 'https://other.example'), /is for https:\/\/other.example, not https:\/\/game.example/],
      ['expired', await createKeyProof(app.secretKey, ORIGIN, now() - 400), /expired/],
      ['expired beyond the leeway', await sign({ ...base, iat: now() - 100, exp: now() - 31 }), /expired/],
      ['lifetime over 300 s', await sign({ ...base, exp: now() + 400 }), /at most 300 s/],
      ['iat more than 30 s ahead', await sign({ ...base, iat: now() + 60, exp: now() + 120 }), /not start in the future/],
      ['wrong typ', await sign(base, 'JWT'), /typ JWT, expected service-app-key-proof\+jwt/],
      ['wrong aud', await sign({ ...base, aud: 'service-api' }), /aud/],
      ['alg none', unsigned, /EdDSA/],
      ['garbage', 'proof', /not a compact JWS/],
    ];
    for (const [name, proof, reason] of cases) {
      const refusal = verifyKeyProof(proof, app.publicKey, ORIGIN);
      await expect(refusal, name).rejects.toBeInstanceOf(ManifestError);
      await expect(refusal, name).rejects.toThrow(reason);
    }
    // Within the 30 s leeway a just-expired proof still counts.
    await expect(verifyKeyProof(await sign({ ...base, iat: now() - 100, exp: now() - 10 }), app.publicKey, ORIGIN)).resolves.toBeUndefined();
    await expect(verifyKeyProof(await createKeyProof(app.secretKey, ORIGIN), 'not-a-key', ORIGIN)).rejects.toThrow(/app key is not a base58/);
  });

  it('issueManifest refuses to sign without a valid proof', async () => {
    await expect(
      issueManifest({ signingKey: service.secretKey, origin: ORIGIN, name: 'Game', appKey: app.publicKey, proof: await createKeyProof(generateKeyPair().secretKey, ORIGIN) }),
    ).rejects.toThrow(/key proof/);
  });

  it('issueManifest refuses a malformed service key, origin or push key before signing', async () => {
    const proof = await createKeyProof(app.secretKey, ORIGIN);
    const base = { signingKey: service.secretKey, origin: ORIGIN, name: 'Game', appKey: app.publicKey, proof };
    await expect(issueManifest({ ...base, signingKey: 'nope' })).rejects.toThrow(ManifestError);
    await expect(issueManifest({ ...base, origin: 'https://Game.example/' })).rejects.toThrow(/canonical origin/);
    await expect(issueManifest({ ...base, push: 'not-a-key' })).rejects.toThrow(/push key/);
  });
});

describe('shared token signers', () => {
  it('signAppToken and createKeyProof write exactly the agreed header and claims', async () => {
    const t = 1_700_000_000;
    const token = await signAppToken(app.secretKey, ORIGIN, t);
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'EdDSA', typ: 'service-app-auth+jwt' });
    expect(decodeJwt(token)).toEqual({ iss: ORIGIN, aud: 'service-api', iat: t, exp: t + 60 });
    const proof = await createKeyProof(app.secretKey, ORIGIN, t);
    expect(decodeProtectedHeader(proof)).toEqual({ alg: 'EdDSA', typ: 'service-app-key-proof+jwt' });
    expect(decodeJwt(proof)).toEqual({ iss: ORIGIN, aud: 'service-app-key-proof', iat: t, exp: t + 300 });
    await expect(signAppToken('not-a-key', ORIGIN)).rejects.toThrow(/not a base58 64-byte/);
    // A 64-byte key whose public half is not the seed's is malformed too.
    const mixed = bs58.encode(Buffer.concat([bs58.decode(app.secretKey).subarray(0, 32), bs58.decode(service.publicKey)]));
    await expect(createKeyProof(mixed, ORIGIN)).rejects.toThrow(/not a base58 64-byte/);
  });
});

describe('manifests', () => {
  it('round-trips: issued, then verified with its claims', async () => {
    expect(await verifyManifest(await manifestFor(ORIGIN, { push: true }), production)).toEqual({
      origin: ORIGIN,
      name: 'Game',
      appKey: app.publicKey,
      push: true,
      environment: 'production',
    });
    const legacy = generateKeyPair().publicKey;
    expect((await verifyManifest(await manifestFor(ORIGIN, { push: legacy, staging: true }), { ...production, environment: 'staging' })).push).toBe(legacy);
    expect((await verifyManifest(`\n  ${await manifestFor()}\n`, production)).push).toBe(false);
    const t = 1_700_000_000;
    const issued = await issueManifest({ signingKey: service.secretKey, origin: ORIGIN, name: 'Game', appKey: app.publicKey, proof: await createKeyProof(app.secretKey, ORIGIN), now: t });
    expect(decodeProtectedHeader(issued)).toEqual({ alg: 'EdDSA', typ: 'service-app-manifest+jwt' });
    expect(decodeJwt(issued)).toEqual({ sub: ORIGIN, aud: 'service-app-host', name: 'Game', manifestVersion: 1, iat: t, appKey: app.publicKey, capabilities: {} });
    expect(decodeJwt(await manifestFor(ORIGIN, { staging: true }))['environment']).toBe('staging');
    // A manifest without appKey is accepted (no matchmaking for that app).
    const { appKey: _dropped, ...keyless } = goodClaims();
    expect((await verifyManifest(await forge(keyless), production)).appKey).toBeNull();
  });

  it('refuses every malformed or foreign manifest with a specific reason', async () => {
    const unsigned = `${Buffer.from('{"alg":"none","typ":"service-app-manifest+jwt"}').toString('base64url')}.${Buffer.from(JSON.stringify(goodClaims())).toString('base64url')}.`;
    const cases: Array<[string, string, RegExp]> = [
      ['another service key', await forge(goodClaims(), {}, generateKeyPair().secretKey), /not signed by this service/],
      ['alg none', unsigned, /EdDSA/],
      ['wrong typ', await forge(goodClaims(), { typ: 'JWT' }), /typ/],
      ['wrong aud', await forge({ ...goodClaims(), aud: 'service-api' }), /aud/],
      ['non-canonical sub', await forge({ ...goodClaims(), sub: 'https://Game.example/' }), /sub/],
      ['manifestVersion 2', await forge({ ...goodClaims(), manifestVersion: 2 }), /manifestVersion/],
      ['bad appKey', await forge({ ...goodClaims(), appKey: 'not-a-key' }), /appKey/],
      ['bad push', await forge({ ...goodClaims(), capabilities: { push: 'yes' } }), /capabilities.push/],
      ['other environment', await manifestFor(ORIGIN, { staging: true }), /^the manifest is for staging but this service is production$/],
      ['bad environment', await forge({ ...goodClaims(), environment: 'dev' }), /environment/],
      ['http sub off loopback', await forge({ ...goodClaims(), sub: 'http://game.example' }), /sub/],
      ['bad capabilities', await forge({ ...goodClaims(), capabilities: [] }), /capabilities/],
      ['no name', await forge({ ...goodClaims(), name: ' ' }), /name/],
      ['kid/jku/jwk pointing elsewhere', await forge(goodClaims(), { kid: 'x', jku: 'https://evil.example/jwks', jwk: { kty: 'OKP' } }, generateKeyPair().secretKey), /not signed by this service/],
      ['garbage', 'hello', /not a compact JWS/],
    ];
    for (const [name, jws, reason] of cases) {
      const refusal = verifyManifest(jws, production);
      await expect(refusal, name).rejects.toBeInstanceOf(ManifestError);
      await expect(refusal, name).rejects.toThrow(reason);
    }
    await expect(verifyManifest(await manifestFor(), { ...production, environment: 'staging' })).rejects.toThrow(
      /^the manifest is for production but this service is staging$/,
    );
    await expect(verifyManifest(await manifestFor(), { ...production, signingPublicKey: null })).rejects.toThrow(/SERVICE_SIGNING_PUBLIC_KEY/);
  });
});

describe('app verification', () => {
  const prefix = testPrefix();
  let redis: Redis;
  let registry: AppRegistry;
  let server: Server;
  let served = '';
  let origin = '';

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    registry = new AppRegistry(redis, new Keys(prefix), 0);
    server = createServer((req, res) => {
      if (served === 'REDIRECT') res.writeHead(302, { location: 'https://elsewhere.example/.well-known/service.jwt' }).end();
      else if (served === 'HUGE') {
        // Streamed without a content-length: the limit must hold while reading.
        res.writeHead(200, { 'content-type': 'application/jwt' });
        const chunk = 'a'.repeat(16 * 1024);
        for (let i = 0; i < 8; i++) res.write(chunk);
        res.end();
      } else if (req.url === '/.well-known/service.jwt') res.end(served);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('registerManifest stores a verified record', async () => {
    const record = await registerManifest(await manifestFor(ORIGIN, { push: true }), { registry, config: production });
    expect(await registry.fetch(ORIGIN)).toEqual(record);
    expect(record).toMatchObject({ origin: ORIGIN, verified: true, appKey: app.publicKey, push: true, environment: 'production', pushMuted: false, audienceDays: null });
  });

  it('keeps operator settings when a known app is registered again', async () => {
    await registry.update(ORIGIN, { pushMuted: true, audienceDays: 30 });
    const record = await registerManifest(await manifestFor(ORIGIN), { registry, config: production });
    expect(record).toMatchObject({ pushMuted: true, audienceDays: 30, push: false });
  });

  it('fetches the manifest an app serves, over loopback HTTP only when allowed', async () => {
    served = await manifestFor(origin);
    await expect(verifyApp(origin, { registry, config: production })).rejects.toThrow(/--allow-insecure-loopback/);
    const record = await verifyApp(origin, { registry, config: production, allowInsecureLoopback: true });
    expect(record).toMatchObject({ origin, verified: true });
  });

  it('refuses a served manifest for another origin, and a failed re-verification marks the app unverified', async () => {
    served = await manifestFor('https://someone-else.example');
    await expect(verifyApp(origin, { registry, config: production, allowInsecureLoopback: true })).rejects.toThrow(/is for https:\/\/someone-else.example/);
    expect((await registry.fetch(origin))?.verified).toBe(false);
    served = await manifestFor(origin);
    await verifyApp(origin, { registry, config: production, allowInsecureLoopback: true });
    expect((await registry.fetch(origin))?.verified).toBe(true);
    served = 'not a manifest';
    await expect(verifyApp(origin, { registry, config: production, allowInsecureLoopback: true })).rejects.toBeInstanceOf(VerificationError);
    expect((await registry.fetch(origin))?.verified).toBe(false);
  });

  it('refuses redirects, oversized bodies, error statuses and unreachable apps, each in one line', async () => {
    const opts = { registry, config: production, allowInsecureLoopback: true };
    served = 'REDIRECT';
    await expect(verifyApp(origin, opts)).rejects.toThrow(/redirect/);
    served = 'HUGE';
    await expect(verifyApp(origin, opts)).rejects.toThrow(/larger than 64 KiB/);
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const gone = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refusal = verifyApp(gone, opts);
    await expect(refusal).rejects.toBeInstanceOf(VerificationError);
    await expect(refusal).rejects.toThrow(/^could not fetch http:\/\/127\.0\.0\.1:\d+\/\.well-known\/service\.jwt: [^\n]+$/);
    expect(await registry.fetch(gone)).toBeNull();
  });

  it('refuses a staging manifest on a production service, and marks the known app unverified', async () => {
    served = await manifestFor(origin);
    await verifyApp(origin, { registry, config: production, allowInsecureLoopback: true });
    await registry.update(origin, { pushMuted: true });
    served = await manifestFor(origin, { staging: true });
    await expect(verifyApp(origin, { registry, config: production, allowInsecureLoopback: true })).rejects.toThrow(
      /^the manifest is for staging but this service is production$/,
    );
    expect(await registry.fetch(origin)).toMatchObject({ verified: false, pushMuted: true, environment: 'production' });
  });

  it('refuses plain HTTP to a non-loopback host and non-canonical origins', async () => {
    await expect(verifyApp('http://game.example', { registry, config: production, allowInsecureLoopback: true })).rejects.toThrow(/canonical/);
    await expect(verifyApp('https://game.example/', { registry, config: production })).rejects.toThrow(/canonical/);
  });
});
