/**
 * The floor server of the HTTP benchmark: the least a createTicket request must do. Express 5,
 * the JSON body parsed, one EVALSHA of a trivial script (`return ARGV[1]`) on the same kind of
 * Redis connection the API uses, and the script's answer sent back as the JSON reply. No auth,
 * no validation, no matchmaking. Same process protocol as api-server.ts.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { loadConfig } from '../src/config.js';
import { createRedis, waitForReady } from '../src/redis/connection.js';

const TRIVIAL_SCRIPT = 'return ARGV[1]';

const config = loadConfig(process.env);
const redis = createRedis(config, { name: 'versus-bench-floor' });
redis.on('error', () => {});
await waitForReady(redis, 3000);
const sha = (await redis.script('LOAD', TRIVIAL_SCRIPT)) as string;
const key = `${config.keyPrefix}:floor`;

async function trivial(arg: string): Promise<string> {
  try {
    return (await redis.evalsha(sha, 1, key, arg)) as string;
  } catch (error) {
    // Someone flushed the script cache (tests on a shared Redis do): send the source once.
    if (error instanceof Error && error.message.startsWith('NOSCRIPT')) return (await redis.eval(TRIVIAL_SCRIPT, 1, key, arg)) as string;
    throw error;
  }
}

const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.post('/api/matchmaking', express.json({ limit: '64kb' }), async (req: Request, res: Response) => {
  const body = req.body as { input?: unknown };
  const reply = await trivial(JSON.stringify(body.input ?? null));
  res.status(200).type('application/json').send(reply);
});
app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
  res.status(500).type('application/json').send(JSON.stringify({ error: error instanceof Error ? error.message : 'internal' }));
});

// The same server options as src/http/server.ts.
const server = createServer({ requestTimeout: 30_000, headersTimeout: 10_000, keepAliveTimeout: 5_000 }, app);
await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
const { port } = server.address() as AddressInfo;
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
process.once('SIGTERM', () => {
  server.close(() => {
    redis.disconnect();
    process.exit(0);
  });
  server.closeIdleConnections();
});
