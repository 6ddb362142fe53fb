import { execFileSync } from 'node:child_process';
import { createECDH, createPublicKey, hkdfSync, createDecipheriv, randomBytes, randomUUID, type ECDH } from 'node:crypto';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importJWK, jwtVerify, decodeProtectedHeader } from 'jose';

/**
 * A loopback HTTPS server that plays a browser's push service (RFC 8030): it answers
 * `POST /push/<token>` with 201, or with what a test scripted, and keeps every message it
 * accepted. "Accepted" means answered 2xx: a request it held and then dropped was never
 * accepted, as with a real push service that never acknowledged it.
 */

let certificate: { cert: string; key: string; certPath: string } | null = null;

/** A self-signed certificate for 127.0.0.1 (openssl), made once per test process. */
export function testCertificate(): { cert: string; key: string; certPath: string } {
  if (certificate) return certificate;
  const dir = mkdtempSync(join(tmpdir(), 'versus-push-'));
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyPath, '-out', certPath, '-days', '2', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1',
  ], { stdio: 'ignore' });
  if (!existsSync(certPath)) throw new Error('openssl did not write the test certificate');
  certificate = { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath };
  return certificate;
}

export interface PushMessage {
  token: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/** A browser's side of one subscription: the PushSubscription JSON and the keys to read messages. */
export interface BrowserSubscription {
  token: string;
  endpoint: string;
  keys: { p256dh: string; auth: string };
  ecdh: ECDH;
  authSecret: Buffer;
  /** The JSON a browser's PushSubscription.toJSON() gives. */
  json(): { endpoint: string; expirationTime: null; keys: { p256dh: string; auth: string } };
}

export class PushService {
  /** Messages answered 2xx, in arrival order. */
  readonly accepted: PushMessage[] = [];
  /** Every request received (including refused and held ones). */
  received = 0;
  private readonly scripted = new Map<string, number[]>();
  private readonly always = new Map<string, number>();
  private holding = false;
  private holdAt: number | null = null;
  private readonly held: Array<{ req: IncomingMessage; res: ServerResponse }> = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly port: number,
  ) {}

  static async start(): Promise<PushService> {
    const { cert, key } = testCertificate();
    let service: PushService | null = null;
    const server = createServer({ cert, key }, (req, res) => service!.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const port = (server.address() as AddressInfo).port;
    service = new PushService(server, `https://127.0.0.1:${port}`, port);
    return service;
  }

  /** The value of PUSH_ENDPOINT_HOSTS that allows this service. */
  get hostEntry(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** A new subscription: a real P-256 key pair and a 16-byte auth secret, as a browser makes. */
  subscribe(): BrowserSubscription {
    const ecdh = createECDH('prime256v1');
    const publicKey = ecdh.generateKeys();
    const authSecret = randomBytes(16);
    const token = randomUUID();
    const endpoint = `${this.url}/push/${token}`;
    const keys = { p256dh: publicKey.toString('base64url'), auth: authSecret.toString('base64url') };
    return { token, endpoint, keys, ecdh, authSecret, json: () => ({ endpoint, expirationTime: null, keys }) };
  }

  /** The next answers for a subscription (then 201 again). */
  script(token: string, ...statuses: number[]): void {
    this.scripted.set(token, [...(this.scripted.get(token) ?? []), ...statuses]);
  }

  /** Answers every message to this subscription with `status` (e.g. 410: unsubscribed). */
  answerAlways(token: string, status: number): void {
    this.always.set(token, status);
  }

  /** From now on, requests are held unanswered until dropHeld() (a push service that stopped answering). */
  hold(): void {
    this.holding = true;
  }

  /** Holds every request that arrives once `accepted` messages have been accepted. */
  holdAfter(accepted: number): void {
    this.holdAt = accepted;
  }

  get heldCount(): number {
    return this.held.length;
  }

  /** Closes the held requests' connections without an answer (never accepted), and answers normally again. */
  dropHeld(): void {
    this.holding = false;
    this.holdAt = null;
    for (const { req } of this.held.splice(0)) req.socket.destroy();
  }

  messagesFor(token: string): PushMessage[] {
    return this.accepted.filter((m) => m.token === token);
  }

  /** Accepted messages per subscription token. */
  countsByToken(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const m of this.accepted) counts.set(m.token, (counts.get(m.token) ?? 0) + 1);
    return counts;
  }

  async close(): Promise<void> {
    this.dropHeld();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      this.received++;
      const match = /^\/push\/([0-9a-f-]+)$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !match) {
        res.writeHead(404).end();
        return;
      }
      if (this.holdAt !== null && this.accepted.length >= this.holdAt) this.holding = true;
      if (this.holding) {
        this.held.push({ req, res });
        return;
      }
      const token = match[1]!;
      const queue = this.scripted.get(token);
      const status = this.always.get(token) ?? (queue && queue.length > 0 ? queue.shift()! : 201);
      if (status >= 200 && status < 300) this.accepted.push({ token, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(status, status === 201 ? { location: `${this.url}/message/${randomUUID()}` } : {}).end();
    });
  }
}

function hkdf(salt: Buffer, ikm: Buffer, info: Buffer | string, length: number): Buffer {
  return Buffer.from(hkdfSync('sha256', ikm, salt, typeof info === 'string' ? Buffer.from(info, 'latin1') : info, length));
}

/** Decrypts an aes128gcm Web Push message body (RFC 8188 + RFC 8291) with the subscription's keys. */
export function decryptMessage(body: Buffer, subscription: BrowserSubscription): string {
  const salt = body.subarray(0, 16);
  const recordSize = body.readUInt32BE(16);
  const idLength = body[20]!;
  const senderPublic = body.subarray(21, 21 + idLength);
  const record = body.subarray(21 + idLength);
  if (record.length > recordSize) throw new Error('more than one record');
  const receiverPublic = subscription.ecdh.getPublicKey();
  const shared = subscription.ecdh.computeSecret(senderPublic);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0', 'latin1'), receiverPublic, senderPublic]);
  const ikm = hkdf(subscription.authSecret, shared, keyInfo, 32);
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
 * expiring within 24 h. Returns the JWT claims.
 */
export async function verifyVapid(message: PushMessage, publicKey: string, audience: string, subject: string): Promise<Record<string, unknown>> {
  const header = message.headers['authorization'];
  const match = /^vapid t=([A-Za-z0-9_.-]+), ?k=([A-Za-z0-9_-]+)$/.exec(String(header));
  if (!match) throw new Error(`not a VAPID authorization: ${header}`);
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
