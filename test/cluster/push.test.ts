import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { masters } from '../../src/redis/connection.js';
import { scanKeys } from '../helpers/harness.js';
import type { BrowserSubscription } from '../push/support/push-service.js';
import { PushWorld } from '../push/support/env.js';

/**
 * Notifications on the `cluster` project's Redis Cluster: the API enqueues into BullMQ, a worker
 * child process (REDIS_CLUSTER_NODES in its environment) delivers to the loopback push service.
 * Every push script runs with its KEYS in one slot (a wallet's `{w:…}` tag or the app's tag):
 * Redis Cluster refuses a script whose declared keys cross slots (CROSSSLOT) or that touches a
 * key another master serves; and every key written carries a hash tag.
 */
let world: PushWorld;

beforeAll(async () => {
  world = await PushWorld.start();
  expect(world.harness.config.redisClusterNodes).not.toBeNull();
  await world.startWorker();
});
afterAll(async () => {
  await world?.stop();
});

const readAll = (subscription: BrowserSubscription) => world.readAll(subscription);
const delivered = (subscription: BrowserSubscription, count: number) => world.delivered(subscription, count);

describe('notifications through a Redis Cluster', () => {
  it('a one-user notification and a broadcast are delivered, subscriptions move and go; the queue lives in one slot', async () => {
    const app = await world.harness.registerApp({ name: 'Cluster Club', audienceDays: 30 });
    const one = await world.user(app);
    const two = await world.user(app);

    const direct = await world.send(app, { to: one.wallet.address, title: 'Your move', body: 'e4' });
    expect(direct.status).toBe(202);
    expect((await delivered(one.subscription, 1))[0]).toMatchObject({ id: direct.body.id, title: 'Cluster Club: Your move', body: 'e4' });

    const broadcast = await world.send(app, { title: 'Tournament', body: 'starts now' }, { broadcast: true });
    expect(broadcast.status).toBe(202);
    expect(await world.finished(broadcast.body.id)).toBe('completed');
    expect((await delivered(one.subscription, 2))[1]).toMatchObject({ id: broadcast.body.id, title: 'Cluster Club: Tournament' });
    expect((await delivered(two.subscription, 1))[0]).toMatchObject({ id: broadcast.body.id });

    // An endpoint registered again by another wallet moves to it, and is then removed: the
    // subscription scripts of two wallets (two slots, each script within one) and the owner key.
    const third = await world.user(app, { subscribe: false });
    expect((await world.host('/api/host/subscriptions', third.wallet, { subscription: two.subscription.json() })).status).toBe(204);
    expect(await world.harness.redis.hexists(world.keys.walletSubscriptions(two.wallet.address), two.subscription.endpoint)).toBe(0);
    expect(await world.harness.redis.get(world.keys.endpointOwner(two.subscription.endpoint))).toBe(third.wallet.address);
    expect((await world.host('/api/host/subscriptions/remove', third.wallet, { endpoint: two.subscription.endpoint })).status).toBe(204);
    expect(await world.harness.redis.exists(world.keys.endpointOwner(two.subscription.endpoint))).toBe(0);

    // BullMQ's keys share the prefix's `{bull}` tag: one slot, so one master holds all of them.
    const redis = world.harness.redis;
    const queueKeys = await scanKeys(redis, `${world.keys.bullPrefix().replace(/[{}]/g, (c) => `\\${c}`)}:*`);
    expect(queueKeys.length).toBeGreaterThan(0);
    const slots = new Set(await Promise.all(queueKeys.map(async (key) => Number(await redis.call('CLUSTER', 'KEYSLOT', key)))));
    expect(slots.size).toBe(1);
    const holders = [];
    for (const node of masters(redis)) {
      if ((await node.call('CLUSTER', 'COUNTKEYSINSLOT', [...slots][0]!)) !== 0) holders.push(node);
    }
    expect(holders).toHaveLength(1);

    // Every key the API and the worker wrote carries a hash tag: the app's, a wallet's, an
    // endpoint's or the queue's; only the apps index (one key of its own) has none.
    const prefix = world.keys.prefix;
    const untagged = (await scanKeys(redis, `${prefix}:*`)).filter((key) => !/\{(w:|e:)?[A-Za-z0-9_-]+\}|\{bull\}/.test(key));
    expect(untagged).toEqual([world.keys.appsIndex()]);
  });
});
