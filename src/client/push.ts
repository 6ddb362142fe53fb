import { SignJWT } from 'jose';
import { parsePublicKey, parseSecretKey, privateKeyObject } from '../shared/ed25519.js';
import { utf8Length } from '../shared/json.js';
import { CLIENT_TOKEN_LIFETIME_S, LEGACY_BROADCAST_TYP, LEGACY_PUSH_AUD, LEGACY_PUSH_TYP } from '../shared/protocol.js';
import { signAppToken } from '../shared/tokens.js';
import { checkAppOrigin, checkApiUrl, checkSecretKey, ConfigProblem, resolveApiUrl } from './config.js';
import { PushError } from './errors.js';
import { MalformedReply, parseJsonBytes } from './replies.js';
import { post, TransportFailure } from './transport.js';

interface CommonNotification {
  /** The app's canonical HTTPS origin, matching its signed manifest. */
  origin: string;
  /** Shown after the app's name; trimmed; nonempty; at most 120 characters. */
  title: string;
  /** Notification text; trimmed; nonempty; at most 1000 characters. */
  body: string;
  /** Path on the app's origin opened on tap: starts with `/`, not `//`. Default `/`. */
  path?: string;
  /** Sent as the `Idempotency-Key` header: a retry with the same key returns the first answer. */
  idempotencyKey?: string;
  /** The API origin; default SERVICE_API_URL, else the production API. */
  apiUrl?: string;
}

export interface NotifyUserOptions extends CommonNotification {
  /** The recipient's wallet address (base58 of a 32-byte Ed25519 public key). */
  to: string;
}

export type NotifyAudienceOptions = CommonNotification;

/** The service accepted the notification for delivery (not a proof that a device showed it). */
export interface NotificationReceipt {
  id: string;
}

/** Longest title and body, in characters (code points) after trimming; longest path in UTF-8 bytes. */
export const NOTIFICATION_LIMITS = { titleChars: 120, bodyChars: 1000, pathBytes: 2048 } as const;

const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;
const COMMON_KEYS = ['origin', 'title', 'body', 'path', 'idempotencyKey', 'apiUrl'];

type Mode = { mode: 'app'; key: string } | { mode: 'legacy'; key: string };

/**
 * How to authenticate, read at each call: with SERVICE_APP_KEY set, the shared app JWT; with
 * only SERVICE_PUSH_KEY set, the legacy signed-body JWT. A set but empty or malformed key
 * fails (it does not fall through to the other variable).
 */
function selectMode(env: NodeJS.ProcessEnv = process.env): Mode {
  const appKey = env['SERVICE_APP_KEY'];
  const pushKey = env['SERVICE_PUSH_KEY'];
  try {
    if (appKey !== undefined) {
      checkSecretKey(appKey, 'SERVICE_APP_KEY');
      return { mode: 'app', key: appKey };
    }
    if (pushKey !== undefined) {
      checkSecretKey(pushKey, 'SERVICE_PUSH_KEY');
      return { mode: 'legacy', key: pushKey };
    }
  } catch (error) {
    if (error instanceof ConfigProblem) throw new PushError('unauthenticated', null, error.message);
    throw error;
  }
  throw new PushError('unauthenticated', null, 'no app key: set SERVICE_APP_KEY (or the legacy SERVICE_PUSH_KEY)');
}

function trimmedText(value: unknown, code: 'invalid_title' | 'invalid_body', what: string, maxChars: number): string {
  if (typeof value !== 'string') throw new PushError(code, null, `${what} must be a string`);
  const text = value.trim();
  if (text === '') throw new PushError(code, null, `${what} is empty`);
  if (!text.isWellFormed()) throw new PushError(code, null, `${what} has a lone surrogate`);
  if ([...text].length > maxChars) throw new PushError(code, null, `${what} is longer than ${maxChars} characters`);
  return text;
}

