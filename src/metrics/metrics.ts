import { timingSafeEqual } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Request, RequestHandler, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, register } from 'prom-client';
import type { Services } from '../http/app.js';
import { ApiError, withTimeout } from '../http/errors.js';
import { readAllCounters } from '../matchmaking/stats.js';
import { registeredOnce } from './registry.js';
import { isRedisUnavailableError, type RedisClient } from '../redis/connection.js';
import { Keys } from '../redis/keys.js';

/**
 * Prometheus metrics (`GET /metrics` on the API and worker faces), all in prom-client's default
 * registry, where the HTTP request metrics live too. Two kinds:
 *
 *  - Per process, counted by this process as things happen: notifications it accepted or
 *    delivered, its Redis command errors, its push job latencies, Node's default metrics.
 *    Sum them across replicas.
 *  - Cluster-wide, read from Redis at each scrape: the per-app matchmaking counters (the
 *    scripts HINCRBY them in the same step as the event, lua/includes/keys.lua statsKey), the
 *    waiting tickets and the push queue's depth. Every replica reports the same value: take
 *    max() (or scrape one replica), never sum().
 */

// ---- per process

export const pushAccepted = registeredOnce('versus_push_notifications_accepted_total', () =>
  new Counter({
    name: 'versus_push_notifications_accepted_total',
    help: 'Notifications this API process accepted and enqueued (202), by app origin and kind (user, broadcast).',
    labelNames: ['app', 'kind'] as const,
  }),
);

export const pushDelivered = registeredOnce('versus_push_messages_delivered_total', () =>
  new Counter({
    name: 'versus_push_messages_delivered_total',
    help: 'Push messages a push service accepted (2xx), one per subscription, by app origin.',
    labelNames: ['app'] as const,
  }),
);

export const pushDropped = registeredOnce('versus_push_messages_dropped_total', () =>
  new Counter({
    name: 'versus_push_messages_dropped_total',
    help: 'Push messages settled without delivery, by app origin and reason: gone (404/410, subscription deleted), refused (other 4xx), endpoint_not_allowed (host no longer in PUSH_ENDPOINT_HOSTS).',
    labelNames: ['app', 'reason'] as const,
  }),
);

export const pushFailed = registeredOnce('versus_push_messages_failed_total', () =>
  new Counter({
    name: 'versus_push_messages_failed_total',
    help: 'Push sends that failed for now (429, 5xx, network): the job is retried with backoff, by app origin.',
    labelNames: ['app'] as const,
  }),
);

export const pushJobsFailed = registeredOnce('versus_push_jobs_failed_total', () =>
  new Counter({
    name: 'versus_push_jobs_failed_total',
    help: 'Push jobs that failed an attempt, by kind (user, broadcast, chunk); final="true" when it was the last attempt (given up).',
    labelNames: ['kind', 'final'] as const,
  }),
);

