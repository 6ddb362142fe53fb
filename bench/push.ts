/**
 * Notification throughput, measured (not asserted):
 *
 *   node --import tsx bench/push.ts [--seconds 10] [--concurrency 64] [--deliveries 5000]
 *
 * 1. Notifications accepted per second by ONE API process (`POST /api/push`, shared app JWT,
 *    JSON mode), with no worker running: the API validates, applies policy and enqueues.
 * 2. The cost of accepting a broadcast to 10 wallets and to 100,000 wallets (it should not differ).
 * 3. Deliveries per second by ONE worker process against a loopback HTTPS push service (in this
 *    process): a broadcast fanned out in chunks, and one-user notifications.
 *
 * REDIS_URL (default redis://127.0.0.1:6379) is the Redis under test; every key lives under a
 * fresh prefix that is deleted at the end. Needs `openssl` for the loopback certificate.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import bs58 from 'bs58';
import { Redis } from 'ioredis';
import webpush from 'web-push';
import { AppRegistry } from '../src/apps/registry.js';
import { PushStore } from '../src/push/store.js';
import { Keys } from '../src/redis/keys.js';
import { generateKeyPair } from '../src/shared/ed25519.js';
import { deleteKeys, signToken, testPrefix, verifiedAppRecord } from '../test/helpers/harness.js';
import { spawnApi } from '../test/helpers/processes.js';
import { spawnWorker } from '../test/push/support/processes.js';
import { PushService, testCertificate } from '../test/push/support/push-service.js';

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const SECONDS = option('seconds', 10);
const CONCURRENCY = option('concurrency', 64);
const DELIVERIES = option('deliveries', 5000);
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const redis = new Redis(REDIS_URL);
const prefix = testPrefix();
const keys = new Keys(prefix);
const store = new PushStore(redis, keys, false);
const registry = new AppRegistry(redis, keys, 0);
const vapid = webpush.generateVAPIDKeys();
const service = await PushService.start();
const env: Record<string, string> = {
  REDIS_URL,
  VERSUS_KEY_PREFIX: prefix,
  LOG_LEVEL: 'warn',
  VAPID_PUBLIC_KEY: vapid.publicKey,
  VAPID_PRIVATE_KEY: vapid.privateKey,
  VAPID_SUBJECT: 'mailto:bench@versus.example',
  PUSH_ENDPOINT_HOSTS: service.hostEntry,
  NODE_EXTRA_CA_CERTS: testCertificate().certPath,
  HOST: '127.0.0.1',
  PORT: '0',
};

async function registerApp(audienceDays: number | null) {
  const pair = generateKeyPair();
  const record = verifiedAppRecord(pair.publicKey, { name: 'Bench', audienceDays });
  await registry.put(record);
  return { ...record, secretKey: pair.secretKey };
}

/** Wallets with one loopback subscription each that opened the app now. */
async function seedUsers(appId: string, count: number, subscribe = true): Promise<string[]> {
  const wallets = Array.from({ length: count }, () => bs58.encode(randomBytes(32)));
  for (let i = 0; i < wallets.length; i += 500) {
    await Promise.all(
      wallets.slice(i, i + 500).map(async (wallet) => {
        if (subscribe) {
          const s = service.subscribe();
          await store.addSubscription(wallet, { endpoint: s.endpoint, keys: s.keys });
        }
        await store.recordVisit(appId, wallet);
      }),
    );
  }
  return wallets;
}

/** A large audience without subscriptions, written straight into the app's visitor set. */
async function seedVisitorsFast(appId: string, count: number): Promise<void> {
  const now = Date.now();
  for (let i = 0; i < count; i += 5000) {
    const args: Array<string | number> = [];
    for (let j = i; j < Math.min(count, i + 5000); j++) args.push(now, bs58.encode(randomBytes(32)));
    await redis.zadd(keys.pushVisitors(appId), ...args);
  }
}

function line(text: string): void {
  process.stdout.write(`${text}\n`);
}

