import { parsePublicKey, parseSecretKey } from './shared/ed25519.js';

/** Every setting Versus reads. This module is the only place that reads process.env. */
export interface Config {
  redisUrl: string;
  /** host:port list; set means cluster mode. */
  redisClusterNodes: Array<{ host: string; port: number }> | null;
  keyPrefix: string;
  environment: 'production' | 'staging';
  /** base58 64-byte service key; needed to issue manifests. */
  signingKey: string | null;
  /** base58 32-byte key that verifies manifests (from SERVICE_SIGNING_PUBLIC_KEY or the signing key). */
  signingPublicKey: string | null;
  vapid: { publicKey: string; privateKey: string; subject: string } | null;
  pushEndpointHosts: string[];
  port: number;
  host: string;
  /** Node HTTP server limits against slow or idle clients (milliseconds). */
  http: {
    /** Whole request (headers and body) must arrive within this: else 408 and the connection closes. */
    requestTimeoutMs: number;
    /** The request's headers must arrive within this: else 408 and the connection closes. */
    headersTimeoutMs: number;
    /** An idle keep-alive connection is closed after this. */
    keepAliveTimeoutMs: number;
  };
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Test-only: scripts read "now" from a per-app clock key when set. Refused with NODE_ENV=production. */
  testClock: boolean;
  /** METRICS_TOKEN: when set, GET /metrics needs `Authorization: Bearer <it>`; null: /metrics is open. */
  metricsToken: string | null;
}

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}

export const DEFAULT_PUSH_ENDPOINT_HOSTS = [
  'fcm.googleapis.com',
  '.push.services.mozilla.com',
  '.notify.windows.com',
  '.push.apple.com',
];

/** Defaults of HTTP_REQUEST_TIMEOUT_MS, HTTP_HEADERS_TIMEOUT_MS and HTTP_KEEP_ALIVE_TIMEOUT_MS. */
export const DEFAULT_HTTP_TIMEOUTS: Config['http'] = { requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000 };

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

type Env = Record<string, string | undefined>;

