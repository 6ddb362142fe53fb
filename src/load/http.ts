import http from 'node:http';
import https from 'node:https';
import { CLIENT_TOKEN_LIFETIME_S } from '../shared/protocol.js';
import { signAppToken } from '../shared/tokens.js';
import type { RequestResult } from './stats.js';

/** Largest reply body read; a ticket is a few KiB at most with the generator's payloads. */
const MAX_REPLY_BYTES = 4 * 1024 * 1024;

/** A reply as the generator needs it: HTTP status and parsed JSON (undefined when unreadable). */
export type RawOutcome = { status: number; body: unknown } | { status: null; code: 'network' | 'timeout' | 'too_large' | 'client_error' };

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Turns a reply to createTicket or cancelTicket into a result: 200 with a ticket is ok; a
 * refusal counts by its `{"error"}` code, else as `http_<status>`, except 429 (the app's
 * admission limit, `{"error":"unavailable"}`), which counts as `rate_limited` so it is told
 * apart from the service's 503; a 200 that is not a ticket is `invalid_response`.
 */
export function classifyTicketReply(outcome: RawOutcome): RequestResult {
  if (outcome.status === null) return { ok: false, code: outcome.code === 'too_large' ? 'invalid_response' : outcome.code };
  const body = outcome.body as { state?: unknown; match?: { id?: unknown }; error?: unknown } | null | undefined;
  if (outcome.status === 429) return { ok: false, code: 'rate_limited' };
  if (outcome.status !== 200) {
    const code = typeof body === 'object' && body !== null && typeof body.error === 'string' && body.error !== '' ? body.error : `http_${outcome.status}`;
    return { ok: false, code };
  }
  if (typeof body !== 'object' || body === null) return { ok: false, code: 'invalid_response' };
  const state = body.state;
  if (state === 'waiting' || state === 'cancelled') return { ok: true, state, matchId: null };
  if (state === 'matched' && typeof body.match === 'object' && body.match !== null && typeof body.match.id === 'string') {
    return { ok: true, state, matchId: body.match.id };
  }
  return { ok: false, code: 'invalid_response' };
}

/** POSTs JSON envelopes to one endpoint over keep-alive connections (at most `maxSockets`). */
export class Poster {
  private readonly transport: typeof http | typeof https;
  private readonly agent: http.Agent;

  constructor(
    readonly endpoint: URL,
    maxSockets: number,
  ) {
    this.transport = endpoint.protocol === 'https:' ? https : http;
    const options = { keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' as const };
    this.agent = endpoint.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
  }

  /** One POST; never rejects: a missing or late reply is `network` or `timeout`. */
  post(body: string, token: string, timeoutMs: number): Promise<RawOutcome> {
    return new Promise((resolve) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (outcome: RawOutcome): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const headers = {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        authorization: `Bearer ${token}`,
      };
      let request: http.ClientRequest;
      try {
        request = this.transport.request(this.endpoint, { method: 'POST', agent: this.agent, headers }, (response) => {
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_REPLY_BYTES) {
              finish({ status: null, code: 'too_large' });
              response.destroy();
              return;
            }
            chunks.push(chunk);
          });
          response.on('end', () => finish({ status: response.statusCode ?? 0, body: parseJson(Buffer.concat(chunks).toString('utf8')) }));
          response.on('error', () => finish({ status: null, code: 'network' }));
          response.on('close', () => {
            if (!response.complete) finish({ status: null, code: 'network' });
          });
        });
      } catch {
        // The request could not even be built: a fault of the generator, not of the API.
        finish({ status: null, code: 'client_error' });
        return;
      }
      timer = setTimeout(() => {
        finish({ status: null, code: 'timeout' });
        request.destroy();
      }, Math.max(1, timeoutMs));
      request.on('error', () => finish({ status: null, code: 'network' }));
      request.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/**
 * The app token, signed once and re-signed in the background well before it expires (the
 * shared app JWT lives 60 s), so no request waits for a signature.
 */
export class TokenSource {
  private token = '';
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly key: string,
    private readonly origin: string,
  ) {}

  static async start(key: string, origin: string): Promise<TokenSource> {
    const source = new TokenSource(key, origin);
    source.token = await signAppToken(key, origin);
    const refreshMs = (CLIENT_TOKEN_LIFETIME_S * 1000) / 2;
    source.timer = setInterval(() => {
      signAppToken(source.key, source.origin).then(
        (token) => (source.token = token),
        () => {},
      );
    }, refreshMs);
    source.timer.unref();
    return source;
  }

  get current(): string {
    return this.token;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
