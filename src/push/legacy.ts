import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import { isVerifiedFor, keyObjectFor, checkTokenTimes } from '../apps/auth.js';
import type { AppRecord, AppRegistry } from '../apps/registry.js';
import { ApiError } from '../http/errors.js';
import { LEGACY_BROADCAST_TYP, LEGACY_PUSH_AUD, LEGACY_PUSH_TYP, TOKEN_LEEWAY_S } from '../shared/protocol.js';

/** Longest legacy token considered; a real one with a 1000-character body is about 3 KB. */
const MAX_TOKEN_CHARS = 16 * 1024;

/** The legacy `application/jwt` body (verifyLegacyToken; surrounding whitespace is ignored), for src/http/openapi.ts. */
export const legacyTokenSchema = {
  type: 'string',
  maxLength: MAX_TOKEN_CHARS,
  pattern: '^\\s*[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\s*$',
  description: 'Legacy signed-body token: a compact EdDSA JWS, typ service-push+jwt (one user, claim sub: the wallet) or service-push-broadcast+jwt, aud service-push, iss the app origin, claims title, body, optional path; at most 300 s lifetime',
} as const;

/** Registered claims a legacy token may carry besides its content claims. */
export const LEGACY_REGISTERED_CLAIMS = ['iss', 'aud', 'iat', 'exp', 'nbf', 'jti', 'sub'] as const;

export interface LegacySend {
  app: AppRecord;
  /** The verified claims: content (title, body, path) plus registered claims. */
  claims: JWTPayload;
}

/**
 * Verifies the legacy signed-body token (spec section 5, DESIGN.md) for `/api/push`
 * (`broadcast` false) or `/api/push/broadcast`:
 *  - malformed, wrong alg/typ, bad signature, wrong aud, expired or too long-lived:
 *    `unauthenticated`;
 *  - unknown origin or an app not verified for this environment: `app_not_verified`;
 *  - an app whose manifest has no key to check the token with: `push_not_declared` when it
 *    declares no push, else `app_not_verified`;
 *  - a correctly signed token that does not grant this request (a broadcast token at
 *    /api/push, a one-user token at /api/push/broadcast, a one-user token without `sub`):
 *    `unauthorized`.
 * The key is `capabilities.push` when that is a key, else the app's attested `appKey`; header
 * members other than alg and typ are never followed.
 */
export async function verifyLegacyToken(
  token: string,
  registry: AppRegistry,
  environment: 'production' | 'staging',
  broadcast: boolean,
): Promise<LegacySend> {
  if (token.length === 0 || token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token)) {
    throw new ApiError('unauthenticated', 'malformed legacy token');
  }
  let typ: string;
  let iss: unknown;
  try {
    const header = decodeProtectedHeader(token);
    if (header.alg !== 'EdDSA' || (header.typ !== LEGACY_PUSH_TYP && header.typ !== LEGACY_BROADCAST_TYP)) throw new Error('alg or typ');
    typ = header.typ;
    iss = decodeJwt(token).iss;
  } catch {
    throw new ApiError('unauthenticated', 'malformed legacy token');
  }
  if (typeof iss !== 'string') throw new ApiError('unauthenticated', 'legacy token has no issuer');

  const app = await registry.get(iss);
  if (!isVerifiedFor(app, environment)) throw new ApiError('app_not_verified', 'app is not verified for this environment');
  const keyText = typeof app.push === 'string' ? app.push : app.appKey;
  if (keyText === null) {
    throw new ApiError(app.push === false ? 'push_not_declared' : 'app_not_verified', 'the manifest has no key for legacy push tokens');
  }
  const key = keyObjectFor(keyText);
  if (!key) throw new ApiError('app_not_verified', 'stored key is unusable');

  let claims: JWTPayload;
  try {
    const verified = await jwtVerify(token, key, {
      algorithms: ['EdDSA'],
      typ,
      audience: LEGACY_PUSH_AUD,
      issuer: iss,
      clockTolerance: TOKEN_LEEWAY_S,
      requiredClaims: ['iat', 'exp'],
    });
    if (!checkTokenTimes(verified.payload.iat, verified.payload.exp)) throw new Error('lifetime');
    claims = verified.payload;
  } catch {
    throw new ApiError('unauthenticated', 'legacy token signature, audience or lifetime is invalid');
  }

  const isBroadcastToken = typ === LEGACY_BROADCAST_TYP;
  if (isBroadcastToken !== broadcast) throw new ApiError('unauthorized', `a ${typ} token does not grant this endpoint`);
  if (!broadcast && claims.sub === undefined) throw new ApiError('unauthorized', 'a one-user legacy token needs sub');
  return { app, claims };
}
