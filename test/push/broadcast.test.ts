import { randomBytes } from 'node:crypto';
import bs58 from 'bs58';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PushStore } from '../../src/push/store.js';
import type { TestApp } from '../helpers/harness.js';
import { decryptMessage, type BrowserSubscription } from './support/push-service.js';
import { FAST_RECOVERY, PushWorld, waitFor } from './support/env.js';

const DAY = 86_400_000;
const T0 = 1_800_000_000_000;

/**
 * Many wallets at once: subscriptions and visits go through the same store calls the signed
 * host endpoints make (the endpoints themselves are tested in host.test.ts; verifying thousands
 * of signatures would only slow this test down).
 */
async function seedAudience(world: PushWorld, app: TestApp, count: number): Promise<Map<string, BrowserSubscription>> {
  const store = new PushStore(world.harness.redis, world.keys, true);
  const byToken = new Map<string, BrowserSubscription>();
  const wallets = Array.from({ length: count }, () => bs58.encode(randomBytes(32)));
  for (let i = 0; i < wallets.length; i += 250) {
    await Promise.all(
      wallets.slice(i, i + 250).map(async (wallet) => {
        const subscription = world.service.subscribe();
        byToken.set(subscription.token, subscription);
        await store.addSubscription(wallet, { endpoint: subscription.endpoint, keys: subscription.keys });
        await store.recordVisit(app.appId, wallet);
      }),
    );
  }
  return byToken;
}

/** Every subscription got exactly one message, and it is this notification. */
function expectExactlyOnce(world: PushWorld, byToken: Map<string, BrowserSubscription>, id: string): void {
  const counts = world.service.countsByToken();
  const wrong = [...byToken.keys()].filter((token) => counts.get(token) !== 1);
  expect(wrong.length, `subscriptions without exactly one delivery: ${wrong.length}`).toBe(0);
  for (const message of world.service.accepted) {
    const subscription = byToken.get(message.token)!;
    expect(JSON.parse(decryptMessage(message.body, subscription)).id).toBe(id);
  }
}

describe('broadcast audience', () => {
  let world: PushWorld;
  beforeAll(async () => {
    world = await PushWorld.start();
    await world.startWorker();
  });
  afterAll(async () => {
    await world?.stop();
  });

  it('reaches wallets that opened the app within the window and did not mute it; nobody else', async () => {
    const app = await world.harness.registerApp({ name: 'Arena', audienceDays: 30 });
    const elsewhere = await world.harness.registerApp({ name: 'Elsewhere' });
    await world.harness.setClock(app, T0 - 40 * DAY);
    const old = await world.user(app);
    await world.harness.setClock(app, T0 - 29 * DAY);
    const recent = await world.user(app);
    const muted = await world.user(app);
    expect((await world.host('/api/host/mutes', muted.wallet, { origin: app.origin, muted: true })).status).toBe(204);
    const subscribedOnly = await world.user(app, { visit: false });
    const otherApp = await world.user(elsewhere);
    await world.harness.setClock(app, T0 - DAY);
    const yesterday = await world.user(app);
    // A visitor from long ago who came back two days ago: the latest visit counts.
    const returning = await world.user(app, { visit: false });
    await world.harness.setClock(app, T0 - 50 * DAY);
    expect((await world.host('/api/host/visits', returning.wallet, { origin: app.origin })).status).toBe(204);
    await world.harness.setClock(app, T0 - 2 * DAY);
    expect((await world.host('/api/host/visits', returning.wallet, { origin: app.origin })).status).toBe(204);
    await world.harness.setClock(app, T0);

    const reply = await world.send(app, { title: 'Tournament', body: 'starts in 5 minutes', path: '/t/9' }, { broadcast: true });
    expect(reply.status).toBe(202);
    expect(Object.keys(reply.body)).toEqual(['id']);
    expect(await world.finished(reply.body.id)).toBe('completed');
    await world.finished(`${reply.body.id}.0`);
    const got = (u: { subscription: BrowserSubscription }) => world.service.messagesFor(u.subscription.token).length;
    expect([recent, yesterday, returning].map(got)).toEqual([1, 1, 1]);
    expect([old, muted, subscribedOnly, otherApp].map(got)).toEqual([0, 0, 0, 0]);
    const message = JSON.parse(decryptMessage(world.service.messagesFor(recent.subscription.token)[0]!.body, recent.subscription));
    expect(message).toEqual({ id: reply.body.id, title: 'Arena: Tournament', body: 'starts in 5 minutes', url: `${app.origin}/t/9`, origin: app.origin });
  });

  it('an empty audience is accepted and sends nothing', async () => {
    const app = await world.harness.registerApp({ audienceDays: 7 });
    const reply = await world.send(app, { title: 'anyone?', body: 'no' }, { broadcast: true });
    expect(reply.status).toBe(202);
    expect(await world.finished(reply.body.id)).toBe('completed');
  });
});

