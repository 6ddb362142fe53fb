import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/harness.js';
import { PushWorld } from './support/env.js';
import { Wallet } from './support/wallet.js';

/** The wallet-signed host endpoints: signatures, freshness, replays, shapes and their effects in Redis. */
let world: PushWorld;
let app: TestApp;

beforeAll(async () => {
  world = await PushWorld.start();
  app = await world.harness.registerApp();
});
afterAll(async () => {
  await world?.stop();
});

const unauthenticated = { status: 401, body: { error: 'unauthenticated' } };
const invalid = { status: 400, body: { error: 'invalid_request' } };

async function raw(path: string, body: string, signature?: string, contentType = 'application/json') {
  const headers: Record<string, string> = { 'content-type': contentType };
  if (signature !== undefined) headers['x-wallet-signature'] = signature;
  const { status, body: parsed } = await world.harness.post(path, body, headers);
  return { status, body: parsed };
}

describe('wallet-signed host requests', () => {
  it('subscriptions: 204, stored per wallet; the wallet becomes known', async () => {
    const wallet = new Wallet();
    const subscription = world.service.subscribe();
    const reply = await world.host('/api/host/subscriptions', wallet, { subscription: subscription.json() });
    expect(reply.status).toBe(204);
    const stored = await world.harness.redis.hget(world.keys.walletSubscriptions(wallet.address), subscription.endpoint);
    expect(JSON.parse(stored!)).toEqual({ endpoint: subscription.endpoint, keys: subscription.keys });
    expect(await world.harness.redis.exists(world.keys.walletKnown(wallet.address))).toBe(1);
  });

  it('401 for a missing or bad signature, a body changed after signing, another wallet, another aud, a stale or future signedAt, a replayed nonce', async () => {
    const wallet = new Wallet();
    const members = { origin: app.origin };
    const signed = wallet.sign(members);
    expect(await raw('/api/host/visits', signed.body)).toEqual(unauthenticated);
    expect(await raw('/api/host/visits', signed.body, 'not-base58-0OIl')).toEqual(unauthenticated);
    expect(await raw('/api/host/visits', signed.body, new Wallet().signBytes(signed.body))).toEqual(unauthenticated);
    expect(await raw('/api/host/visits', `${signed.body} `, signed.signature)).toEqual(unauthenticated);
    const impostor = wallet.sign(members, { wallet: new Wallet().address });
    expect(await raw('/api/host/visits', impostor.body, impostor.signature)).toEqual(unauthenticated);
    expect(await world.host('/api/host/visits', wallet, members, { aud: 'service-api' })).toEqual(unauthenticated);
    expect(await world.host('/api/host/visits', wallet, members, { signedAt: Date.now() - 61_000 })).toEqual(unauthenticated);
    expect(await world.host('/api/host/visits', wallet, members, { signedAt: Date.now() + 61_000 })).toEqual(unauthenticated);
    expect((await world.host('/api/host/visits', wallet, members, { signedAt: Date.now() - 55_000 })).status).toBe(204);
    expect((await world.host('/api/host/visits', wallet, members, { signedAt: Date.now() + 55_000 })).status).toBe(204);
    // Replays: the exact request again, or the same nonce in a new request.
    expect((await raw('/api/host/visits', signed.body, signed.signature)).status).toBe(204);
    expect(await raw('/api/host/visits', signed.body, signed.signature)).toEqual(unauthenticated);
    const nonce = 'replayed-nonce-0123456789';
    expect((await world.host('/api/host/visits', wallet, members, { nonce })).status).toBe(204);
    expect(await world.host('/api/host/visits', wallet, members, { nonce })).toEqual(unauthenticated);
    // Nonces are per wallet.
    expect((await world.host('/api/host/visits', new Wallet(), members, { nonce })).status).toBe(204);
    // Nothing was stored by the refused requests of a wallet that never succeeded.
    const refusedOnly = new Wallet();
    await world.host('/api/host/visits', refusedOnly, members, { signedAt: 0 });
    expect(await world.harness.redis.exists(world.keys.walletKnown(refusedOnly.address))).toBe(0);
  });

  it('400 invalid_request for a malformed body, before the signature is looked at', async () => {
    const wallet = new Wallet();
    const sign = (body: string) => wallet.signBytes(body);
    for (const body of ['', 'nope', '[]', '{}', '"x"']) expect(await raw('/api/host/visits', body, sign(body)), body).toEqual(invalid);
    const base = { wallet: wallet.address, signedAt: Date.now(), nonce: 'abcdefghijklmnop', aud: 'service-host', origin: app.origin };
    for (const change of [
      { wallet: 'not-a-wallet' },
      { signedAt: String(Date.now()) },
      { signedAt: 1.5 },
      { nonce: 'short' },
      { nonce: 'has spaces in the nonce' },
      { nonce: 'x'.repeat(65) },
      { aud: 1 },
      { extra: true },
      { origin: 'https://UPPER.example' },
      { origin: `${app.origin}/path` },
    ]) {
      const body = JSON.stringify({ ...base, ...change });
      expect(await raw('/api/host/visits', body, sign(body)), JSON.stringify(change)).toEqual(invalid);
      expect(await raw('/api/host/visits', body), 'unsigned too').toEqual(invalid);
    }
    const missing = JSON.stringify({ ...base, nonce: undefined });
    expect(await raw('/api/host/visits', missing, sign(missing))).toEqual(invalid);
    const body = JSON.stringify(base);
    expect(await raw('/api/host/visits', body, sign(body), 'text/plain')).toEqual(invalid);
    expect(await world.host('/api/host/mutes', wallet, { origin: app.origin, muted: 'yes' })).toEqual(invalid);
    expect(await world.host('/api/host/subscriptions/remove', wallet, { endpoint: 5 })).toEqual(invalid);
  });

  it('subscriptions: only https endpoints on PUSH_ENDPOINT_HOSTS, real P-256 keys and a 16-byte auth secret', async () => {
    const wallet = new Wallet();
    const good = world.service.subscribe().json();
    const port = world.service.port;
    const refusedEndpoints = [
      `http://127.0.0.1:${port}/push/x`,
      `https://127.0.0.1:${port + 1}/push/x`,
      'https://127.0.0.1/push/x',
      'https://fcm.googleapis.com/fcm/send/x',
      `https://user:pw@127.0.0.1:${port}/push/x`,
      `https://localhost:${port}/push/x`,
      `https://127.0.0.1:${port}/push/x#frag`,
      'not a url',
      `https://127.0.0.1:${port}/${'x'.repeat(2048)}`,
    ];
    for (const endpoint of refusedEndpoints) {
      expect(await world.host('/api/host/subscriptions', wallet, { subscription: { ...good, endpoint } }), endpoint).toEqual(invalid);
    }
    const offCurve = Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]).toString('base64url');
    for (const keys of [
      { p256dh: offCurve, auth: good.keys.auth },
      { p256dh: good.keys.p256dh.slice(0, 40), auth: good.keys.auth },
      { p256dh: good.keys.p256dh, auth: Buffer.alloc(15).toString('base64url') },
      { p256dh: good.keys.p256dh, auth: 'not base64!' },
      { p256dh: good.keys.p256dh },
      { p256dh: good.keys.p256dh, auth: good.keys.auth, extra: 'x' },
    ]) {
      expect(await world.host('/api/host/subscriptions', wallet, { subscription: { ...good, keys } }), JSON.stringify(keys)).toEqual(invalid);
    }
    expect(await world.host('/api/host/subscriptions', wallet, { subscription: { ...good, unknown: 1 } })).toEqual(invalid);
    expect(await world.host('/api/host/subscriptions', wallet, { subscription: 'x' })).toEqual(invalid);
    expect(await world.harness.redis.exists(world.keys.walletSubscriptions(wallet.address))).toBe(0);
    // Padded base64url and a numeric expirationTime are accepted (and stored unpadded).
    const padded = { ...good, expirationTime: 1_900_000_000_000, keys: { p256dh: `${good.keys.p256dh}=`, auth: `${good.keys.auth}==` } };
    expect((await world.host('/api/host/subscriptions', wallet, { subscription: padded })).status).toBe(204);
    const stored = JSON.parse((await world.harness.redis.hget(world.keys.walletSubscriptions(wallet.address), good.endpoint))!);
    expect(stored.keys).toEqual(good.keys);
  });

  it('one subscription per endpoint: registering it again replaces it, also from another wallet; removal', async () => {
    const alice = new Wallet();
    const bob = new Wallet();
    const browser = world.service.subscribe();
    const renewed = world.service.subscribe();
    const sameEndpointNewKeys = { ...renewed.json(), endpoint: browser.endpoint };
    expect((await world.host('/api/host/subscriptions', alice, { subscription: browser.json() })).status).toBe(204);
    expect((await world.host('/api/host/subscriptions', alice, { subscription: sameEndpointNewKeys })).status).toBe(204);
    const aliceSubs = await world.harness.redis.hgetall(world.keys.walletSubscriptions(alice.address));
    expect(Object.keys(aliceSubs)).toEqual([browser.endpoint]);
    expect(JSON.parse(aliceSubs[browser.endpoint]!).keys).toEqual(renewed.keys);

    expect((await world.host('/api/host/subscriptions', bob, { subscription: browser.json() })).status).toBe(204);
    expect(await world.harness.redis.hlen(world.keys.walletSubscriptions(alice.address))).toBe(0);
    expect(await world.harness.redis.hlen(world.keys.walletSubscriptions(bob.address))).toBe(1);
    expect(await world.harness.redis.get(world.keys.endpointOwner(browser.endpoint))).toBe(bob.address);

    // Alice removing an endpoint she no longer has changes nothing for Bob.
    expect((await world.host('/api/host/subscriptions/remove', alice, { endpoint: browser.endpoint })).status).toBe(204);
    expect(await world.harness.redis.hlen(world.keys.walletSubscriptions(bob.address))).toBe(1);
    expect((await world.host('/api/host/subscriptions/remove', bob, { endpoint: browser.endpoint })).status).toBe(204);
    expect(await world.harness.redis.hlen(world.keys.walletSubscriptions(bob.address))).toBe(0);
    expect(await world.harness.redis.exists(world.keys.endpointOwner(browser.endpoint))).toBe(0);
    expect((await world.host('/api/host/subscriptions/remove', bob, { endpoint: 'https://never.example/x' })).status).toBe(204);
  });

  it('a wallet keeps at most 20 subscriptions; the oldest is dropped', async () => {
    const wallet = new Wallet();
    const subs = Array.from({ length: 21 }, () => world.service.subscribe());
    for (const s of subs) expect((await world.host('/api/host/subscriptions', wallet, { subscription: s.json() })).status).toBe(204);
    const endpoints = Object.keys(await world.harness.redis.hgetall(world.keys.walletSubscriptions(wallet.address)));
    expect(endpoints).toHaveLength(20);
    expect(endpoints).not.toContain(subs[0]!.endpoint);
    expect(await world.harness.redis.exists(world.keys.endpointOwner(subs[0]!.endpoint))).toBe(0);
  });

  it('visits and mutes: 404 unknown_app for an origin that is not a registered app; effects in the app scope', async () => {
    const wallet = new Wallet();
    const nobody = { origin: 'https://nobody.example' };
    expect(await world.host('/api/host/visits', wallet, nobody)).toEqual({ status: 404, body: { error: 'unknown_app' } });
    expect(await world.host('/api/host/mutes', wallet, { ...nobody, muted: true })).toEqual({ status: 404, body: { error: 'unknown_app' } });
    expect((await world.host('/api/host/visits', wallet, { origin: app.origin })).status).toBe(204);
    expect(await world.harness.redis.zscore(world.keys.pushVisitors(app.appId), wallet.address)).not.toBeNull();
    expect((await world.host('/api/host/mutes', wallet, { origin: app.origin, muted: true })).status).toBe(204);
    expect(await world.harness.redis.sismember(world.keys.pushMutes(app.appId), wallet.address)).toBe(1);
    expect((await world.host('/api/host/mutes', wallet, { origin: app.origin, muted: false })).status).toBe(204);
    expect(await world.harness.redis.sismember(world.keys.pushMutes(app.appId), wallet.address)).toBe(0);
  });

  it('GET /api/host/vapid-public-key gives the applicationServerKey for pushManager.subscribe', async () => {
    const response = await fetch(`${world.harness.url}/api/host/vapid-public-key`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ publicKey: world.vapid.publicKey });
  });
});
