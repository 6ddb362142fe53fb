import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { SignJWT } from 'jose';
import { AppRegistry, DEFAULT_USER_DAYS, type AppRecord } from '../../src/apps/registry.js';
import { loadConfig, type Config } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/http/server.js';
import { masters, waitForReady, type RedisClient } from '../../src/redis/connection.js';
import { appIdOf, Keys } from '../../src/redis/keys.js';
import { generateKeyPair, parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { APP_AUTH_AUD, APP_AUTH_TYP } from '../../src/shared/protocol.js';
import { redisEnv, testRedis } from '../setup/redis-url.js';

/** A test prefix: every key a test writes lives under it, and is deleted afterwards. */
export function testPrefix(): string {
  return `t${randomUUID().replaceAll('-', '').slice(0, 10)}`;
}

export function testConfig(prefix: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    ...redisEnv(),
    VERSUS_KEY_PREFIX: prefix,
    VERSUS_TEST_CLOCK: '1',
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    ...env,
  });
}

/**
 * Every key matching a SCAN pattern. On a cluster each master holds only its own slots (and
 * KEYS or SCAN through a cluster client asks just one node), so every master is scanned.
 */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  if (redis instanceof Cluster) await waitForReady(redis, 10_000);
  const found: string[] = [];
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      found.push(...keys);
    } while (cursor !== '0');
  }
  return found;
}

/** Deletes every key under `prefix`, one key per UNLINK (one multi-key UNLINK could cross cluster slots). */
export async function deleteKeys(redis: RedisClient, prefix: string): Promise<void> {
  const keys = await scanKeys(redis, `${prefix}:*`);
  for (let i = 0; i < keys.length; i += 1000) {
    await Promise.all(keys.slice(i, i + 1000).map((key) => redis.unlink(key)));
  }
}

export interface TestApp {
  origin: string;
  appId: string;
  secretKey: string;
  publicKey: string;
  /** A fresh, valid shared app JWT. */
  token(): Promise<string>;
}

export interface TokenOptions {
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
  /** Replace claims entirely instead of merging. */
  exactClaims?: Record<string, unknown>;
}

/** Signs an app token, with any header or claim changed (for the auth-failure tests). */
export async function signToken(secretKey: string, origin: string, options: TokenOptions = {}): Promise<string> {
  const pair = parseSecretKey(secretKey);
  if (!pair) throw new Error('bad test key');
  const now = Math.floor(Date.now() / 1000);
  const claims = options.exactClaims ?? { iss: origin, aud: APP_AUTH_AUD, iat: now, exp: now + 60, ...options.claims };
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', typ: APP_AUTH_TYP, ...options.header } as { alg: string })
    .sign(privateKeyObject(pair));
}

/** A verified production app's record, as manifest verification would store it; override any field. */
export function verifiedAppRecord(appKey: string, options: Partial<AppRecord> = {}): AppRecord {
  const origin = options.origin ?? `https://app-${randomUUID().slice(0, 8)}.example`;
  return {
    origin,
    appId: appIdOf(origin),
    name: 'Test App',
    appKey,
    push: true,
    environment: 'production',
    verified: true,
    manifest: 'test',
    verifiedAt: Date.now(),
    pushMuted: false,
    audienceDays: null,
    userDays: DEFAULT_USER_DAYS,
    ...options,
  };
}

/** Stores a verified app record for a new key pair, as `versus apps register` would, and returns the app. */
export async function registerTestApp(registry: AppRegistry, options: Partial<AppRecord> = {}): Promise<TestApp> {
  const keys = generateKeyPair();
  const record = verifiedAppRecord(keys.publicKey, options);
  await registry.put(record);
  return {
    origin: record.origin,
    appId: record.appId,
    secretKey: keys.secretKey,
    publicKey: keys.publicKey,
    token: () => signToken(keys.secretKey, record.origin),
  };
}

/** A running API with its own prefix, a test clock, and helpers to register apps. */
export class Harness {
  readonly keys: Keys;
  readonly registry: AppRegistry;

  private constructor(
    readonly prefix: string,
    readonly config: Config,
    readonly server: RunningServer,
    /** The tests' own client: a Cluster client in the `cluster` project. */
    readonly redis: RedisClient,
  ) {
    this.keys = new Keys(prefix);
    this.registry = new AppRegistry(this.redis, this.keys, 0);
  }

  static async start(env: Record<string, string> = {}): Promise<Harness> {
    const prefix = env['VERSUS_KEY_PREFIX'] ?? testPrefix();
    const config = testConfig(prefix, env);
    const server = await startServer(config, { port: 0, host: '127.0.0.1' });
    return new Harness(prefix, config, server, await testRedis());
  }

  get url(): string {
    return this.server.url;
  }

  /** Stores a verified app record directly (manifest verification is tested on its own). */
  registerApp(options: Partial<AppRecord> = {}): Promise<TestApp> {
    return registerTestApp(this.registry, options);
  }

  /** Freezes an app's clock at `ms` (the scripts read it while VERSUS_TEST_CLOCK=1). */
  async setClock(app: TestApp, ms: number): Promise<void> {
    await this.redis.set(this.keys.testClock(app.appId), String(ms));
  }

  /** POSTs a matchmaking envelope as the app; returns status and parsed body. */
  async call(app: TestApp, operation: string, input?: unknown): Promise<{ status: number; body: any }> {
    const envelope = input === undefined ? { operation } : { operation, input };
    return this.post('/api/matchmaking', JSON.stringify(envelope), { authorization: `Bearer ${await app.token()}` });
  }

  async post(path: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<{ status: number; body: any; text: string }> {
    const response = await fetch(`${this.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, body: parsed, text };
  }

  async stop(): Promise<void> {
    await this.server.close();
    await deleteKeys(this.redis, this.prefix);
    await this.redis.quit();
  }
}
