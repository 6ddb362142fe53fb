import { createECDH, randomBytes } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { expect } from 'vitest';
import webpush from 'web-push';
import { AppRegistry, type AppRecord } from '../../src/apps/registry.js';
import type { Config } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/http/server.js';
import { Keys } from '../../src/redis/keys.js';
import { deleteKeys, registerTestApp, testConfig, testPrefix, type TestApp } from '../helpers/harness.js';
import { Wallet } from '../push/support/wallet.js';

/** The host a subscription endpoint may name (PUSH_ENDPOINT_HOSTS); nothing is ever sent to it here. */
export const PUSH_HOST = 'push.hostile.test';

export interface Reply {
  status: number;
  /** The body as sent. */
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  body: any;
  contentType: string | null;
}

/** One log line of the server, as pino wrote it. */
export interface LogLine {
  level: number;
  msg?: string;
  [key: string]: unknown;
}

/**
 * An in-process API (api role: matchmaking, notifications without a worker, host endpoints) on
 * its own key prefix, whose pino log goes to memory so that tests can read every line it wrote,
 * with VAPID keys configured and PUSH_ENDPOINT_HOSTS naming a host nothing contacts.
 */
export class LoggedServer {
  readonly keys: Keys;
  readonly registry: AppRegistry;

  private constructor(
    readonly prefix: string,
    readonly config: Config,
    readonly server: RunningServer,
    /** The tests' own plain client (these tests run only against a standalone Redis). */
    readonly redis: Redis,
    /** Every line the server logged, in order. */
    readonly log: LogLine[],
  ) {
    this.keys = new Keys(prefix);
    this.registry = new AppRegistry(redis, this.keys, 0);
  }

  static async start(env: Record<string, string> = {}): Promise<LoggedServer> {
    const prefix = testPrefix();
    const vapid = webpush.generateVAPIDKeys();
    const config = testConfig(prefix, {
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      PUSH_ENDPOINT_HOSTS: PUSH_HOST,
      ...env,
    });
    const log: LogLine[] = [];
    // Every level, debug refusals included: a test can see all that a client error makes the server write.
    const logger = pino({ level: 'trace' }, { write: (line: string) => void log.push(JSON.parse(line) as LogLine) });
    const server = await startServer(config, { port: 0, host: '127.0.0.1', logger });
    const redis = new Redis(config.redisUrl);
    return new LoggedServer(prefix, config, server, redis, log);
  }

  get url(): string {
    return this.server.url;
  }

  get port(): number {
    return this.server.port;
  }

  /** Stores a verified app record, as `apps register` would. */
  registerApp(options: Partial<AppRecord> = {}): Promise<TestApp> {
    return registerTestApp(this.registry, options);
  }

  async post(path: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<Reply> {
    const response = await fetch(`${this.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      signal: AbortSignal.timeout(20_000), // a guard against a hang, not a speed assertion
    });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, text, body: parsed, contentType: response.headers.get('content-type') };
  }

  /** A matchmaking envelope sent as `app`. */
  async call(app: TestApp, operation: string, input?: unknown): Promise<Reply> {
    const envelope = input === undefined ? { operation } : { operation, input };
    return this.post('/api/matchmaking', JSON.stringify(envelope), { authorization: `Bearer ${await app.token()}` });
  }

  /** A wallet-signed host request: the signature covers exactly `body` (bytes too: Buffer.from copies them as they are). */
  async host(path: string, wallet: Wallet, body: string | Buffer): Promise<Reply> {
    return this.post(path, body, { 'x-wallet-signature': wallet.signBytes(body as string) });
  }

  /**
   * Every key under this server's prefix with its serialized value (DUMP) and TTL state: two
   * snapshots are equal exactly when no request wrote anything (tickets, tombstones, queue
   * policies, subscriptions, visits, mutes, nonces, push jobs, idempotency records).
   */
  async snapshot(): Promise<Record<string, string>> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}:*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
    const state: Record<string, string> = {};
    for (const key of keys.sort()) {
      const dump = await this.redis.dumpBuffer(key);
      const persistent = (await this.redis.pttl(key)) === -1;
      state[key] = `${persistent ? 'persistent' : 'expiring'}:${dump?.toString('base64') ?? 'gone'}`;
    }
    return state;
  }

  /**
   * Runs `request` and checks that it wrote nothing under this server's prefix: every key after
   * it is as before, and no key appeared. A key with a TTL (a nonce) may have expired meanwhile.
   */
  async unchanged<T>(request: () => Promise<T>, label = ''): Promise<T> {
    const before = await this.snapshot();
    const result = await request();
    const after = await this.snapshot();
    for (const key of Object.keys(before)) if (!(key in after) && before[key]!.startsWith('expiring:')) delete before[key];
    expect(after, `state changed ${label}`).toEqual(before);
    return result;
  }

  /** Log lines at warn level or above, and any line that carries a stack trace or a source path. */
  logProblems(since = 0): LogLine[] {
    return this.log.slice(since).filter((line) => line.level >= 40 || STACK_OR_PATH.test(JSON.stringify(line)));
  }

  async stop(): Promise<void> {
    await this.server.close();
    await deleteKeys(this.redis, this.prefix);
    await this.redis.quit();
  }
}

/** What a stack trace or a leaked source location looks like in a body or a log line. */
export const STACK_OR_PATH = /\bat [^\n]*:\d+:\d+|\n\s+at |"stack"|[\\/](?:src|test|node_modules)[\\/][^"\s]*\.(?:ts|js)\b|file:\/\//;

/** A browser PushSubscription JSON with a real P-256 key, on the test's allowed push host. */
export function subscriptionJson(): { endpoint: string; keys: { p256dh: string; auth: string } } {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    endpoint: `https://${PUSH_HOST}/send/${randomBytes(8).toString('hex')}`,
    keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') },
  };
}

/** The members every host body carries, for `wallet`, freshly signed now with a new nonce. */
export function hostCommon(wallet: Wallet): { wallet: string; signedAt: number; nonce: string; aud: string } {
  return { wallet: wallet.address, signedAt: Date.now(), nonce: randomBytes(18).toString('base64url'), aud: 'service-host' };
}

/**
 * Sends raw bytes on a new TCP connection and collects what comes back until the server
 * closes the connection (or `guardMs` passes: then `closed` is false). Write errors after the
 * server closed (EPIPE, ECONNRESET) are expected for oversized requests and are not failures.
 */
export function rawExchange(
  port: number,
  chunks: Array<string | Buffer>,
  options: { guardMs?: number; endAfterWrite?: boolean } = {},
): Promise<{ closed: boolean; response: string }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let response = '';
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(guard);
      socket.destroy();
      resolve({ closed, response });
    };
    const guard = setTimeout(() => finish(false), options.guardMs ?? 15_000);
    socket.on('data', (data) => {
      response += data.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => finish(true));
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
      if (options.endAfterWrite) socket.end();
    });
  });
}
