import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from 'pino';
import { AuthError, authenticateApp } from '../apps/auth.js';
import type { AppRegistry } from '../apps/registry.js';
import type { Config } from '../config.js';
import { runOperation } from '../matchmaking/service.js';
import { metricsHandler } from '../metrics/metrics.js';
import type { MatchmakingStore } from '../matchmaking/store.js';
import { InvalidArgument, validateRequest } from '../matchmaking/validation.js';
import { createPushRouter } from '../push/routes.js';
import type { PushServices } from '../push/services.js';
import { isRedisUnavailableError, type RedisClient } from '../redis/connection.js';
import { MAX_JSON_DEPTH } from '../shared/json.js';
import { hasMediaType, MAX_BODY_BYTES, parseJsonBody } from './body.js';
import { ApiError, type ErrorCode, RateLimited, sendError } from './errors.js';
import { noteApp, noteMatchmakingOperation, observeRequests } from './observe.js';
import { serveOpenApi } from './openapi.js';

/** Everything a request handler may use; built once per process by server.ts. */
export interface Services {
  config: Config;
  redis: RedisClient;
  registry: AppRegistry;
  matchmaking: MatchmakingStore;
  logger: Logger;
  /** Notifications: the queue producer (api, all) and the worker (worker, all). */
  push?: PushServices;
}

/** Reads a body as bytes (parsed strictly later); an oversized body is refused with the area's code. */
function rawBody(invalidCode: ErrorCode) {
  const parse = express.raw({ type: () => true, limit: MAX_BODY_BYTES });
  return (req: Request, res: Response, next: NextFunction) => {
    parse(req, res, (error?: unknown) => {
      if (error === undefined || error === null) return next();
      const type = (error as { type?: string }).type;
      if (type === 'entity.too.large') return next(new ApiError(invalidCode, 'body too large', 413));
      return next(new ApiError(invalidCode, `unreadable body (${type ?? 'unknown'})`));
    });
  };
}

function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof AuthError) return new ApiError(error.code, error.message);
  if (error instanceof InvalidArgument) return new ApiError('invalid_argument', error.message);
  if (isRedisUnavailableError(error)) return new ApiError('unavailable', (error as Error).message);
  return new ApiError('internal', error instanceof Error ? error.message : String(error));
}

/** An express app with the settings every Versus HTTP face shares (API and worker): request IDs, access log and metrics (observe.ts), and /healthz. */
export function baseApp(logger: Logger): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('query parser', false);
  app.use(observeRequests(logger));
  app.get('/healthz', (_req, res) => {
    res.type('application/json').send('{"status":"ok"}');
  });
  return app;
}

/** The end every face shares: JSON 404 for unknown routes, then the one error handler. */
export function finishApp(app: express.Express, logger: Logger): express.Express {
  app.use((_req: Request, res: Response) => {
    sendError(res, new ApiError('not_found'));
  });

  // Express recognises error handlers by their four parameters.
  app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => {
    const apiError = toApiError(error);
    const line = { method: req.method, path: req.path, code: apiError.code, status: apiError.status, detail: apiError.detail };
    if (apiError.status >= 500) logger.error(line, 'request failed');
    else logger.debug(line, 'request refused');
    sendError(res, apiError);
  });
  return app;
}

export function createApp(services: Services): express.Express {
  const { config, registry, matchmaking, logger } = services;
  const app = baseApp(logger);

  app.get('/openapi.json', serveOpenApi);

  app.get('/readyz', async (_req, res) => {
    try {
      await services.redis.ping();
      if (!matchmaking.scriptsLoaded) await matchmaking.preload();
      await services.push?.ready();
      res.type('application/json').send('{"status":"ready"}');
    } catch {
      sendError(res, new ApiError('unavailable', 'not ready'));
    }
  });

  app.get('/metrics', metricsHandler(services));

  app.post('/api/matchmaking', rawBody('invalid_argument'), async (req, res) => {
    const appRecord = await authenticateApp(req.headers.authorization, registry, config.environment);
    noteApp(res, appRecord.origin);
    if (!hasMediaType(req, 'application/json')) throw new ApiError('invalid_argument', 'Content-Type must be application/json');
    // The envelope and its input add two levels above the payload.
    const body = parseJsonBody(req, 'invalid_argument', MAX_JSON_DEPTH + 2);
    noteMatchmakingOperation(res, body);
    const result = await runOperation(matchmaking, appRecord.appId, validateRequest(body), appRecord.limits?.admissions ?? null);
    if ('error' in result) throw new ApiError(result.error);
    if ('rateLimitedMs' in result) throw new RateLimited('admission limit', result.rateLimitedMs);
    res.status(200).type('application/json').send(result.body);
  });

  app.use(createPushRouter(services));

  return finishApp(app, logger);
}
