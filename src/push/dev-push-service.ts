import { execFileSync } from 'node:child_process';
import { createDecipheriv, createECDH, createPublicKey, hkdfSync, randomBytes, randomUUID, X509Certificate, type ECDH } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { decodeProtectedHeader, importJWK, jwtVerify } from 'jose';

/**
 * The receiving side of Web Push, for local development (`versus dev`) and the tests: what a
 * browser and its push service do with a message Versus sends.
 *
 *  - `decryptMessage`: RFC 8291 (aes128gcm, RFC 8188) decryption with a subscription's keys;
 *  - `verifyVapid`: the push service's check of the VAPID authorization (RFC 8292);
 *  - `loopbackCertificate`: a self-signed certificate for 127.0.0.1 (push endpoints are https);
 *  - `DevPushService`: a loopback HTTPS stand-in for a browser push service that verifies,
 *    decrypts and prints each message to a subscription it created.
 *
 * Encryption is web-push's (src/push/sender.ts); decryption uses node:crypto's HKDF and
 * AES-128-GCM directly, as RFC 8291 section 3.4 describes.
 */

/** A browser's keys for one subscription: its P-256 key pair and 16-byte auth secret. */
export interface ReceiverKeys {
  ecdh: ECDH;
  authSecret: Buffer;
  /** As in PushSubscription.toJSON(): base64url of the public key and of the auth secret. */
  keys: { p256dh: string; auth: string };
}

/** New subscription keys, as a browser makes them for `pushManager.subscribe`. */
export function receiverKeys(): ReceiverKeys {
  const ecdh = createECDH('prime256v1');
  const publicKey = ecdh.generateKeys();
  const authSecret = randomBytes(16);
  return { ecdh, authSecret, keys: { p256dh: publicKey.toString('base64url'), auth: authSecret.toString('base64url') } };
}

function hkdf(salt: Buffer, ikm: Buffer, info: Buffer | string, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', ikm, salt, typeof info === 'string' ? Buffer.from(info, 'latin1') : info, length));
}

/** Decrypts an aes128gcm Web Push message body (RFC 8188 + RFC 8291) with the subscription's keys; throws on anything malformed. */
export function decryptMessage(body: Buffer, receiver: { ecdh: ECDH; authSecret: Buffer }): string {
  if (body.length < 21) throw new Error('shorter than an aes128gcm header');
  const salt = body.subarray(0, 16);
  const recordSize = body.readUInt32BE(16);
  const idLength = body[20]!;
  if (idLength !== 65) throw new Error('the key id is not a P-256 public key');
  const senderPublic = body.subarray(21, 21 + idLength);
  const record = body.subarray(21 + idLength);
  if (record.length < 17) throw new Error('no record');
  if (record.length > recordSize) throw new Error('more than one record');
  const receiverPublic = receiver.ecdh.getPublicKey();
  const shared = receiver.ecdh.computeSecret(senderPublic);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0', 'latin1'), receiverPublic, senderPublic]);
  const ikm = hkdf(receiver.authSecret, shared, keyInfo, 32);
  const cek = hkdf(salt, ikm, 'Content-Encoding: aes128gcm\0', 16);
  const nonce = hkdf(salt, ikm, 'Content-Encoding: nonce\0', 12);
  const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
  decipher.setAuthTag(record.subarray(record.length - 16));
  const padded = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (padded[end] !== 2) throw new Error('missing last-record delimiter');
  return padded.subarray(0, end).toString('utf8');
}

/**
 * Checks a message's VAPID authorization (RFC 8292): `vapid t=<JWT>, k=<public key>`, k the
 * configured key, the JWT ES256-signed by it, aud the push service's origin, sub the subject,
 * expiring within 24 h. Returns the JWT claims; throws with the reason otherwise.
 */
export async function verifyVapid(message: { headers: IncomingHttpHeaders }, publicKey: string, audience: string, subject: string): Promise<Record<string, unknown>> {
  const header = message.headers['authorization'];
  const match = /^vapid t=([A-Za-z0-9_.-]+), ?k=([A-Za-z0-9_-]+)$/.exec(String(header));
  if (!match) throw new Error('no VAPID authorization');
  const [, jwt, k] = match;
  if (k !== publicKey) throw new Error('k is not the configured VAPID public key');
  const raw = Buffer.from(k!, 'base64url');
  const jwk = { kty: 'EC', crv: 'P-256', x: raw.subarray(1, 33).toString('base64url'), y: raw.subarray(33).toString('base64url') };
  createPublicKey({ key: jwk, format: 'jwk' });
  if (decodeProtectedHeader(jwt!).alg !== 'ES256') throw new Error('VAPID JWT is not ES256');
  const { payload } = await jwtVerify(jwt!, await importJWK(jwk, 'ES256'), { audience, subject });
  const now = Math.floor(Date.now() / 1000);
  if (typeof payload.exp !== 'number' || payload.exp <= now || payload.exp > now + 24 * 3600) throw new Error('VAPID exp out of range');
  return payload as Record<string, unknown>;
}

export interface LoopbackCertificate {
  cert: string;
  key: string;
  /** The certificate's file: NODE_EXTRA_CA_CERTS for a process that must trust it. */
  certPath: string;
}

/** openssl is missing or failed: the certificate cannot be made. */
export class CertificateError extends Error {}

/**
 * A self-signed certificate for 127.0.0.1 in `dir` (cert.pem, key.pem), made with the openssl
 * binary unless one is there that is valid for at least another day.
 */