const api = await spawnApi(env);
try {
  line(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}; Redis ${REDIS_URL}`);

  // ---- 1. accepted per second by one API process
  const app = await registerApp(30);
  const wallets = await seedUsers(app.appId, 1000, false);
  let token = await signToken(app.secretKey, app.origin);
  const refresh = setInterval(async () => {
    token = await signToken(app.secretKey, app.origin);
  }, 30_000);
  let accepted = 0;
  let refused = 0;
  const deadline = Date.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_unused, lane) => {
      let n = lane;
      while (Date.now() < deadline) {
        const response = await fetch(`${api.url}/api/push`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ to: wallets[n++ % wallets.length], title: 'Your move', body: 'Alice played e4', path: '/games/1' }),
        });
        await response.arrayBuffer();
        if (response.status === 202) accepted++;
        else refused++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  clearInterval(refresh);
  line(`API  notifyUser accepted: ${Math.round(accepted / elapsed)}/s (${accepted} in ${elapsed.toFixed(1)} s, ${CONCURRENCY} in flight, ${refused} refused)`);

  // ---- 2. a broadcast's acceptance cost does not depend on its audience
  for (const audience of [10, 100_000]) {
    const b = await registerApp(30);
    await seedVisitorsFast(b.appId, audience);
    const t = await signToken(b.secretKey, b.origin);
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      const response = await fetch(`${api.url}/api/push/broadcast`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${t}` },
        body: JSON.stringify({ title: 'News', body: 'Season 2' }),
      });
      await response.arrayBuffer();
      if (response.status !== 202) throw new Error(`broadcast answered ${response.status}`);
      times.push(performance.now() - t0);
    }
    times.sort((x, y) => x - y);
    line(`API  broadcast to ${audience.toLocaleString('en')} wallets: median ${times[100]!.toFixed(2)} ms, p99 ${times[198]!.toFixed(2)} ms per accepted request (sequential)`);
  }

  // Jobs queued so far are not part of the delivery measurement.
  await deleteKeys(redis, `${prefix}:{bull}`);

  // ---- 3. deliveries per second by one worker
  const worker = await spawnWorker(env, {});
  try {
    const target = await registerApp(30);
    await seedUsers(target.appId, DELIVERIES);
    const t = await signToken(target.secretKey, target.origin);
    const before = service.accepted.length;
    const t0 = performance.now();
    const response = await fetch(`${api.url}/api/push/broadcast`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${t}` },
      body: JSON.stringify({ title: 'Bench', body: 'broadcast' }),
    });
    if (response.status !== 202) throw new Error(`broadcast answered ${response.status}`);
    while (service.accepted.length - before < DELIVERIES) await new Promise((r) => setTimeout(r, 10));
    const seconds = (performance.now() - t0) / 1000;
    line(`WORKER broadcast: ${Math.round(DELIVERIES / seconds)} deliveries/s (${DELIVERIES} wallets in ${seconds.toFixed(2)} s, acceptance to last delivery)`);

    const users = await registerApp(null);
    const recipients = await seedUsers(users.appId, 2000);
    const userToken = await signToken(users.secretKey, users.origin);
    const before2 = service.accepted.length;
    const t1 = performance.now();
    for (let i = 0; i < recipients.length; i += 100) {
      await Promise.all(
        recipients.slice(i, i + 100).map(async (to) => {
          const r = await fetch(`${api.url}/api/push`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${userToken}` },
            body: JSON.stringify({ to, title: 'Bench', body: 'one user' }),
          });
          await r.arrayBuffer();
          if (r.status !== 202) throw new Error(`notifyUser answered ${r.status}`);
        }),
      );
    }
    while (service.accepted.length - before2 < recipients.length) await new Promise((r) => setTimeout(r, 10));
    const seconds2 = (performance.now() - t1) / 1000;
    line(`WORKER notifyUser: ${Math.round(recipients.length / seconds2)} deliveries/s (${recipients.length} one-user notifications, first request to last delivery)`);
  } finally {
    await worker.stop();
  }
} finally {
  await api.stop();
  await service.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
}
