import type { AddressInfo } from 'node:net';
import { createServer, type Server, type ServerOptions } from 'node:http';
import { pino, type Logger } from 'pino';
import { AppRegistry } from '../apps/registry.js';
import type { Config } from '../config.js';
import { MatchmakingStore } from '../matchmaking/store.js';
import { createRedis, waitForReady } from '../redis/connection.js';
import { Keys } from '../redis/keys.js';
import { createPushServices } from '../push/services.js';
import { createWorkerApp } from '../push/worker-app.js';
import type { PushWorkerTuning } from '../push/worker.js';
import { createApp, type Services } from './app.js';
import { withRequestIds } from './observe.js';

export type Role = 'api' | 'worker' | 'all';

export interface RunningServer {
  url: string;
  port: number;
  services: Services;
  /** Stops accepting, finishes in-flight requests, closes Redis. */
  close(): Promise<void>;
}

export interface StartOptions {
  role?: Role;
  port?: number;
  host?: string;
  logger?: Logger;
  /** Worker settings (tests shorten the job lock); production uses the defaults. */
  pushWorker?: PushWorkerTuning;
}

export function createLogger(config: Config): Logger {
  return pino({ level: config.logLevel, base: { service: 'versus' } });
}

/** The role decides the push half: api enqueues, worker delivers, all does both. */
export async function createServices(config: Config, processLogger: Logger, role: Role = 'api', pushWorker: PushWorkerTuning = {}): Promise<Services> {
  // Lines written while a request is handled (by any part of the service) carry its requestId.
  const logger = withRequestIds(processLogger);
  const redis = createRedis(config, { name: 'versus-api' });
  redis.on('error', (error: Error) => logger.debug({ err: error.message }, 'redis connection error'));
  const keys = new Keys(config.keyPrefix);
  const matchmaking = new MatchmakingStore(redis, keys, { testClock: config.testClock });
  // Scripts are loaded on every (re)connection, so a restarted Redis does not see NOSCRIPT first.
  redis.on('ready', () => {
    matchmaking.preload().catch((error: Error) => logger.warn({ err: error.message }, 'script preload failed'));
  });
  // The queue connection comes up while this one does (both wait at most 3 s).
  const pushStarting = createPushServices(config, keys, logger, role, pushWorker);
  try {
    await waitForReady(redis, 3000);
    await matchmaking.preload();
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'Redis not ready at start; serving 503 until it is');
  }
  const push = await pushStarting;
  return { config, redis, registry: new AppRegistry(redis, keys), matchmaking, logger, push };
}

/**
 * Limits against slow and idle clients (HTTP_*_TIMEOUT_MS). Node checks the request and header
 * deadlines of incomplete requests only every `connectionsCheckingInterval` (30 s by default),
 * which would let a client that sends half a header hold its connection far past a short
 * deadline: the check runs at least four times per shortest deadline (at most every 30 s).
 */
export function httpServerOptions(config: Config): ServerOptions {
  const { requestTimeoutMs, headersTimeoutMs, keepAliveTimeoutMs } = config.http;
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout: headersTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(25, Math.min(30_000, Math.floor(Math.min(requestTimeoutMs, headersTimeoutMs) / 4))),
  };
}

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config);
  const role = options.role ?? 'api';
  const services = await createServices(config, logger, role, options.pushWorker);
  // A worker answers only /healthz and /readyz; api and all serve the API.
  const handler = role === 'worker' ? createWorkerApp(services) : createApp(services);
  const server = createServer(httpServerOptions(config), handler);
  const address = await listen(server, options.port ?? config.port, options.host ?? config.host);
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await services.push?.close();
      await services.redis.quit().catch(() => services.redis.disconnect());
    })();
    return closing;
  };
  logger.info({ url, role, environment: config.environment }, 'versus listening');
  return { url, port: address.port, services, close };
}

/**
 * `versus serve`: starts the server and, on SIGTERM or SIGINT, stops accepting, finishes
 * in-flight requests, closes Redis and exits 0 (1 if draining takes over 15 s).
 */
export async function runServe(config: Config, role: Role = 'all', options: StartOptions = {}): Promise<RunningServer> {
  const running = await startServer(config, { ...options, role });
  const stop = (signal: string) => {
    running.services.logger.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => process.exit(1), 15_000);
    deadline.unref();
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  return running;
}
