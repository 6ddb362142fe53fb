import bs58 from 'bs58';
import { ApiError } from '../http/errors.js';
import { utf8Length } from '../shared/json.js';
import { allowedEndpoint, decodeBase64Url, MAX_ENDPOINT_CHARS, validP256dh } from './endpoints.js';
import { BODY_MAX_CHARS, PATH_MAX_BYTES, type StoredSubscription, TITLE_MAX_CHARS } from './types.js';

/** The validated content of one send. */
export interface NotificationFields {
  to?: string;
  title: string;
  body: string;
  path: string;
}

/** Base58's alphabet, the characters a wallet address may have (checked again as a schema pattern). */
const BASE58_TEXT = /^[1-9A-HJ-NP-Za-km-z]+$/;
/** An Idempotency-Key: 1 to 255 visible ASCII characters. */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** A wallet address: base58 of a 32-byte Ed25519 public key, in its one canonical spelling. */
export function isWalletAddress(value: unknown): value is string {
  if (typeof value !== 'string' || value.length < 32 || value.length > 44 || !BASE58_TEXT.test(value)) return false;
  try {
    const bytes = bs58.decode(value);
    return bytes.length === 32 && bs58.encode(bytes) === value;
  } catch {
    return false;
  }
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(value: unknown, code: 'invalid_title' | 'invalid_body', maxChars: number): string {
  if (typeof value !== 'string') throw new ApiError(code, 'missing or not a string');
  const trimmed = value.trim();
  if (trimmed === '') throw new ApiError(code, 'blank');
  let chars = 0;
  for (const _ of trimmed) if (++chars > maxChars) throw new ApiError(code, `longer than ${maxChars} characters`);
  return trimmed;
}

/**
 * A path on the app's origin: starts with `/`, not `//`; at most 2048 UTF-8 bytes; no control
 * characters, backslashes or fragment. A query string is kept as sent.
 */
export function checkPath(value: unknown): string {
  if (value === undefined) return '/';
  if (typeof value !== 'string') throw new ApiError('invalid_path', 'not a string');
  if (!value.startsWith('/') || value.startsWith('//')) throw new ApiError('invalid_path', 'must start with "/" and not "//"');
  if (utf8Length(value) > PATH_MAX_BYTES) throw new ApiError('invalid_path', `longer than ${PATH_MAX_BYTES} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f\\#]/.test(value)) throw new ApiError('invalid_path', 'control character, backslash or fragment');
  return value;
}

/**
 * Checks a send's content in the order of DESIGN.md: the shape (`invalid_request`: not an
 * object, an unknown member, a `to` that is not a wallet address), then title, body, path.
 * `extraAllowed` are members that may be present and are not content (legacy JWT claims).
 */
export function validateFields(value: unknown, oneUser: boolean, extraAllowed: readonly string[] = []): NotificationFields {
  if (!isPlainObject(value)) throw new ApiError('invalid_request', 'body is not a JSON object');
  const allowed = oneUser ? ['to', 'title', 'body', 'path'] : ['title', 'body', 'path'];
  for (const name of Object.keys(value)) {
    if (!allowed.includes(name) && !extraAllowed.includes(name)) throw new ApiError('invalid_request', 'unknown member'); // its name is body content: never logged
  }
  const fields: NotificationFields = { title: '', body: '', path: '/' };
  if (oneUser) {
    if (!isWalletAddress(value['to'])) throw new ApiError('invalid_request', '`to` is not a wallet address');
    fields.to = value['to'];
  }
  fields.title = text(value['title'], 'invalid_title', TITLE_MAX_CHARS);
  fields.body = text(value['body'], 'invalid_body', BODY_MAX_CHARS);
  fields.path = checkPath(value['path']);
  return fields;
}

/**
 * A browser PushSubscription JSON: `{endpoint, keys: {p256dh, auth}}`, optionally
 * `expirationTime` (null or a number, ignored). The endpoint must be an allowed `https:` URL,
 * p256dh a P-256 point, auth 16 bytes. Returns the stored form (base64url without padding).
 */
export function validateSubscription(value: unknown, hosts: readonly string[]): StoredSubscription {
  if (!isPlainObject(value)) throw new ApiError('invalid_request', 'subscription is not an object');
  for (const name of Object.keys(value)) {
    if (!['endpoint', 'keys', 'expirationTime'].includes(name)) throw new ApiError('invalid_request', 'unknown subscription member');
  }
  const expiration = value['expirationTime'];
  if (expiration !== undefined && expiration !== null && typeof expiration !== 'number') throw new ApiError('invalid_request', 'bad expirationTime');
  const endpoint = value['endpoint'];
  if (allowedEndpoint(endpoint, hosts) === null) throw new ApiError('invalid_request', 'endpoint is not an allowed https push service URL');
  const keys = value['keys'];
  if (!isPlainObject(keys) || Object.keys(keys).some((k) => k !== 'p256dh' && k !== 'auth')) throw new ApiError('invalid_request', 'bad subscription keys');
  const p256dh = decodeBase64Url(keys['p256dh']);
  const auth = decodeBase64Url(keys['auth']);
  if (!p256dh || !validP256dh(p256dh)) throw new ApiError('invalid_request', 'p256dh is not a P-256 public key');
  if (!auth || auth.length !== 16) throw new ApiError('invalid_request', 'auth is not 16 bytes');
  return { endpoint: endpoint as string, keys: { p256dh: p256dh.toString('base64url'), auth: auth.toString('base64url') } };
}

/** An Idempotency-Key header value: 1 to 255 visible ASCII characters. */
export function isIdempotencyKey(value: unknown): value is string {
  return typeof value === 'string' && IDEMPOTENCY_KEY.test(value);
}

/*
 * JSON Schemas (2020-12, as OpenAPI 3.1 uses them) of what the hand-written checks above accept,
 * published by src/http/openapi.ts. test/http/openapi.test.ts checks on examples that each
 * schema and its check accept and refuse the same values, except where a check goes beyond what
 * a schema can say (named in each description): those examples are listed as refused by the
 * check only. `x-maxUtf8Bytes` is this document's extension keyword: a string's UTF-8 length limit.
 */

/** Text trimmed (JS String.prototype.trim, the same set as `\s`) of 1 to `max` code points. */
function trimmedText(max: number, what: string) {
  return {
    type: 'string',
    pattern: `^\\s*\\S(?:[\\s\\S]{0,${max - 2}}\\S)?\\s*$`,
    description: `${what}: at most ${max} characters (code points) after trimming, not blank`,
  } as const;
}

export const walletAddressSchema = {
  type: 'string',
  minLength: 32,
  maxLength: 44,
  pattern: BASE58_TEXT.source,
  description: 'A wallet address: base58 of a 32-byte Ed25519 public key, in its canonical spelling (checked beyond this pattern: it must decode to exactly 32 bytes)',
} as const;

export const notificationPathSchema = {
  type: 'string',
  pattern: '^/(?!/)[^\\u0000-\\u001f\\u007f-\\u009f\\\\#]*$',
  maxLength: PATH_MAX_BYTES,
  'x-maxUtf8Bytes': PATH_MAX_BYTES,
  description: `A path on the app's origin: starts with "/" but not "//", at most ${PATH_MAX_BYTES} UTF-8 bytes, no control characters, backslash or "#"; a query is kept. Default "/"`,
} as const;

const notificationProperties = {
  title: trimmedText(TITLE_MAX_CHARS, 'Shown after the app name'),
  body: trimmedText(BODY_MAX_CHARS, 'Notification text'),
  path: notificationPathSchema,
} as const;

/** POST /api/push JSON body (validateFields with oneUser). */
export const notifyUserSchema = {
  type: 'object',
  required: ['to', 'title', 'body'],
  additionalProperties: false,
  properties: { to: walletAddressSchema, ...notificationProperties },
  description: 'The whole message must also fit one Web Push message (about 3.9 KB of UTF-8 with the app name and URL), else invalid_body',
} as const;

/** POST /api/push/broadcast JSON body (validateFields without `to`). */
export const notifyAudienceSchema = {
  type: 'object',
  required: ['title', 'body'],
  additionalProperties: false,
  properties: notificationProperties,
  description: notifyUserSchema.description,
} as const;

/** A browser PushSubscription JSON (validateSubscription). */
export const subscriptionSchema = {
  type: 'object',
  required: ['endpoint', 'keys'],
  additionalProperties: false,
  properties: {
    endpoint: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_ENDPOINT_CHARS,
      pattern: '^https://',
      description: 'An https: URL without credentials or fragment on a host allowed by PUSH_ENDPOINT_HOSTS (checked beyond this pattern)',
    },
    expirationTime: { type: ['number', 'null'], description: 'Ignored' },
    keys: {
      type: 'object',
      required: ['p256dh', 'auth'],
      additionalProperties: false,
      properties: {
        p256dh: {
          type: 'string',
          pattern: '^B[A-Za-z0-9_-]{86}={0,2}$',
          description: 'base64url of an uncompressed P-256 point (65 bytes, 0x04 first; checked beyond this pattern: on the curve)',
        },
        auth: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}={0,2}$', description: 'base64url of 16 bytes' },
      },
    },
  },
} as const;

/** The Idempotency-Key header (isIdempotencyKey). */
export const idempotencyKeySchema = {
  type: 'string',
  pattern: IDEMPOTENCY_KEY.source,
  description: '1 to 255 visible ASCII characters; per app, kept 24 h',
} as const;