function checkPath(value: unknown): string {
  if (typeof value !== 'string') throw new PushError('invalid_path', null, 'path must be a string');
  if (!value.startsWith('/') || value.startsWith('//')) throw new PushError('invalid_path', null, 'path must start with "/" and not "//"');
  if (utf8Length(value) > NOTIFICATION_LIMITS.pathBytes) throw new PushError('invalid_path', null, `path is longer than ${NOTIFICATION_LIMITS.pathBytes} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f\\#]/.test(value) || !value.isWellFormed()) {
    throw new PushError('invalid_path', null, 'path must not contain control characters, backslashes or a fragment');
  }
  return value;
}

interface Prepared {
  origin: string;
  apiUrl: string;
  mode: Mode;
  fields: { to?: string; title: string; body: string; path?: string };
  idempotencyKey: string | undefined;
}

/** Every local check, synchronously, in the service's order: options, key, `to`, title, body, path. */
function prepare(options: unknown, oneUser: boolean): Prepared {
  if (typeof options !== 'object' || options === null) throw new PushError('invalid_request', null, 'options must be an object');
  const record = options as Record<string, unknown>;
  const allowed = oneUser ? [...COMMON_KEYS, 'to'] : COMMON_KEYS;
  for (const name of Object.keys(record)) {
    if (!allowed.includes(name)) throw new PushError('invalid_request', null, `unknown option ${JSON.stringify(name)}`);
  }
  let origin: string;
  let apiUrl: string;
  try {
    origin = checkAppOrigin(record['origin']);
    apiUrl = record['apiUrl'] === undefined ? resolveApiUrl(undefined) : checkApiUrl(record['apiUrl'], 'apiUrl');
  } catch (error) {
    if (error instanceof ConfigProblem) throw new PushError('invalid_request', null, error.message);
    throw error;
  }
  const mode = selectMode();
  const fields: Prepared['fields'] = { title: '', body: '' };
  if (oneUser) {
    const to = record['to'];
    if (typeof to !== 'string' || !BASE58.test(to) || parsePublicKey(to) === null) {
      throw new PushError('invalid_request', null, '`to` must be a wallet address (base58 of a 32-byte public key)');
    }
    fields.to = to;
  }
  fields.title = trimmedText(record['title'], 'invalid_title', 'title', NOTIFICATION_LIMITS.titleChars);
  fields.body = trimmedText(record['body'], 'invalid_body', 'body', NOTIFICATION_LIMITS.bodyChars);
  if (record['path'] !== undefined) fields.path = checkPath(record['path']);
  const idempotencyKey = record['idempotencyKey'];
  if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(idempotencyKey))) {
    throw new PushError('invalid_request', null, 'idempotencyKey must be 1 to 255 visible ASCII characters');
  }
  return { origin, apiUrl, mode, fields, idempotencyKey };
}

/**
 * The legacy signed-body token (spec section 5): EdDSA, `typ` service-push+jwt (one user) or
 * service-push-broadcast+jwt (audience), `iss` the origin, `aud` service-push, `sub` the
 * recipient for one user, claims title, body and path when given, 60-second lifetime.
 */
export async function signLegacyPushToken(
  secretKey: string,
  origin: string,
  fields: { to?: string; title: string; body: string; path?: string },
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<string> {
  const pair = parseSecretKey(secretKey);
  if (!pair) throw new PushError('unauthenticated', null, 'malformed legacy push key');
  const claims: Record<string, string> = { title: fields.title, body: fields.body };
  if (fields.path !== undefined) claims['path'] = fields.path;
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', typ: fields.to === undefined ? LEGACY_BROADCAST_TYP : LEGACY_PUSH_TYP })
    .setIssuer(origin)
    .setAudience(LEGACY_PUSH_AUD)
    .setIssuedAt(nowSeconds)
    .setExpirationTime(nowSeconds + CLIENT_TOKEN_LIFETIME_S);
  if (fields.to !== undefined) jwt.setSubject(fields.to);
  return jwt.sign(privateKeyObject(pair));
}

async function send(prepared: Prepared, route: '/api/push' | '/api/push/broadcast'): Promise<NotificationReceipt> {
  const headers: Record<string, string> = { accept: 'application/json' };
  let body: string;
  try {
    if (prepared.mode.mode === 'app') {
      headers['content-type'] = 'application/json';
      headers['authorization'] = `Bearer ${await signAppToken(prepared.mode.key, prepared.origin)}`;
      body = JSON.stringify(prepared.fields);
    } else {
      headers['content-type'] = 'application/jwt';
      body = await signLegacyPushToken(prepared.mode.key, prepared.origin, prepared.fields);
    }
  } catch (error) {
    if (error instanceof PushError) throw error;
    throw new PushError('unauthenticated', null, 'the key cannot sign a token', { cause: error });
  }
  if (prepared.idempotencyKey !== undefined) headers['idempotency-key'] = prepared.idempotencyKey;

  let reply;
  try {
    reply = await post(`${prepared.apiUrl}${route}`, headers, body);
  } catch (error) {
    if (!(error instanceof TransportFailure)) throw error;
    const code = error.kind === 'too_large' ? 'invalid_response' : 'unavailable';
    throw new PushError(code, error.status, `${error.message}; the notification may have been accepted`, { cause: error });
  }
  const { status } = reply;
  let value: unknown;
  try {
    value = parseJsonBytes(reply.body);
  } catch (error) {
    if (!(error instanceof MalformedReply)) throw error;
    throw new PushError('invalid_response', status, `HTTP ${status}, ${error.message}`);
  }
  const record = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  if (status >= 200 && status < 300) {
    if (typeof record['id'] === 'string' && record['id'] !== '') return { id: record['id'] };
    throw new PushError('invalid_response', status, `HTTP ${status} without a notification id; the notification may have been accepted`);
  }
  const reason = record['error'];
  if (typeof reason === 'string' && reason !== '') throw new PushError(reason, status, `notification refused (HTTP ${status})`);
  throw new PushError('invalid_response', status, `HTTP ${status} without an error code`);
}

/**
 * Asks the service to notify one user (by wallet address). Resolves when the service accepted
 * it for delivery. Throws PushError: the service's reason for a refusal, or a local one
 * (status null). Never retried automatically: a lost reply may hide an accepted notification.
 */
export async function notifyUser(options: NotifyUserOptions): Promise<NotificationReceipt> {
  return send(prepare(options, true), '/api/push');
}

/** Asks the service to notify the app's configured recent-user audience. See notifyUser. */
export async function notifyAudience(options: NotifyAudienceOptions): Promise<NotificationReceipt> {
  return send(prepare(options, false), '/api/push/broadcast');
}
