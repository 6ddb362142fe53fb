import type { Response } from 'express';
import { noteResult } from './observe.js';

/** Every error code an HTTP response can carry, with its status (DESIGN.md "HTTP"). The one place that maps errors to HTTP. */
const STATUS = {
  invalid_argument: 400,
  invalid_request: 400,
  invalid_title: 400,
  invalid_body: 400,
  invalid_path: 400,
  unauthenticated: 401,
  unauthorized: 403,
  app_not_verified: 403,
  push_not_declared: 403,
  push_muted: 403,
  not_your_user: 403,
  not_found: 404,
  unknown_user: 404,
  unknown_app: 404,
  ticket_conflict: 409,
  queue_conflict: 409,
  broadcast_not_configured: 409,
  unavailable: 503,
  push_not_enabled: 503,
  internal: 500,
} as const;

export type ErrorCode = keyof typeof STATUS;

/** A refusal to answer with `{"error": code}`; `detail` goes to the log, never to the caller. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail: string = code,
    readonly status: number = STATUS[code],
  ) {
    super(detail);
  }
}

/**
 * A refusal by one of the app's operator rate limits (`versus apps limits`): 429 with
 * `{"error":"unavailable"}` and `Retry-After` (whole seconds until the bucket has a token).
 * The spec's 503 stays for the service's own unavailability; 429 tells a limit apart.
 */
export class RateLimited extends ApiError {
  constructor(
    detail: string,
    readonly retryAfterMs: number,
  ) {
    super('unavailable', detail, 429);
  }
}

export function statusOf(code: ErrorCode): number {
  return STATUS[code];
}

export function sendError(res: Response, error: ApiError): void {
  if (res.headersSent) return;
  noteResult(res, error.code);
  if (error instanceof RateLimited) res.set('Retry-After', String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))));
  res.status(error.status).type('application/json').send(`{"error":${JSON.stringify(error.code)}}`);
}

/** `promise`, or 503 `unavailable` ("<what> timed out") when it has not settled within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new ApiError('unavailable', `${what} timed out`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
