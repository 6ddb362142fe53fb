import { createHash, type KeyObject } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { parsePublicKey, publicKeyObject } from '../shared/ed25519.js';
import { APP_AUTH_AUD, APP_AUTH_TYP, MAX_TOKEN_LIFETIME_S, TOKEN_LEEWAY_S } from '../shared/protocol.js';
import type { AppRecord, AppRegistry } from './registry.js';

export type AuthFailure = 'unauthenticated' | 'app_not_verified';

export class AuthError extends Error {
  constructor(readonly code: AuthFailure, detail: string) {
    super(detail);
  }
}

/** Longest bearer token considered at all; a real one is about 300 characters. */
const MAX_TOKEN_CHARS = 2048;

const keyObjects = new Map<string, KeyObject>();

/**
 * Tokens already verified, kept until they expire: a client reuses its token for up to a
 * minute, and verifying an Ed25519 signature costs more than the rest of a request's auth.
 * An entry remembers the key that verified it, so a rotated or removed key, or an app that
 * is no longer verified, stops it at once (the app record is always read, cached 2 s).
 * Entries are keyed by the token's SHA-256, so a verified app that pads its tokens to the
 * 2048-character limit cannot make the cache hold 50,000 long strings.
 */
const verifiedTokens = new Map<string, { origin: string; appKey: string; exp: number }>();
const MAX_VERIFIED_TOKENS = 50_000;

function digestOf(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

function rememberToken(digest: string, origin: string, appKey: string, exp: number): void {
  if (verifiedTokens.size >= MAX_VERIFIED_TOKENS) {
    const now = Date.now() / 1000;
    for (const [key, entry] of verifiedTokens) if (entry.exp + TOKEN_LEEWAY_S < now) verifiedTokens.delete(key);
    if (verifiedTokens.size >= MAX_VERIFIED_TOKENS) verifiedTokens.clear();
  }
  verifiedTokens.set(digest, { origin, appKey, exp });
}

/** KeyObjects for stored app keys, built once per key. */
export function keyObjectFor(publicKeyBase58: string): KeyObject | null {
  let key = keyObjects.get(publicKeyBase58);
  if (!key) {
    const bytes = parsePublicKey(publicKeyBase58);
    if (!bytes) return null;
    if (keyObjects.size > 10_000) keyObjects.clear();
    key = publicKeyObject(bytes);
    keyObjects.set(publicKeyBase58, key);
  }
  return key;
}

/** An app usable for this deployment: known, verified against this environment's manifest. */
export function isVerifiedFor(app: AppRecord | null, environment: 'production' | 'staging'): app is AppRecord {
  return app !== null && app.verified && app.environment === environment;
}

/**
 * Checks lifetime rules shared by app tokens and legacy push tokens: exp - iat at most 300 s,
 * iat not more than 30 s in the future (expiry itself is checked by jose with the same leeway).
 */
export function checkTokenTimes(iat: unknown, exp: unknown, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  if (typeof iat !== 'number' || typeof exp !== 'number' || !Number.isFinite(iat) || !Number.isFinite(exp)) return false;
  return exp - iat <= MAX_TOKEN_LIFETIME_S && exp >= iat && iat <= nowSeconds + TOKEN_LEEWAY_S;
}

/**
 * Authenticates an app server by its shared app JWT (`Authorization: Bearer`). The verifying
 * key is always the app's stored, attested key: header members other than alg and typ are
 * never followed.
 */
export async function authenticateApp(
  authorization: string | undefined,
  registry: AppRegistry,
  environment: 'production' | 'staging',
): Promise<AppRecord> {
  if (!authorization) throw new AuthError('unauthenticated', 'missing Authorization header');
  const match = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/.exec(authorization);
  if (!match || match[1]!.length > MAX_TOKEN_CHARS) throw new AuthError('unauthenticated', 'malformed bearer token');
  const token = match[1]!;
  const digest = digestOf(token);
  const known = verifiedTokens.get(digest);
  if (known) {
    if (known.exp + TOKEN_LEEWAY_S < Date.now() / 1000) {
      verifiedTokens.delete(digest);
      throw new AuthError('unauthenticated', 'token expired');
    }
    const app = await registry.get(known.origin);
    if (isVerifiedFor(app, environment) && app.appKey === known.appKey) return app;
    verifiedTokens.delete(digest);
  }
  let iss: unknown;
  try {
    const header = decodeProtectedHeader(token);
    if (header.alg !== 'EdDSA' || header.typ !== APP_AUTH_TYP) throw new Error('wrong alg or typ');
    iss = decodeJwt(token).iss;
  } catch {
    throw new AuthError('unauthenticated', 'malformed token');
  }
  if (typeof iss !== 'string') throw new AuthError('unauthenticated', 'token has no issuer');

  const app = await registry.get(iss);
  if (!isVerifiedFor(app, environment) || app.appKey === null) {
    throw new AuthError('app_not_verified', 'app is not verified for this environment');
  }
  const key = keyObjectFor(app.appKey);
  if (!key) throw new AuthError('app_not_verified', 'stored app key is unusable');
  let exp: number;
  try {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['EdDSA'],
      typ: APP_AUTH_TYP,
      audience: APP_AUTH_AUD,
      issuer: iss,
      clockTolerance: TOKEN_LEEWAY_S,
      requiredClaims: ['iat', 'exp'],
    });
    if (!checkTokenTimes(payload.iat, payload.exp)) throw new Error('lifetime');
    exp = payload.exp as number;
  } catch {
    throw new AuthError('unauthenticated', 'token signature, audience or lifetime is invalid');
  }
  rememberToken(digest, iss, app.appKey, exp);
  return app;
}
