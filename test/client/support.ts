import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import { afterEach, beforeEach, vi } from 'vitest';
import { generateKeyPair, parsePublicKey, publicKeyObject } from '../../src/shared/ed25519.js';

/** The variables the client reads. Tests set them; every test starts without them and restores them after. */
export const CLIENT_ENV = ['SERVICE_APP_KEY', 'SERVICE_PUSH_KEY', 'SERVICE_API_URL'] as const;

export function isolateClientEnv(): void {
  let saved: Record<string, string | undefined> = {};
  beforeEach(() => {
    saved = Object.fromEntries(CLIENT_ENV.map((name) => [name, process.env[name]]));
    for (const name of CLIENT_ENV) delete process.env[name];
  });
  afterEach(() => {
    for (const name of CLIENT_ENV) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });
}

export interface SentRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  redirect: RequestInit['redirect'];
  signal: AbortSignal | undefined;
}

export type FetchHandler = (request: SentRequest) => Response | Promise<Response>;

/**
 * Replaces the global fetch for one test (restored by vi.unstubAllGlobals after each test);
 * records what the client sent.
 */
export function stubFetch(handler: FetchHandler = () => json(200, {})): SentRequest[] {
  const sent: SentRequest[] = [];
  const fake = vi.fn(async (input: string | URL | Request, init: RequestInit = {}) => {
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const request: SentRequest = {
      url: String(input),
      method: init.method ?? 'GET',
      headers,
      body: typeof init.body === 'string' ? init.body : String(init.body),
      redirect: init.redirect,
      signal: init.signal ?? undefined,
    };
    sent.push(request);
    return handler(request);
  });
  vi.stubGlobal('fetch', fake);
  return sent;
}

export function restoreFetch(): void {
  afterEach(() => {
    vi.unstubAllGlobals();
  });
}

export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

export function text(status: number, body: string | Uint8Array, contentType = 'application/json'): Response {
  return new Response(body, { status, headers: { 'content-type': contentType } });
}

export function newKey(): { secretKey: string; publicKey: string } {
  return generateKeyPair();
}

/** Verifies a compact JWT with a base58 public key; returns header and claims. */
export async function verifyJwt(token: string, publicKeyBase58: string): Promise<{ header: Record<string, unknown>; claims: JWTPayload }> {
  const key = publicKeyObject(parsePublicKey(publicKeyBase58)!);
  const { payload, protectedHeader } = await jwtVerify(token, key, { algorithms: ['EdDSA'] });
  return { header: protectedHeader as Record<string, unknown>, claims: payload };
}

export function bearer(request: SentRequest): string {
  const match = /^Bearer (.+)$/.exec(request.headers['authorization'] ?? '');
  if (!match) throw new Error(`no bearer token in ${JSON.stringify(request.headers)}`);
  return match[1]!;
}

export function peekJwt(token: string): { header: Record<string, unknown>; claims: JWTPayload } {
  return { header: decodeProtectedHeader(token) as Record<string, unknown>, claims: decodeJwt(token) };
}

export const ORIGIN = 'https://game.example';
