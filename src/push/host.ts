import bs58 from 'bs58';
import type { Request } from 'express';
import { ApiError } from '../http/errors.js';
import { hasMediaType, parseJsonBody } from '../http/body.js';
import { verifyDetached } from '../shared/ed25519.js';
import type { PushStore } from './store.js';
import { HOST_AUD, HOST_SIGNED_AT_SKEW_MS } from './types.js';
import { isPlainObject, isWalletAddress, subscriptionSchema, walletAddressSchema } from './validation.js';

/** A host request's nonce (checked again as a schema pattern). */
const NONCE = /^[A-Za-z0-9_-]{16,64}$/;

/** The members every wallet-signed host request carries. */
const COMMON = ['wallet', 'signedAt', 'nonce', 'aud'];

export interface HostRequest<T> {
  wallet: string;
  /** The operation's members, as `validate` returned them. */
  value: T;
}

/**
 * Reads a wallet-signed host request (DESIGN.md "Notifications"): a JSON object with `wallet`,
 * `signedAt` (ms), `nonce` (16 to 64 of A-Za-z0-9_-), `aud: "service-host"` and the operation's
 * members (`members`, no others), signed by the wallet (header `X-Wallet-Signature`, base58
 * Ed25519 signature of the exact body bytes, checked with tweetnacl).
 *
 * Order: a malformed body (not JSON, not an object, a missing, extra or ill-typed member, a
 * `wallet` that is not an address, operation members that `validate` refuses): 400
 * `invalid_request`. Then a missing or bad signature,
 * another `aud`, a `signedAt` more than 60 s from now either way, or a nonce seen in the last
 * 120 s: 401 `unauthenticated`. The nonce is remembered only for a request that passed all else.
 */
export async function readHostRequest<T>(
  req: Request,
  members: readonly string[],
  validate: (body: Record<string, unknown>) => T,
  store: PushStore,
  now = Date.now(),
): Promise<HostRequest<T>> {
  if (!hasMediaType(req, 'application/json')) throw new ApiError('invalid_request', 'Content-Type must be application/json');
  const value = parseJsonBody(req, 'invalid_request', 8);
  if (!isPlainObject(value)) throw new ApiError('invalid_request', 'body is not a JSON object');
  for (const name of Object.keys(value)) {
    if (!COMMON.includes(name) && !members.includes(name)) throw new ApiError('invalid_request', 'unknown member'); // its name is body content: never logged
  }
  for (const name of [...COMMON, ...members]) {
    if (!(name in value)) throw new ApiError('invalid_request', `missing ${name}`);
  }
  const { wallet, signedAt, nonce, aud } = value;
  if (!isWalletAddress(wallet)) throw new ApiError('invalid_request', 'wallet is not a wallet address');
  if (typeof signedAt !== 'number' || !Number.isSafeInteger(signedAt)) throw new ApiError('invalid_request', 'signedAt is not an integer');
  if (typeof nonce !== 'string' || !NONCE.test(nonce)) throw new ApiError('invalid_request', 'nonce must be 16 to 64 of A-Za-z0-9_-');
  if (typeof aud !== 'string') throw new ApiError('invalid_request', 'aud is not a string');
  const operation = validate(value);

  const signature = req.headers['x-wallet-signature'];
  if (typeof signature !== 'string' || signature.length > 128) throw new ApiError('unauthenticated', 'missing X-Wallet-Signature');
  if (!verifyDetached(req.body as Buffer, signature, bs58.decode(wallet))) throw new ApiError('unauthenticated', 'bad wallet signature');
  if (aud !== HOST_AUD) throw new ApiError('unauthenticated', 'signed for another audience');
  if (Math.abs(signedAt - now) > HOST_SIGNED_AT_SKEW_MS) throw new ApiError('unauthenticated', 'signedAt is stale or in the future');
  if (!(await store.claimNonce(wallet, nonce))) throw new ApiError('unauthenticated', 'nonce replayed');
  return { wallet, value: operation };
}

/*
 * JSON Schemas of the host request bodies (readHostRequest plus each route's member checks in
 * routes.ts), published by src/http/openapi.ts and compared with the server on examples by
 * test/http/openapi.test.ts. A body must also be signed (X-Wallet-Signature), fresh and new.
 */

/** `origin` of visits and mutes: a canonical origin (https, or http on a loopback host). */
export const hostOriginSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 2048,
  pattern: '^(?:https://[^/?#@A-Z]+|http://(?:localhost|127(?:\\.\\d{1,3}){3}|\\[::1\\])(?::\\d{1,5})?)$',
  description: 'A canonical app origin: https://host[:port], lowercase, no path, no trailing slash, no default port (checked beyond this pattern: the URL parser must give back the same text); http:// only on a loopback host',
} as const;

function hostBody(members: Record<string, unknown>, description: string) {
  return {
    type: 'object',
    required: [...COMMON, ...Object.keys(members)],
    additionalProperties: false,
    properties: {
      wallet: walletAddressSchema,
      signedAt: {
        type: 'integer',
        minimum: Number.MIN_SAFE_INTEGER,
        maximum: Number.MAX_SAFE_INTEGER,
        description: `Signing time in epoch ms; within ${HOST_SIGNED_AT_SKEW_MS / 1000} s of the server's clock, else 401`,
      },
      nonce: { type: 'string', pattern: NONCE.source, description: 'Not reused by the wallet within 120 s, else 401' },
      aud: { const: HOST_AUD, description: 'Another audience is 401' },
      ...members,
    },
    description: `${description} Header X-Wallet-Signature: base58 Ed25519 signature of the exact body bytes by the wallet's key.`,
  } as const;
}

export const hostSubscribeSchema = hostBody({ subscription: subscriptionSchema }, 'Registers a push subscription for the wallet (one per endpoint; at most 20 per wallet, the oldest dropped).');
export const hostUnsubscribeSchema = hostBody(
  { endpoint: { type: 'string', minLength: 1, maxLength: 2048, description: 'The endpoint of a subscription the wallet registered' } },
  'Removes a subscription.',
);
export const hostVisitSchema = hostBody({ origin: hostOriginSchema }, 'Records that the wallet opened the app now.');
export const hostMuteSchema = hostBody({ origin: hostOriginSchema, muted: { type: 'boolean' } }, "Mutes or unmutes the app's notifications for the wallet.");
