import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/harness.js';
import { PushWorld } from '../push/support/env.js';
import type { SpawnedWorker } from '../push/support/processes.js';
import { fetchMetrics, parseScrape, valueOf } from './prometheus.js';
import { newNotificationId } from '../../src/push/queue.js';
import { shortHash, type IdempotencyRecord } from '../../src/push/store.js';
import { canonicalJson } from '../../src/shared/json.js';

/**
 * Notification metrics: the API's accepted count (in-process API) and the worker's delivered,
 * dropped and failed messages, failed attempts, job latencies and queue depth, scraped from
 * the worker child process's own /metrics (a fresh process: its counts are exact) after
 * deliveries to the loopback push service.
 */
let world: PushWorld;
let app: TestApp;
let worker: SpawnedWorker;

beforeAll(async () => {
  world = await PushWorld.start();
  app = await world.harness.registerApp({ name: 'Metrics Game', audienceDays: 30 });
  worker = await world.startWorker();
});
afterAll(async () => {
  await world?.stop();
});

async function scrape(url: string) {
  const res = await fetchMetrics(url);
  expect(res.status).toBe(200);
  return parseScrape(res.text);
}

describe('notification metrics', () => {
  it('count accepted, delivered, dropped (gone, refused) and failed messages, failed attempts and job latencies exactly', async () => {
    const healthy = await world.user(app);
    const gone = await world.user(app);
    const flaky = await world.user(app);
    const refusing = await world.user(app);
    world.service.answerAlways(gone.subscription.token, 410);
    world.service.script(flaky.subscription.token, 500);
    world.service.answerAlways(refusing.subscription.token, 400);

    const ids: string[] = [];
    for (const user of [healthy, gone, flaky, refusing]) {
      const reply = await world.send(app, { to: user.wallet.address, title: 't', body: 'b' });
      expect(reply.status).toBe(202);
      ids.push(reply.body.id);
    }
    for (const id of ids) expect(await world.finished(id)).toBe('completed');

    // The gone subscription was deleted: the broadcast reaches the other three wallets' subscriptions.
    const broadcast = await world.send(app, { title: 'all', body: 'b' }, { broadcast: true });
    expect(broadcast.status).toBe(202);
    expect(await world.finished(broadcast.body.id)).toBe('completed');
    expect(await world.finished(`${broadcast.body.id}.0`)).toBe('completed');

    const api = await scrape(world.harness.url);
    expect(api.types.get('versus_push_notifications_accepted_total')).toBe('counter');
    expect(valueOf(api, 'versus_push_notifications_accepted_total', { app: app.origin, kind: 'user' })).toBe(4);
    expect(valueOf(api, 'versus_push_notifications_accepted_total', { app: app.origin, kind: 'broadcast' })).toBe(1);

    const w = await scrape(worker.url);
    const a = { app: app.origin };
    // healthy and flaky (after its retry), once by notifyUser and once by the broadcast.
    expect(valueOf(w, 'versus_push_messages_delivered_total', a)).toBe(4);
    expect(valueOf(w, 'versus_push_messages_dropped_total', { ...a, reason: 'gone' })).toBe(1);
    expect(valueOf(w, 'versus_push_messages_dropped_total', { ...a, reason: 'refused' })).toBe(2);
    expect(valueOf(w, 'versus_push_messages_dropped_total', { ...a, reason: 'endpoint_not_allowed' })).toBeUndefined();
    expect(valueOf(w, 'versus_push_messages_failed_total', a)).toBe(1);
    expect(valueOf(w, 'versus_push_jobs_failed_total', { kind: 'user', final: 'false' })).toBe(1);
    expect(valueOf(w, 'versus_push_jobs_failed_total', { kind: 'user', final: 'true' })).toBeUndefined();
    expect(w.types.get('versus_push_job_latency_seconds')).toBe('histogram');
    expect(valueOf(w, 'versus_push_job_latency_seconds_count', { kind: 'user' })).toBe(4);
    expect(valueOf(w, 'versus_push_job_latency_seconds_count', { kind: 'broadcast' })).toBe(1);
    expect(valueOf(w, 'versus_push_job_latency_seconds_count', { kind: 'chunk' })).toBe(1);
    // The flaky job waited at least its 0.5 s backoff (±20% jitter) before it completed.
    expect(valueOf(w, 'versus_push_job_latency_seconds_bucket', { kind: 'user', le: '0.25' })).toBeLessThanOrEqual(3);
    // The worker accepts nothing; the API delivers nothing.
    expect(valueOf(w, 'versus_push_notifications_accepted_total', { app: app.origin, kind: 'user' })).toBeUndefined();
    expect(valueOf(api, 'versus_push_messages_delivered_total', a)).toBeUndefined();
    // Everything finished: the queue is empty, as both faces read it.
    for (const s of [api, w]) {
      for (const state of ['waiting', 'prioritized', 'active', 'delayed']) expect(valueOf(s, 'versus_push_queue_jobs', { state }), state).toBe(0);
      expect(valueOf(s, 'versus_stats_up')).toBe(1);
    }
  });

  it('count an idempotent notification once: concurrent twins, and retries that re-add the job of a reserved record', async () => {
    const accepted = async () => valueOf(await scrape(world.harness.url), 'versus_push_notifications_accepted_total', { app: app.origin, kind: 'user' }) ?? 0;
    const { wallet, subscription } = await world.user(app);
    const before = await accepted();

    const content = { to: wallet.address, title: 'twins', body: 'b' };
    const twins = await Promise.all(Array.from({ length: 4 }, () => world.send(app, content, { idempotencyKey: 'twins-1' })));
    expect(twins.map((r) => r.status)).toEqual([202, 202, 202, 202]);
    expect(new Set(twins.map((r) => r.body.id)).size).toBe(1);
    expect(await accepted()).toBe(before + 1);

    // A request that reserved its key and stopped before enqueueing: its retries enqueue the
    // job, and the one that turns the record to queued counts it.
    const stopped = { to: wallet.address, title: 'stopped', body: 'b' };
    const id = newNotificationId();
    const payload = JSON.stringify({ id, title: "Metrics Game: stopped", body: 'b', url: app.origin, origin: app.origin });
    const record: IdempotencyRecord = {
      id,
      fp: shortHash(`user\n${canonicalJson(stopped)}`),
      state: 'reserved',
      job: { kind: 'user', id, appId: app.appId, origin: app.origin, payload, wallet: wallet.address },
    };
    await world.harness.redis.set(world.keys.pushIdempotency(app.appId, shortHash('key:stopped-1')), JSON.stringify(record), 'EX', 3600);
    const retries = await Promise.all([0, 1, 2].map(() => world.send(app, stopped, { idempotencyKey: 'stopped-1' })));
    expect(retries.map((r) => r.body.id)).toEqual([id, id, id]);
    expect(await accepted()).toBe(before + 2);
    expect((await world.send(app, stopped, { idempotencyKey: 'stopped-1' })).body.id).toBe(id);
    expect(await accepted()).toBe(before + 2);

    for (const sent of [twins[0]!.body.id, id]) expect(await world.finished(sent)).toBe('completed');
    expect(world.service.messagesFor(subscription.token)).toHaveLength(2);
  });
});
