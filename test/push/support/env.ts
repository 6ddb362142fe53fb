import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import webpush from 'web-push';
import { PUSH_QUEUE } from '../../../src/push/types.js';
import type { RedisClient } from '../../../src/redis/connection.js';
import { Harness, type TestApp } from '../../helpers/harness.js';
import { redisEnv } from '../../setup/redis-url.js';
import { decryptMessage, PushService, type BrowserSubscription } from './push-service.js';
import { spawnWorker, type SpawnedWorker } from './processes.js';
import { Wallet } from './wallet.js';

export const VAPID_SUBJECT = 'mailto:push-tests@versus.example';

/** Polls `check` every 50 ms until it returns a value other than false/undefined, or fails after `ms`. */
export async function waitFor<T>(what: string, check: () => T | false | undefined | Promise<T | false | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== false && value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Reply {
  status: number;
  body: any;
}

/** Test-shortened job lock: a killed worker's jobs are taken over within a few seconds. */
export const FAST_RECOVERY = { lockDurationMs: 2000, stalledIntervalMs: 1000 };

/**
 * One push test world: a loopback push service, VAPID keys, an in-process API (Harness) and
 * worker child processes sharing a fresh key prefix, configured as production would be except
 * for PUSH_ENDPOINT_HOSTS (the loopback service), NODE_EXTRA_CA_CERTS (its certificate) and
 * the test clock.
 */
export class PushWorld {
  readonly workers: SpawnedWorker[] = [];
  private queueHandle: { queue: Queue; redis: RedisClient } | null = null;

  private constructor(
    readonly service: PushService,
    readonly vapid: { publicKey: string; privateKey: string },
    readonly harness: Harness,
    readonly env: Record<string, string>,
  ) {}

  static async start(options: { vapid?: boolean; extraEnv?: Record<string, string> } = {}): Promise<PushWorld> {
    const service = await PushService.start();
    const vapid = webpush.generateVAPIDKeys();
    const { testPrefix } = await import('../../helpers/harness.js');
    const { testCertificate } = await import('./push-service.js');
    const env: Record<string, string> = {
      ...redisEnv(),
      VERSUS_KEY_PREFIX: testPrefix(),
      VERSUS_TEST_CLOCK: '1',
      LOG_LEVEL: 'silent',
      PUSH_ENDPOINT_HOSTS: service.hostEntry,
      NODE_EXTRA_CA_CERTS: testCertificate().certPath,
      ...(options.vapid === false ? {} : { VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey, VAPID_SUBJECT }),
      ...options.extraEnv,
    };
    const harness = await Harness.start(env);
    return new PushWorld(service, vapid, harness, env);
  }

  get keys() {
    return this.harness.keys;
  }

  /** A worker child process (`serve --role worker`), or with role `all` the API and the worker in one process. */
  async startWorker(tuning: Record<string, number> = FAST_RECOVERY, role: 'worker' | 'all' = 'worker'): Promise<SpawnedWorker> {
    const worker = await spawnWorker({ ...this.env, HOST: '127.0.0.1', PORT: '0' }, tuning, role);
    this.workers.push(worker);
    return worker;
  }

  /** POSTs a wallet-signed host request. */
  async host(path: string, wallet: Wallet, members: Record<string, unknown>, options: Parameters<Wallet['sign']>[1] = {}): Promise<Reply> {
    const { body, signature } = wallet.sign(members, options);
    return this.post(path, body, { 'x-wallet-signature': signature });
  }

  /** A wallet that subscribed (unless `subscribe: false`) and opened the app now (unless `visit: false`). */
  async user(app: TestApp | null, options: { subscribe?: boolean; visit?: boolean } = {}): Promise<{ wallet: Wallet; subscription: BrowserSubscription }> {
    const wallet = new Wallet();
    const subscription = this.service.subscribe();
    if (options.subscribe !== false) {
      const reply = await this.host('/api/host/subscriptions', wallet, { subscription: subscription.json() });
      if (reply.status !== 204) throw new Error(`subscribe answered ${reply.status} ${JSON.stringify(reply.body)}`);
    }
    if (app && options.visit !== false) {
      const reply = await this.host('/api/host/visits', wallet, { origin: app.origin });
      if (reply.status !== 204) throw new Error(`visit answered ${reply.status} ${JSON.stringify(reply.body)}`);
    }
    return { wallet, subscription };
  }

  /** POST /api/push (or /broadcast) in JSON mode with the app's shared JWT. */
  async send(app: TestApp, content: Record<string, unknown>, options: { broadcast?: boolean; idempotencyKey?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
    const headers: Record<string, string> = { authorization: `Bearer ${await app.token()}`, ...options.headers };
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    return this.post(options.broadcast ? '/api/push/broadcast' : '/api/push', JSON.stringify(content), headers);
  }

  /** POST a legacy signed-body token. */
  async sendLegacy(token: string, broadcast = false): Promise<Reply> {
    return this.post(broadcast ? '/api/push/broadcast' : '/api/push', token, { 'content-type': 'application/jwt' });
  }

  /** The push queue, read-only use: job states. */
  get queue(): Queue {
    if (!this.queueHandle) {
      // BullMQ's own connection: a Cluster client when the world runs on a Redis Cluster.
      const redis = this.harness.config.redisClusterNodes
        ? new Cluster(this.harness.config.redisClusterNodes, { redisOptions: { maxRetriesPerRequest: null } })
        : new Redis(this.env['REDIS_URL']!, { maxRetriesPerRequest: null });
      this.queueHandle = { redis, queue: new Queue(PUSH_QUEUE, { connection: redis, prefix: this.keys.bullPrefix() }) };
    }
    return this.queueHandle.queue;
  }

  /** Waits until the job of a notification (or a chunk `<id>.<k>`) completed or finally failed. */
  async finished(jobId: string, ms = 20_000): Promise<'completed' | 'failed'> {
    return waitFor(`job ${jobId} to finish`, async () => {
      const state = await this.queue.getJobState(jobId);
      return state === 'completed' || state === 'failed' ? state : false;
    }, ms);
  }

  /** Every message the loopback push service received for `subscription`, decrypted and parsed. */
  readAll(subscription: BrowserSubscription): Array<Record<string, unknown>> {
    return this.service.messagesFor(subscription.token).map((m) => JSON.parse(decryptMessage(m.body, subscription)));
  }

  /** Waits until `subscription` has received at least `count` messages; returns them all. */
  async delivered(subscription: BrowserSubscription, count: number): Promise<Array<Record<string, unknown>>> {
    return waitFor(`${count} message(s) for ${subscription.token}`, () => {
      const messages = this.readAll(subscription);
      return messages.length >= count ? messages : false;
    });
  }

  private async post(path: string, body: string, headers: Record<string, string>): Promise<Reply> {
    const { status, body: parsed } = await this.harness.post(path, body, headers);
    return { status, body: parsed };
  }

  async stop(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
    if (this.queueHandle) {
      await this.queueHandle.queue.close();
      await this.queueHandle.redis.quit();
    }
    await this.harness.stop();
    await this.service.close();
  }
}