describe('broadcast to several thousand wallets', () => {
  let world: PushWorld;
  beforeAll(async () => {
    world = await PushWorld.start();
  });
  afterAll(async () => {
    await world?.stop();
  });

  it('delivers exactly once to each of 2500 wallets; the API enqueues one job, the worker fans it out in chunks', async () => {
    const app = await world.harness.registerApp({ name: 'Big', audienceDays: 30 });
    const byToken = await seedAudience(world, app, 2500);
    const reply = await world.send(app, { title: 'Season 2', body: 'is live' }, { broadcast: true });
    expect(reply.status).toBe(202);
    // Before any worker runs: one job, whatever the audience.
    expect(await world.queue.getJobCounts('wait', 'prioritized', 'delayed')).toEqual({ wait: 1, prioritized: 0, delayed: 0 });
    const job = await world.queue.getJob(reply.body.id);
    expect(job!.data).toMatchObject({ kind: 'broadcast', days: 30 });
    expect(JSON.stringify(job!.data).length).toBeLessThan(600);

    await world.startWorker({ ...FAST_RECOVERY, chunkSize: 250 });
    await waitFor('2500 deliveries', () => world.service.accepted.length >= 2500, 40_000);
    for (let k = 0; k < 10; k++) expect(await world.finished(`${reply.body.id}.${k}`)).toBe('completed');
    expect(await world.queue.getJob(`${reply.body.id}.10`)).toBeUndefined();
    expectExactlyOnce(world, byToken, reply.body.id);
    expect(world.service.accepted).toHaveLength(2500);
    // Once every chunk finished, the snapshot and the delivered set only wait out a short grace.
    const ttl = await world.harness.redis.ttl(world.keys.pushAudience(app.appId, reply.body.id));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(300);
  }, 60_000);
});

describe('a worker crash in the middle of a broadcast', () => {
  let world: PushWorld;
  beforeAll(async () => {
    world = await PushWorld.start();
  });
  afterAll(async () => {
    await world?.stop();
  });

  it('loses and duplicates nothing: sends in flight when it died were never acknowledged and are sent again by the next worker', async () => {
    const app = await world.harness.registerApp({ name: 'Crash', audienceDays: 30 });
    const byToken = await seedAudience(world, app, 2000);
    // The push service acknowledges 700 messages, then stops answering.
    world.service.holdAfter(700);
    const first = await world.startWorker({ ...FAST_RECOVERY, chunkSize: 100 });
    const reply = await world.send(app, { title: 'Crash test', body: 'exactly once' }, { broadcast: true });
    expect(reply.status).toBe(202);
    const settled = world.keys.pushSettled(app.appId, reply.body.id);
    // Kill when sends are in flight and every acknowledged message has been recorded.
    await waitFor('held sends and a recorded delivered set', async () => {
      if (world.service.heldCount === 0) return false;
      return (await world.harness.redis.scard(settled)) === world.service.accepted.length;
    });
    const inFlight = world.service.heldCount;
    await first.kill();
    world.service.dropHeld();
    expect(inFlight).toBeGreaterThan(0);
    expect(world.service.accepted).toHaveLength(700);

    await world.startWorker({ ...FAST_RECOVERY, chunkSize: 100 });
    await waitFor('2000 deliveries', () => world.service.accepted.length >= 2000, 40_000);
    for (let k = 0; k < 20; k++) expect(await world.finished(`${reply.body.id}.${k}`)).toBe('completed');
    expectExactlyOnce(world, byToken, reply.body.id);
    expect(world.service.accepted).toHaveLength(2000);
  }, 60_000);
});
