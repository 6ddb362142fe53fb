import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueManifest, ManifestError, verifyKeyProof, verifyManifest } from '../../src/apps/manifest.js';
import { AppRegistry } from '../../src/apps/registry.js';
import { registerManifest, verifyApp, VerificationError } from '../../src/apps/verification.js';
import { Keys } from '../../src/redis/keys.js';
import { generateKeyPair, parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { createKeyProof } from '../../src/shared/tokens.js';
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

  it('refuses a proof by another key, for another origin, expired, too long-lived or of the wrong typ', async () => {
    const other = generateKeyPair();
    const sign = (claims: Record<string, unknown>, typ = 'service-app-key-proof+jwt') =>
      new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ }).sign(privateKeyObject(parseSecretKey(app.secretKey)!));
    const base = { iss: ORIGIN, aud: 'service-app-key-proof', iat: now(), exp: now() + 60 };
    const cases: Array<[string, string]> = [
      ['another key', await createKeyProof(other.secretKey, ORIGIN)],
      ['another origin', await createKeyProof(app.secretKey, 'https://other.example')],
      ['expired', await sign({ ...base, iat: now() - 400, exp: now() - 100 })],
      ['lifetime over 300 s', await sign({ ...base, exp: now() + 400 })],
      ['wrong typ', await sign(base, 'JWT')],
      ['wrong aud', await sign({ ...base, aud: 'service-api' })],
    ];
    for (const [name, proof] of cases) {
      await expect(verifyKeyProof(proof, app.publicKey, ORIGIN), name).rejects.toBeInstanceOf(ManifestError);
    }
  });

  it('issueManifest refuses to sign without a valid proof', async () => {
    await expect(
      issueManifest({ signingKey: service.secretKey, origin: ORIGIN, name: 'Game', appKey: app.publicKey, proof: await createKeyProof(generateKeyPair().secretKey, ORIGIN) }),
    ).rejects.toThrow(/key proof/);
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
      ['other environment', await manifestFor(ORIGIN, { staging: true }), /for staging but this service is production/],
      ['garbage', 'hello', /not a compact JWS/],
    ];
    for (const [name, jws, reason] of cases) {
      await expect(verifyManifest(jws, production), name).rejects.toThrow(reason);
    }
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
      if (req.url === '/.well-known/service.jwt') res.end(served);
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

  it('refuses plain HTTP to a non-loopback host and non-canonical origins', async () => {
    await expect(verifyApp('http://game.example', { registry, config: production, allowInsecureLoopback: true })).rejects.toThrow(/canonical/);
    await expect(verifyApp('https://game.example/', { registry, config: production })).rejects.toThrow(/canonical/);
  });
});