export function loopbackCertificate(dir: string, days = 365): LoopbackCertificate {
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  if (existsSync(certPath) && existsSync(keyPath)) {
    try {
      const cert = readFileSync(certPath, 'utf8');
      const x509 = new X509Certificate(cert);
      if (Date.parse(x509.validTo) > Date.now() + 86_400_000 && x509.checkIP('127.0.0.1') !== undefined) {
        return { cert, key: readFileSync(keyPath, 'utf8'), certPath };
      }
    } catch {
      // Unreadable: made again below.
    }
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', keyPath, '-out', certPath, '-days', String(days), '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1',
    ], { stdio: 'ignore' });
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new CertificateError(missing ? 'openssl is not installed' : `openssl failed: ${(error as Error).message}`);
  }
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath };
}

/** Text for one terminal line: JSON-quoted, with every control or format character escaped. */
function quoted(text: string): string {
  return JSON.stringify(text).replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The line printed for a decrypted notification (Versus sends `{id, title, body, url, origin}`). */
export function describeNotification(wallet: string, text: string): string {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    message = null;
  }
  if (message !== null && typeof message === 'object' && !Array.isArray(message)) {
    const { title, body, url } = message as Record<string, unknown>;
    if (typeof title === 'string' && typeof body === 'string' && typeof url === 'string') {
      return `to wallet ${wallet}: ${quoted(title)} ${quoted(body)} (opens ${quoted(url).slice(1, -1)})`;
    }
  }
  return `to wallet ${wallet}: ${quoted(text)}`;
}

/** The JSON a browser's PushSubscription.toJSON() gives. */
export interface SubscriptionJson {
  endpoint: string;
  expirationTime: null;
  keys: { p256dh: string; auth: string };
}

export interface DevPushServiceOptions {
  certificate: LoopbackCertificate;
  /** The VAPID key and subject the sender must use (the service's VAPID_PUBLIC_KEY and VAPID_SUBJECT). */
  vapid: { publicKey: string; subject: string };
  /** Receives one line per request; never a key. */
  print: (line: string) => void;
}

/** Largest body a push service must accept (RFC 8030 section 7.2: 4096 bytes); a little more is read to tell. */
const MAX_BODY = 4096;

/**
 * A loopback stand-in for a browser's push service (RFC 8030), for `versus dev`: it serves
 * `POST /push/<token>` over HTTPS on 127.0.0.1 for the subscriptions it created. A message
 * with a valid VAPID authorization for this service, `Content-Encoding: aes128gcm` and a
 * body that decrypts with the subscription's keys is printed (`describeNotification`) and
 * answered 201, as a push service that accepted it; else 401 (VAPID), 400 (encryption), 404
 * (no such subscription), 413 (over 4096 bytes), each printed with the reason.
 */
export class DevPushService {
  private readonly subscriptions = new Map<string, { wallet: string; receiver: ReceiverKeys }>();

  private constructor(
    private readonly server: Server,
    private readonly options: DevPushServiceOptions,
    /** https://127.0.0.1:<port>: also the VAPID audience. */
    readonly url: string,
    readonly port: number,
  ) {}

  static async start(options: DevPushServiceOptions): Promise<DevPushService> {
    let service: DevPushService | null = null;
    const server = createServer({ cert: options.certificate.cert, key: options.certificate.key }, (req, res) => service!.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    service = new DevPushService(server, options, `https://127.0.0.1:${port}`, port);
    return service;
  }

  /** The PUSH_ENDPOINT_HOSTS entry that allows this service's endpoints. */
  get hostEntry(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** A new subscription for `wallet` with fresh keys; returns the JSON to register with the host endpoint. */
  subscribe(wallet: string): SubscriptionJson {
    const token = randomUUID();
    const receiver = receiverKeys();
    this.subscriptions.set(token, { wallet, receiver });
    return { endpoint: `${this.url}/push/${token}`, expirationTime: null, keys: receiver.keys };
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('end', () => {
      this.answer(req, size > MAX_BODY ? null : Buffer.concat(chunks)).then(
        ({ status, line }) => {
          this.options.print(line);
          res.writeHead(status, status === 201 ? { location: `${this.url}/message/${randomUUID()}` } : {}).end();
        },
        () => res.writeHead(500).end(),
      );
    });
  }

  private async answer(req: IncomingMessage, body: Buffer | null): Promise<{ status: number; line: string }> {
    const path = req.url ?? '';
    const match = /^\/push\/([0-9a-f-]{36})$/.exec(path);
    const subscription = match ? this.subscriptions.get(match[1]!) : undefined;
    const refused = (status: number, reason: string) => ({ status, line: `refused ${req.method} ${quoted(path.slice(0, 80)).slice(1, -1)}: ${status} ${reason}` });
    if (req.method !== 'POST' || !subscription) return refused(404, 'no such subscription');
    if (body === null) return refused(413, 'body over 4096 bytes');
    try {
      await verifyVapid(req, this.options.vapid.publicKey, this.url, this.options.vapid.subject);
    } catch (error) {
      return refused(401, `VAPID: ${(error as Error).message}`);
    }
    if (req.headers['content-encoding'] !== 'aes128gcm') return refused(400, 'Content-Encoding is not aes128gcm');
    if (!/^\d+$/.test(String(req.headers['ttl']))) return refused(400, 'no TTL');
    let text: string;
    try {
      text = decryptMessage(body, subscription.receiver);
    } catch (error) {
      return refused(400, `does not decrypt: ${(error as Error).message}`);
    }
    return { status: 201, line: describeNotification(subscription.wallet, text) };
  }
}
