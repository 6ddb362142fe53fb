import express, { type NextFunction, type Request, type Response } from 'express';
import { ApiError, sendError } from '../http/errors.js';
import type { Services } from '../http/app.js';

/**
 * The HTTP face of `versus serve --role worker`: `/healthz` (the process runs) and `/readyz`
 * (its queue connection answers and the worker runs: `{"status":"ready","queue":"ready"}`,
 * else 503 `{"error":"unavailable"}`). Everything else is 404 `{"error":"not_found"}`.
 */
export function createWorkerApp(services: Services): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('query parser', false);

  app.get('/healthz', (_req, res) => {
    res.type('application/json').send('{"status":"ok"}');
  });

  app.get('/readyz', async (_req, res) => {
    try {
      if (!services.push) throw new Error('no worker');
      await services.push.ready();
      res.type('application/json').send('{"status":"ready","queue":"ready"}');
    } catch (error) {
      services.logger.debug({ err: (error as Error).message }, 'worker not ready');
      sendError(res, new ApiError('unavailable', 'not ready'));
    }
  });

  app.use((_req: Request, res: Response) => {
    sendError(res, new ApiError('not_found'));
  });

  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    services.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'worker request failed');
    sendError(res, new ApiError('internal'));
  });

  return app;
}
