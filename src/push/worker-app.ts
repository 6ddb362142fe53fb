import type express from 'express';
import { ApiError, sendError } from '../http/errors.js';
import { baseApp, finishApp, type Services } from '../http/app.js';
import { metricsHandler } from '../metrics/metrics.js';

/**
 * The HTTP face of `versus serve --role worker`: `/healthz` (the process runs) and `/readyz`
 * (its queue connection answers and the worker runs: `{"status":"ready","queue":"ready"}`,
 * else 503 `{"error":"unavailable"}`), and `/metrics` (src/metrics/metrics.ts). Everything else
 * is 404 `{"error":"not_found"}`.
 */
export function createWorkerApp(services: Services): express.Express {
  const app = baseApp(services.logger);

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

  app.get('/metrics', metricsHandler(services));

  return finishApp(app, services.logger);
}
