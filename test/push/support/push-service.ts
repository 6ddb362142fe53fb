import { randomUUID, type ECDH } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loopbackCertificate, receiverKeys, type LoopbackCertificate } from '../../../src/push/dev-push-service.js';

/** The receiving side's crypto lives in src (versus dev uses it too). */
export { decryptMessage, verifyVapid } from '../../../src/push/dev-push-service.js';

/**
 * A loopback HTTPS server that plays a browser's push service (RFC 8030): it answers
 * `POST /push/<token>` with 201, or with what a test scripted, and keeps every message it
 * accepted. "Accepted" means answered 2xx: a request it held and then dropped was never
 * accepted, as with a real push service that never acknowledged it.
 */

let certificate: LoopbackCertificate | null = null;

/** A self-signed certificate for 127.0.0.1 (openssl), made once per test process. */
export function testCertificate(): LoopbackCertificate {
  certificate ??= loopbackCertificate(mkdtempSync(join(tmpdir(), 'versus-push-')), 2);
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
    const { ecdh, authSecret, keys } = receiverKeys();
    const token = randomUUID();
    const endpoint = `${this.url}/push/${token}`;
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
