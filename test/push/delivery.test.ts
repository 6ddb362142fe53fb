import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signLegacyPushToken } from '../../src/client/push.js';
import { shortHash } from '../../src/push/store.js';
import type { TestApp } from '../helpers/harness.js';
import { verifyVapid, type BrowserSubscription } from './support/push-service.js';
import { PushWorld, VAPID_SUBJECT, waitFor } from './support/env.js';

/**
 * End to end: host registration → API → BullMQ → worker child process → web-push over HTTPS →
 * the loopback push service; each message decrypted with the subscription's own keys.
 */
let world: PushWorld;
let app: TestApp;

beforeAll(async () => {
  world = await PushWorld.start();
  app = await world.harness.registerApp({ name: 'Chess Club' });
  await world.startWorker();
});

afterAll(async () => {
  await world?.stop();
});

const readAll = (subscription: BrowserSubscription) => world.readAll(subscription);
const delivered = (subscription: BrowserSubscription, count: number) => world.delivered(subscription, count);

describe('delivery through the worker', () => {
  it('JSON mode: the encrypted payload carries "<app name>: <title>", body, URL and id; VAPID signs for the push service', async () => {
    const { wallet, subscription } = await world.user(app);
    const reply = await world.send(app, { to: wallet.address, title: '  Your move  ', body: ' Alice played e4 ', path: '/games/42?tab=moves' });
    expect(reply.status).toBe(202);
    expect(Object.keys(reply.body)).toEqual(['id']);
    const [message] = await delivered(subscription, 1);
    expect(message).toEqual({
      id: reply.body.id,
      title: 'Chess Club: Your move',
      body: 'Alice played e4',
      url: `${app.origin}/games/42?tab=moves`,
      origin: app.origin,
    });
    const raw = world.service.messagesFor(subscription.token)[0]!;
    expect(raw.headers['content-encoding']).toBe('aes128gcm');
    expect(raw.headers['ttl']).toBe('86400');
    const claims = await verifyVapid(raw, world.vapid.publicKey, world.service.url, VAPID_SUBJECT);
    expect(claims['aud']).toBe(world.service.url);
  });

  it('legacy mode: a signed-body token delivers the same way; path defaults to /', async () => {
    const legacyApp = await world.harness.registerApp({ name: 'Old Game' });
    const { wallet, subscription } = await world.user(legacyApp);
    const token = await signLegacyPushToken(legacyApp.secretKey, legacyApp.origin, { to: wallet.address, title: 'Hi', body: 'There' });
    const reply = await world.sendLegacy(token);
    expect(reply.status).toBe(202);
    const [message] = await delivered(subscription, 1);
    expect(message).toMatchObject({ id: reply.body.id, title: 'Old Game: Hi', body: 'There', url: `${legacyApp.origin}/` });
  });

  it('every subscription of a wallet receives the notification once', async () => {
    const { wallet, subscription } = await world.user(app);
    const second = world.service.subscribe();
    expect((await world.host('/api/host/subscriptions', wallet, { subscription: second.json() })).status).toBe(204);
    const reply = await world.send(app, { to: wallet.address, title: 't', body: 'b' });
    expect(reply.status).toBe(202);
    await delivered(subscription, 1);
    await delivered(second, 1);
  });

  it('a muted user and a user without subscriptions are accepted (202) and receive nothing', async () => {
    const muted = await world.user(app);
    expect((await world.host('/api/host/mutes', muted.wallet, { origin: app.origin, muted: true })).status).toBe(204);
    const bare = await world.user(app, { subscribe: false });
    const toMuted = await world.send(app, { to: muted.wallet.address, title: 't', body: 'b' });
    const toBare = await world.send(app, { to: bare.wallet.address, title: 't', body: 'b' });
    expect([toMuted.status, toBare.status]).toEqual([202, 202]);
    expect(await world.finished(toMuted.body.id)).toBe('completed');
    expect(await world.finished(toBare.body.id)).toBe('completed');
    expect(world.service.messagesFor(muted.subscription.token)).toHaveLength(0);
    expect(world.service.messagesFor(bare.subscription.token)).toHaveLength(0);
    // Unmuting brings notifications back.
    expect((await world.host('/api/host/mutes', muted.wallet, { origin: app.origin, muted: false })).status).toBe(204);
    expect((await world.send(app, { to: muted.wallet.address, title: 'back', body: 'b' })).status).toBe(202);
    expect((await delivered(muted.subscription, 1))[0]).toMatchObject({ title: 'Chess Club: back' });
  });

  it('410 from the push service deletes the subscription; it is never contacted again', async () => {
    const { wallet, subscription } = await world.user(app);
    const alive = world.service.subscribe();
    expect((await world.host('/api/host/subscriptions', wallet, { subscription: alive.json() })).status).toBe(204);
    world.service.answerAlways(subscription.token, 410);
    const subsKey = world.keys.walletSubscriptions(wallet.address);
    expect(await world.harness.redis.hexists(subsKey, subscription.endpoint)).toBe(1);
    expect((await world.send(app, { to: wallet.address, title: 'one', body: 'b' })).status).toBe(202);
    await delivered(alive, 1);
    await waitFor('the gone subscription to be deleted', async () => (await world.harness.redis.hexists(subsKey, subscription.endpoint)) === 0);
    expect(await world.harness.redis.exists(world.keys.endpointOwner(subscription.endpoint))).toBe(0);
    const receivedBefore = world.service.received;
    const second = await world.send(app, { to: wallet.address, title: 'two', body: 'b' });
    expect(second.status).toBe(202);
    expect(await world.finished(second.body.id)).toBe('completed');
    await delivered(alive, 2);
    expect(world.service.received).toBe(receivedBefore + 1);
  });

  it('500 then success: retried with backoff, delivered exactly once; 429 likewise; the healthy subscription is not sent twice', async () => {
    const { wallet, subscription } = await world.user(app);
    const healthy = world.service.subscribe();
    expect((await world.host('/api/host/subscriptions', wallet, { subscription: healthy.json() })).status).toBe(204);
    world.service.script(subscription.token, 500, 429);
    const receivedBefore = world.service.received;
    const reply = await world.send(app, { to: wallet.address, title: 'retry', body: 'b' });
    expect(reply.status).toBe(202);
    const [message] = await delivered(subscription, 1);
    expect(message).toMatchObject({ id: reply.body.id, title: 'Chess Club: retry' });
    expect(await world.finished(reply.body.id)).toBe('completed');
    expect(world.service.messagesFor(subscription.token)).toHaveLength(1);
    expect(world.service.messagesFor(healthy.token)).toHaveLength(1);
    // 500, 429, 201 for the flaky one; 201 once for the healthy one.
    expect(world.service.received - receivedBefore).toBe(3 + 1);
  });

  it('a push service that keeps failing gets a bounded number of attempts (5)', async () => {
    const { wallet, subscription } = await world.user(app);
    world.service.answerAlways(subscription.token, 503);
    const before = world.service.received;
    const reply = await world.send(app, { to: wallet.address, title: 'doomed', body: 'b' });
    expect(reply.status).toBe(202);
    // Backoff 0.5, 1, 2, 4 s (with jitter): five attempts within about 8 s, then the job fails.
    expect(await world.finished(reply.body.id, 25_000)).toBe('failed');
    expect(world.service.received - before).toBe(5);
    expect(world.service.messagesFor(subscription.token)).toHaveLength(0);
  });

  it('idempotent retries: the same Idempotency-Key answers the first id and sends nothing more', async () => {
    const { wallet, subscription } = await world.user(app);
    const content = { to: wallet.address, title: 'once', body: 'only once' };
    const first = await world.send(app, content, { idempotencyKey: 'order-17' });
    expect(first.status).toBe(202);
    const again = await world.send(app, { body: 'only once', title: 'once', to: wallet.address }, { idempotencyKey: 'order-17' });
    expect(again).toEqual({ status: 202, body: { id: first.body.id } });
    // Concurrent retries too.
    const burst = await Promise.all(Array.from({ length: 5 }, () => world.send(app, content, { idempotencyKey: 'order-18' })));
    expect(new Set(burst.map((r) => r.body.id)).size).toBe(1);
    // The same key with other content is a client bug: refused, nothing sent.
    const other = await world.send(app, { ...content, body: 'something else' }, { idempotencyKey: 'order-17' });
    expect(other).toEqual({ status: 400, body: { error: 'invalid_request' } });
    // Keys are per app.
    const otherApp = await world.harness.registerApp({ name: 'Other' });
    const { wallet: w2 } = await world.user(otherApp);
    const otherReply = await world.send(otherApp, { to: w2.address, title: 'x', body: 'y' }, { idempotencyKey: 'order-17' });
    expect(otherReply.status).toBe(202);
    expect(otherReply.body.id).not.toBe(first.body.id);
    await world.finished(first.body.id);
    await world.finished(burst[0]!.body.id);
    const messages = readAll(subscription);
    expect(messages.map((m) => m['id']).sort()).toEqual([first.body.id, burst[0]!.body.id].sort());
  });

  it('idempotent retries in legacy mode: the same token answers the first id and sends nothing more', async () => {
    const { wallet, subscription } = await world.user(app);
    const token = await signLegacyPushToken(app.secretKey, app.origin, { to: wallet.address, title: 'legacy', body: 'once' });
    const first = await world.sendLegacy(token);
    expect(first.status).toBe(202);
    for (let i = 0; i < 3; i++) expect(await world.sendLegacy(token)).toEqual({ status: 202, body: { id: first.body.id } });
    await world.finished(first.body.id);
    expect(readAll(subscription).map((m) => m['id'])).toEqual([first.body.id]);
  });

  it('the delivered set records what was sent, per notification and endpoint', async () => {
    const { wallet, subscription } = await world.user(app);
    const reply = await world.send(app, { to: wallet.address, title: 't', body: 'b' });
    await delivered(subscription, 1);
    const settled = world.keys.pushSettled(app.appId, reply.body.id);
    await waitFor('the settled set', async () => (await world.harness.redis.sismember(settled, shortHash(subscription.endpoint))) === 1);
  });

  it('GET /readyz of the worker reports its queue connection; other paths are 404', async () => {
    const worker = world.workers[0]!;
    const ready = await fetch(`${worker.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', queue: 'ready' });
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    const other = await fetch(`${worker.url}/api/push`, { method: 'POST' });
    expect(other.status).toBe(404);
    expect(await other.json()).toEqual({ error: 'not_found' });
  });
});