function nonEmpty(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function parsePort(env: Env, name: string, fallback: number): number {
  const text = nonEmpty(env, name);
  if (text === undefined) return fallback;
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new ConfigError(name, `not a port number: ${text}`);
  return Number(text);
}

/** Upper bound of every HTTP timeout setting: one hour. */
const MAX_TIMEOUT_MS = 3_600_000;

function parseMilliseconds(env: Env, name: string, fallback: number): number {
  const text = nonEmpty(env, name);
  if (text === undefined) return fallback;
  if (!/^\d{1,7}$/.test(text) || Number(text) < 1 || Number(text) > MAX_TIMEOUT_MS) {
    throw new ConfigError(name, `expected milliseconds from 1 to ${MAX_TIMEOUT_MS}, got "${text}"`);
  }
  return Number(text);
}

/** The HTTP server's timeouts; headers must be due no later than the whole request. */
function parseHttpTimeouts(env: Env): Config['http'] {
  const requestTimeoutMs = parseMilliseconds(env, 'HTTP_REQUEST_TIMEOUT_MS', DEFAULT_HTTP_TIMEOUTS.requestTimeoutMs);
  const headersTimeoutMs = parseMilliseconds(env, 'HTTP_HEADERS_TIMEOUT_MS', Math.min(DEFAULT_HTTP_TIMEOUTS.headersTimeoutMs, requestTimeoutMs));
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', `must not exceed HTTP_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }
  const keepAliveTimeoutMs = parseMilliseconds(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', DEFAULT_HTTP_TIMEOUTS.keepAliveTimeoutMs);
  return { requestTimeoutMs, headersTimeoutMs, keepAliveTimeoutMs };
}

function parseClusterNodes(text: string): Array<{ host: string; port: number }> {
  return text.split(',').map((entry) => {
    const trimmed = entry.trim();
    const match = /^(.+):(\d{1,5})$/.exec(trimmed);
    if (!match || Number(match[2]) > 65535) {
      throw new ConfigError('REDIS_CLUSTER_NODES', `expected a comma list of host:port, got "${trimmed}"`);
    }
    return { host: match[1]!.replace(/^\[|\]$/g, ''), port: Number(match[2]) };
  });
}

export function loadConfig(env: Env = process.env): Config {
  const redisUrl = nonEmpty(env, 'REDIS_URL') ?? 'redis://127.0.0.1:6379';
  if (!/^rediss?:\/\//.test(redisUrl)) throw new ConfigError('REDIS_URL', 'must start with redis:// or rediss://');
  try {
    new URL(redisUrl);
  } catch {
    throw new ConfigError('REDIS_URL', 'not a valid URL');
  }
  const clusterText = nonEmpty(env, 'REDIS_CLUSTER_NODES');
  const redisClusterNodes = clusterText === undefined ? null : parseClusterNodes(clusterText);

  const keyPrefix = nonEmpty(env, 'VERSUS_KEY_PREFIX') ?? 'vs';
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(keyPrefix)) {
    // Braces would break the per-app hash tag that keeps an app in one cluster slot.
    throw new ConfigError('VERSUS_KEY_PREFIX', 'use 1 to 64 of A-Z a-z 0-9 _ . : -');
  }

  const environmentText = nonEmpty(env, 'SERVICE_ENVIRONMENT') ?? 'production';
  if (environmentText !== 'production' && environmentText !== 'staging') {
    throw new ConfigError('SERVICE_ENVIRONMENT', 'must be production or staging');
  }

  const signingKey = nonEmpty(env, 'SERVICE_SIGNING_KEY') ?? null;
  let signingPublicKey = nonEmpty(env, 'SERVICE_SIGNING_PUBLIC_KEY') ?? null;
  if (signingKey !== null) {
    const pair = parseSecretKey(signingKey);
    if (!pair) throw new ConfigError('SERVICE_SIGNING_KEY', 'not a base58 64-byte Ed25519 secret key');
    if (signingPublicKey !== null && signingPublicKey !== pair.publicKeyBase58) {
      throw new ConfigError('SERVICE_SIGNING_PUBLIC_KEY', 'does not belong to SERVICE_SIGNING_KEY');
    }
    signingPublicKey = pair.publicKeyBase58;
  }
  if (signingPublicKey !== null && !parsePublicKey(signingPublicKey)) {
    throw new ConfigError('SERVICE_SIGNING_PUBLIC_KEY', 'not a base58 32-byte Ed25519 public key');
  }

  const vapidPublic = nonEmpty(env, 'VAPID_PUBLIC_KEY');
  const vapidPrivate = nonEmpty(env, 'VAPID_PRIVATE_KEY');
  const vapidSubject = nonEmpty(env, 'VAPID_SUBJECT');
  let vapid: Config['vapid'] = null;
  if (vapidPublic !== undefined || vapidPrivate !== undefined) {
    if (vapidPublic === undefined) throw new ConfigError('VAPID_PUBLIC_KEY', 'missing while VAPID_PRIVATE_KEY is set');
    if (vapidPrivate === undefined) throw new ConfigError('VAPID_PRIVATE_KEY', 'missing while VAPID_PUBLIC_KEY is set');
    if (!/^[A-Za-z0-9_-]{87}$/.test(vapidPublic)) throw new ConfigError('VAPID_PUBLIC_KEY', 'expected 65 bytes of base64url');
    if (!/^[A-Za-z0-9_-]{43}$/.test(vapidPrivate)) throw new ConfigError('VAPID_PRIVATE_KEY', 'expected 32 bytes of base64url');
    const subject = vapidSubject ?? 'mailto:operator@localhost';
    if (!/^(mailto:|https:\/\/)/.test(subject)) throw new ConfigError('VAPID_SUBJECT', 'must be a mailto: or https: URL');
    vapid = { publicKey: vapidPublic, privateKey: vapidPrivate, subject };
  }

  const hostsText = nonEmpty(env, 'PUSH_ENDPOINT_HOSTS');
  const pushEndpointHosts = hostsText === undefined
    ? DEFAULT_PUSH_ENDPOINT_HOSTS
    : hostsText.split(',').map((h) => h.trim().toLowerCase()).filter((h) => h !== '');
  for (const host of pushEndpointHosts) {
    if (!/^\.?[a-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-f:]+\](:\d{1,5})?$/.test(host)) {
      throw new ConfigError('PUSH_ENDPOINT_HOSTS', `not a host name: ${host}`);
    }
  }

  const logLevel = (nonEmpty(env, 'LOG_LEVEL') ?? 'info') as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);

  const testClockText = nonEmpty(env, 'VERSUS_TEST_CLOCK');
  if (testClockText !== undefined && testClockText !== '0' && testClockText !== '1') {
    throw new ConfigError('VERSUS_TEST_CLOCK', 'must be 0 or 1');
  }
  const testClock = testClockText === '1';
  if (testClock && env['NODE_ENV'] === 'production') {
    throw new ConfigError('VERSUS_TEST_CLOCK', 'the test clock is refused when NODE_ENV=production');
  }

  const metricsToken = nonEmpty(env, 'METRICS_TOKEN') ?? null;
  if (metricsToken !== null && !/^[\x21-\x7e]{16,256}$/.test(metricsToken)) {
    throw new ConfigError('METRICS_TOKEN', 'use 16 to 256 visible ASCII characters (no spaces)');
  }

  return {
    redisUrl,
    redisClusterNodes,
    keyPrefix,
    environment: environmentText,
    signingKey,
    signingPublicKey,
    vapid,
    pushEndpointHosts,
    port: parsePort(env, 'PORT', 8080),
    host: nonEmpty(env, 'HOST') ?? '0.0.0.0',
    http: parseHttpTimeouts(env),
    logLevel,
    testClock,
    metricsToken,
  };
}