export const pushJobLatency = registeredOnce('versus_push_job_latency_seconds', () =>
  new Histogram({
    name: 'versus_push_job_latency_seconds',
    help: 'Time from enqueueing a push job to its completion (queueing, retries and sending), by kind (user, broadcast, chunk).',
    labelNames: ['kind'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  }),
);

export const redisErrors = registeredOnce('versus_redis_command_errors_total', () =>
  new Counter({
    name: 'versus_redis_command_errors_total',
    help: 'Redis commands of this process that failed, by connection (main, push-queue, push-worker) and kind: unavailable (down, timed out, cluster not ready), noscript (answered by sending the script), reply (an error reply).',
    labelNames: ['connection', 'kind'] as const,
  }),
);

// ---- cluster-wide, read from Redis at scrape time

const admissions = registeredOnce('versus_matchmaking_admissions_total', () =>
  new Counter({
    name: 'versus_matchmaking_admissions_total',
    help: 'createTicket calls that admitted a new ticket ID, by app origin. Cluster-wide (read from Redis): use max() across replicas.',
    labelNames: ['app'] as const,
  }),
);

const matches = registeredOnce('versus_matchmaking_matches_total', () =>
  new Counter({
    name: 'versus_matchmaking_matches_total',
    help: 'Pairs made (two tickets each), by app origin. Cluster-wide: use max() across replicas.',
    labelNames: ['app'] as const,
  }),
);

const cancellations = registeredOnce('versus_matchmaking_cancellations_total', () =>
  new Counter({
    name: 'versus_matchmaking_cancellations_total',
    help: 'Waiting tickets cancelled at a client request, by app origin. Cluster-wide: use max() across replicas.',
    labelNames: ['app'] as const,
  }),
);

const expirations = registeredOnce('versus_matchmaking_expirations_total', () =>
  new Counter({
    name: 'versus_matchmaking_expirations_total',
    help: 'Tickets that expired (retired past their cutoff, or admitted past it), by app origin. Cluster-wide: use max() across replicas.',
    labelNames: ['app'] as const,
  }),
);

const tombstones = registeredOnce('versus_matchmaking_tombstones_total', () =>
  new Counter({
    name: 'versus_matchmaking_tombstones_total',
    help: 'Tombstones recorded (cancelTicket of an unknown ID), by app origin. Cluster-wide: use max() across replicas.',
    labelNames: ['app'] as const,
  }),
);

const waiting = registeredOnce('versus_matchmaking_waiting_tickets', () =>
  new Gauge({
    name: 'versus_matchmaking_waiting_tickets',
    help: 'Tickets waiting in queues, by app origin (includes tickets past their cutoff that no operation reached yet). Cluster-wide: use max() across replicas.',
    labelNames: ['app'] as const,
  }),
);

const queueJobs = registeredOnce('versus_push_queue_jobs', () =>
  new Gauge({
    name: 'versus_push_queue_jobs',
    help: 'Push jobs in the BullMQ queue by state (waiting, prioritized: broadcast chunks, active, delayed: retries in backoff). Cluster-wide: use max() across replicas.',
    labelNames: ['state'] as const,
  }),
);

const statsUp = registeredOnce('versus_stats_up', () =>
  new Gauge({
    name: 'versus_stats_up',
    help: '1 when this scrape read the cluster-wide metrics from Redis; 0 when it could not (they are then absent from the scrape).',
  }),
);

const QUEUE_STATES = ['waiting', 'prioritized', 'active', 'delayed'] as const;

/** A scrape waits at most this long for Redis. */
const SCRAPE_TIMEOUT_MS = 2000;

const CLUSTER_WIDE = [admissions, matches, cancellations, expirations, tombstones, waiting, queueJobs];

/** Reads the cluster-wide values into their metrics; on failure they are left empty and versus_stats_up is 0. */
async function refreshClusterWide(redis: RedisClient, keys: Keys, queue: Queue | null): Promise<void> {
  for (const metric of CLUSTER_WIDE) metric.reset();
  try {
    const [perApp, jobs] = await withTimeout(Promise.all([readAllCounters(redis, keys), queue ? queue.getJobCounts(...QUEUE_STATES) : null]), SCRAPE_TIMEOUT_MS, 'metrics scrape');
    for (const [app, { events, tickets }] of perApp) {
      admissions.inc({ app }, events.admissions);
      matches.inc({ app }, events.matches);
      cancellations.inc({ app }, events.cancellations);
      expirations.inc({ app }, events.expirations);
      tombstones.inc({ app }, events.tombstones);
      waiting.set({ app }, tickets.waiting);
    }
    if (jobs) for (const state of QUEUE_STATES) queueJobs.set({ state }, jobs[state] ?? 0);
    statsUp.set(1);
  } catch {
    for (const metric of CLUSTER_WIDE) metric.reset();
    statsUp.set(0);
  }
}

let defaultsStarted = false;

/** Node's default metrics (process_*, nodejs_*), once per process whoever asks first. */
function startDefaultMetrics(): void {
  if (defaultsStarted) return;
  defaultsStarted = true;
  if (register.getSingleMetric('process_cpu_user_seconds_total') === undefined) collectDefaultMetrics();
}

const INSTRUMENTED = Symbol('versus.metrics.instrumented');

/**
 * Counts the failed commands of one Redis client (standalone or cluster) in
 * versus_redis_command_errors_total{connection}. Wraps the client's sendCommand, through which
 * every command, pipeline and script call goes; a client is instrumented once.
 */
export function instrumentRedis(client: RedisClient, connection: string): void {
  const marked = client as RedisClient & { [INSTRUMENTED]?: true };
  if (marked[INSTRUMENTED]) return;
  marked[INSTRUMENTED] = true;
  const send = client.sendCommand.bind(client) as (...args: unknown[]) => unknown;
  // A command can pass through sendCommand more than once (offline queue, resend after a
  // reconnect, cluster redirection): each is watched once.
  const watched = new WeakSet<object>();
  (client as { sendCommand: (...args: unknown[]) => unknown }).sendCommand = (...args: unknown[]) => {
    const result = send(...args);
    const command = args[0] as { promise?: Promise<unknown> };
    if (typeof command !== 'object' || command === null || watched.has(command)) return result;
    watched.add(command);
    command.promise?.catch((error: unknown) => {
      const kind = error instanceof Error && error.message.startsWith('NOSCRIPT') ? 'noscript' : isRedisUnavailableError(error) ? 'unavailable' : 'reply';
      redisErrors.inc({ connection, kind });
    });
    return result;
  };
}

/** True when METRICS_TOKEN is unset, or the request carries `Authorization: Bearer <METRICS_TOKEN>`. */
function authorized(req: Request, token: string | null): boolean {
  if (token === null) return true;
  const header = req.headers.authorization ?? '';
  const match = /^Bearer (\S+)$/i.exec(header);
  if (!match) return false;
  const given = Buffer.from(match[1]!);
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** One scrape at a time per process, so the cluster-wide values of one read are served together. */
let scraping: Promise<unknown> = Promise.resolve();

/**
 * `GET /metrics` of one HTTP face (API or worker): Prometheus text from the default registry.
 * With METRICS_TOKEN set, a request without the bearer token is 401 `{"error":"unauthenticated"}`.
 */
export function metricsHandler(services: Services): RequestHandler {
  startDefaultMetrics();
  instrumentRedis(services.redis, 'main');
  const keys = new Keys(services.config.keyPrefix);
  return async (req: Request, res: Response) => {
    if (!authorized(req, services.config.metricsToken)) throw new ApiError('unauthenticated', 'metrics token missing or wrong');
    const queue = services.push?.producer?.queue ?? services.push?.worker?.queue ?? null;
    const run = scraping.then(async () => {
      await refreshClusterWide(services.redis, keys, queue);
      return register.metrics();
    });
    scraping = run.catch(() => {});
    const text = await run;
    res.status(200).type(register.contentType).send(text);
  };
}
