import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { Counter, Histogram } from 'prom-client';
import { registeredOnce } from '../metrics/registry.js';
import type { ErrorCode } from './errors.js';

/**
 * Request observation: a request ID on every request (echoed in `X-Request-Id` and added to
 * every log line written while the request is handled), one access line per request at
 * completion, and the HTTP metrics in prom-client's default registry.
 *
 * What is recorded about a request is only: its ID, method, route pattern, operation, the
 * authenticated app's origin, the result code, the HTTP status and the duration. Handlers add
 * the app and the matchmaking operation (noteApp, noteMatchmakingOperation) and sendError adds
 * the error code (noteResult); nothing else about a request is ever logged here: no headers,
 * tokens, keys, bodies, payloads, endpoints, subscriptions or signatures.
 */

export const REQUEST_ID_HEADER = 'X-Request-Id';

/**
 * A caller's `X-Request-Id` is kept when it is 1 to 128 of `A-Za-z0-9 . _ : -` (a UUID, a
 * proxy's or a tracer's ID); anything else (longer, other characters, several headers, which
 * Node joins with ", ") is replaced by a fresh UUID, so a log line never carries unbounded or
 * control text from a caller.
 */
export const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The three matchmaking operations (the `operation` member of the envelope). */
export const MATCHMAKING_OPERATIONS = ['createTicket', 'listTickets', 'cancelTicket'] as const;

/**
 * The operation of every other route, by `METHOD path`: the metrics' `operation` label, the
 * access line's `operation` and the OpenAPI document's operationId. The matchmaking route's
 * operation comes from its body; a request whose operation is not known is `other`.
 */
export const ROUTE_OPERATIONS: Readonly<Record<string, string>> = {
  'GET /healthz': 'health',
  'GET /readyz': 'ready',
  'GET /metrics': 'metrics',
  'GET /openapi.json': 'openapi',
  'POST /api/push': 'notifyUser',
  'POST /api/push/broadcast': 'notifyAudience',
  'POST /api/host/subscriptions': 'hostSubscribe',
  'POST /api/host/subscriptions/remove': 'hostUnsubscribe',
  'POST /api/host/visits': 'hostVisit',
  'POST /api/host/mutes': 'hostMute',
  'GET /api/host/vapid-public-key': 'hostVapidPublicKey',
};

/** Route label of a request that matched no route (answered 404 `not_found`). */
export const UNMATCHED_ROUTE = 'unmatched';
/** Result code of a request whose client went away before the response was complete. */
export const ABORTED = 'aborted';

export type ResultCode = 'ok' | ErrorCode | typeof ABORTED | 'other';

interface RequestContext {
  id: string;
  started: bigint;
  app?: string;
  operation?: string;
  code?: ErrorCode;
}

const contexts = new WeakMap<Response, RequestContext>();
const current = new AsyncLocalStorage<RequestContext>();

const withIds = new WeakSet<Logger>();

/**
 * A logger that adds `requestId` to every line written while a request is handled (the error
 * handler's lines, the push queue's warnings, the access line), whoever holds the logger.
 */
export function withRequestIds(logger: Logger): Logger {
  if (withIds.has(logger)) return logger;
  const child = logger.child(
    {},
    {
      formatters: {
        log: (object: object) => {
          const id = current.getStore()?.id;
          return id === undefined ? object : { requestId: id, ...object };
        },
      },
    },
  );
  withIds.add(child);
  return child;
}

/** The app a request authenticated as (its origin goes on the access line, never in metrics). */
export function noteApp(res: Response, origin: string): void {
  const context = contexts.get(res);
  if (context) context.app = origin;
}

/** The matchmaking envelope's operation, when it is one of the three. */
export function noteMatchmakingOperation(res: Response, body: unknown): void {
  const context = contexts.get(res);
  if (!context || typeof body !== 'object' || body === null) return;
  const operation = (body as { operation?: unknown }).operation;
  if ((MATCHMAKING_OPERATIONS as readonly unknown[]).includes(operation)) context.operation = operation as string;
}

/** The error code a refusal answered (called by sendError). */
export function noteResult(res: Response, code: ErrorCode): void {
  const context = contexts.get(res);
  if (context) context.code = code;
}

const LABELS = ['route', 'operation', 'code'] as const;
type Label = (typeof LABELS)[number];

/** Requests answered, by route pattern, operation and result code (`ok` or the error code). */
export const httpRequests = registeredOnce(
  'versus_http_requests_total',
  () =>
    new Counter<Label>({
      name: 'versus_http_requests_total',
      help: 'HTTP requests answered, by route pattern, operation and result code (ok or the error code)',
      labelNames: LABELS,
    }),
);

/** Time from the request's arrival at express to the end of its response, same labels. */
export const httpRequestDuration = registeredOnce(
  'versus_http_request_duration_seconds',
  () =>
    new Histogram<Label>({
      name: 'versus_http_request_duration_seconds',
      help: 'HTTP request duration in seconds, by route pattern, operation and result code',
      labelNames: LABELS,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
);

/** The matched route's pattern (never the raw path), or null when no route matched. */
function routeOf(req: Request): string | null {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? path : null;
}

function operationOf(req: Request, route: string | null, context: RequestContext): string {
  if (context.operation !== undefined) return context.operation;
  if (route === null) return 'other';
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  return ROUTE_OPERATIONS[`${method} ${route}`] ?? 'other';
}

function complete(req: Request, res: Response, context: RequestContext, logger: Logger): void {
  const seconds = Number(process.hrtime.bigint() - context.started) / 1e9;
  const route = routeOf(req);
  const operation = operationOf(req, route, context);
  const finished = res.writableFinished;
  const code: ResultCode = !finished ? ABORTED : (context.code ?? (res.statusCode < 400 ? 'ok' : 'other'));
  const labels = { route: route ?? UNMATCHED_ROUTE, operation, code };
  httpRequests.inc(labels);
  httpRequestDuration.observe(labels, seconds);
  const line = {
    method: req.method,
    route,
    operation,
    ...(context.app === undefined ? {} : { app: context.app }),
    code,
    status: res.headersSent ? res.statusCode : null,
    durationMs: Math.round(seconds * 1e6) / 1e3,
  };
  current.run(context, () => logger.info(line, 'request'));
}

/**
 * The first middleware of every HTTP face: assigns the request ID (X-Request-Id rules above),
 * sets the response header before anything can answer, runs the rest of the request inside its
 * context, and writes the access line and the metrics once the response is finished (or the
 * client went away: code `aborted`).
 */
export function observeRequests(logger: Logger) {
  const log = withRequestIds(logger);
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers['x-request-id'];
    const id = typeof header === 'string' && SAFE_REQUEST_ID.test(header) ? header : randomUUID();
    const context: RequestContext = { id, started: process.hrtime.bigint() };
    contexts.set(res, context);
    res.setHeader(REQUEST_ID_HEADER, id);
    let done = false;
    const end = () => {
      if (done) return;
      done = true;
      complete(req, res, context, log);
    };
    res.once('finish', end);
    res.once('close', end);
    current.run(context, next);
  };
}
