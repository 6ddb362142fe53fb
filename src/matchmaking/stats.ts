import { Cluster } from 'ioredis';
import { masters, waitForReady, type RedisClient } from '../redis/connection.js';
import { appIdOf, Keys } from '../redis/keys.js';

/**
 * An app's matchmaking numbers, read without touching ticket hashes:
 *  - events and tickets by state from the app's stats hash, which the scripts HINCRBY in the
 *    same step that makes each event (lua/includes/keys.lua statsKey names the fields), so the
 *    counts are exact and cluster-wide (every replica reads the same hash);
 *  - waiting per queue from the queue indexes (ZCARD), at the time of reading;
 *  - memory from MEMORY USAGE of every key under the app's `{appId}` scope.
 */

/** Fields of the stats hash, in keys.lua's order. */
const FIELDS = ['am', 'ax', 'c', 'e', 'tb'] as const;
type Field = (typeof FIELDS)[number];

/** What happened since the counters began (the version that introduced them). */
export interface MatchmakingEvents {
  /** createTicket calls that admitted a new ticket ID (waited, matched at once, or already expired). */
  admissions: number;
  /** Pairs made (each match takes two tickets). */
  matches: number;
  /** Waiting tickets cancelled at a client's request. */
  cancellations: number;
  /** Tickets that expired: retired past their cutoff, or admitted already past it. */
  expirations: number;
  /** cancelTicket of an unknown ID. */
  tombstones: number;
}

/** Tickets by their stored state. `waiting` includes tickets past their cutoff that no operation has reached yet (lazy expiry). */
export interface TicketsByState {
  waiting: number;
  matched: number;
  /** Cancelled tickets: requested plus expired (tombstones apart). */
  cancelled: number;
  requested: number;
  expired: number;
  tombstones: number;
}

export interface AppCounters {
  events: MatchmakingEvents;
  tickets: TicketsByState;
}

/**
 * The counters from the stats hash's fields (missing fields are 0) and the app's sequence,
 * which grows by one per admission and per tombstone (keys.lua): an admission that waits
 * writes no counter of its own.
 */
export function countersFrom(raw: Partial<Record<Field, number>>, seq: number): AppCounters {
  const [am, ax, c, e, tb] = FIELDS.map((f) => raw[f] ?? 0) as [number, number, number, number, number];
  const admissions = seq - tb;
  return {
    events: { admissions, matches: am, cancellations: c, expirations: e + ax, tombstones: tb },
    tickets: { waiting: admissions - 2 * am - ax - c - e, matched: 2 * am, cancelled: c + e + ax, requested: c, expired: e + ax, tombstones: tb },
  };
}

/** The stats hash and the sequence in one MULTI (the same slot): an atomic read of the app's counters. */
export async function readCounters(redis: RedisClient, keys: Keys, appId: string): Promise<AppCounters> {
  const replies = (await redis.multi().hmget(keys.matchmakingStats(appId), ...FIELDS).get(keys.sequence(appId)).exec()) ?? [];
  for (const [error] of replies) if (error) throw error;
  const values = (replies[0]?.[1] ?? []) as Array<string | null>;
  const seq = Number((replies[1]?.[1] as string | null) ?? 0);
  const raw: Partial<Record<Field, number>> = {};
  FIELDS.forEach((field, i) => {
    const text = values[i];
    if (text !== null && text !== undefined) raw[field] = Number(text);
  });
  return countersFrom(raw, seq);
}

/** Every registered app's counters, by origin (one SMEMBERS, then one HMGET per app). */
export async function readAllCounters(redis: RedisClient, keys: Keys): Promise<Map<string, AppCounters>> {
  const origins = (await redis.smembers(keys.appsIndex())).sort();
  const counters = await Promise.all(origins.map((origin) => readCounters(redis, keys, appIdOf(origin))));
  return new Map(origins.map((origin, i) => [origin, counters[i]!]));
}

export interface QueueWaiting {
  queue: string;
  /** Waiting tickets in the queue's indexes (rated and unrated). */
  waiting: number;
  /** Of those, tickets at or past their cutoff: they expire when an operation next reaches them. */
  pastCutoff: number;
}

export interface AppMemory {
  bytes: number;
  keys: number;
  /** MEMORY USAGE samples 5 elements of a large hash or sorted set: the total is an estimate. */
  sampled: true;
}

export interface AppStats {
  origin: string;
  appId: string;
  events: MatchmakingEvents;
  tickets: TicketsByState;
  /** Queues with waiting tickets, most waiting first. */
  queues: QueueWaiting[];
  /** Queues the app ever used (their fixed policies). */
  queuesKnown: number;
  /** Tickets and tombstones in the app's creation index. */
  ticketsStored: number;
  /**
   * The counters' waiting tickets equal the queues' (read just after). False when tickets ended
   * before the counters began (they count as admitted but never as ended), or when tickets
   * changed between the two reads.
   */
  countersComplete: boolean;
  memory: AppMemory;
}

/** Commands per pipeline round trip. */
const BATCH = 1000;

/** Runs `build(pipeline, item)` for every item in pipelined batches; the replies, in order. */
async function pipelined<T>(redis: RedisClient, items: readonly T[], build: (p: ReturnType<RedisClient['pipeline']>, item: T) => void): Promise<unknown[]> {
  const replies: unknown[] = [];
  for (let i = 0; i < items.length; i += BATCH) {
    const pipeline = redis.pipeline();
    for (const item of items.slice(i, i + BATCH)) build(pipeline, item);
    const results = (await pipeline.exec()) ?? [];
    for (const [error, value] of results) {
      if (error) throw error;
      replies.push(value);
    }
  }
  return replies;
}

/** Every member of a hash (HSCAN) or sorted set (ZSCAN), in pages. */
async function scanFields(redis: RedisClient, command: 'hscan' | 'zscan', key: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, flat] = await redis[command](key, cursor, 'COUNT', 1000);
    cursor = next;
    for (let i = 0; i < flat.length; i += 2) found.push(flat[i]!);
  } while (cursor !== '0');
  return found;
}

/** "Now" as the scripts see it: Redis TIME, or the app's frozen test clock when the test switch is on and it is set. */
async function scriptTime(redis: RedisClient, keys: Keys, appId: string, testClock: boolean): Promise<number> {
  if (testClock) {
    const frozen = await redis.get(keys.testClock(appId));
    if (frozen !== null) return Number(frozen);
  }
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * Waiting tickets per queue from the indexes: ZCARD of the rated index, plus ZCARD of each
 * waiting player's own unrated index (one per player in the queue's head index), and the
 * tickets past their cutoff (ZCOUNT of the cutoff index up to now). O(queues + waiting unrated
 * players) commands, pipelined; no ticket hash is read. Each queue is read at its own moment.
 */
export async function waitingPerQueue(redis: RedisClient, keys: Keys, appId: string, testClock: boolean): Promise<{ queues: QueueWaiting[]; known: number }> {
  const names = await scanFields(redis, 'hscan', keys.queuePolicies(appId));
  const now = await scriptTime(redis, keys, appId, testClock);
  const counts = await pipelined(redis, names, (p, queue) => {
    p.zcard(keys.queueRatedWaiting(appId, queue));
    p.zcard(keys.queuePlayerHeads(appId, queue));
    p.zcount(keys.queueCutoffs(appId, queue), '-inf', now);
  });
  const queues: QueueWaiting[] = [];
  for (let i = 0; i < names.length; i++) {
    const queue = names[i]!;
    const [rated, players, pastCutoff] = counts.slice(3 * i, 3 * i + 3) as [number, number, number];
    let unrated = 0;
    if (players > 0) {
      const heads = await scanFields(redis, 'zscan', keys.queuePlayerHeads(appId, queue));
      const own = await pipelined(redis, heads, (p, player) => p.zcard(keys.queuePlayerTickets(appId, queue, player)));
      unrated = (own as number[]).reduce((sum, n) => sum + n, 0);
    }
    if (rated + unrated > 0) queues.push({ queue, waiting: rated + unrated, pastCutoff });
  }
  queues.sort((a, b) => b.waiting - a.waiting || (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0));
  return { queues, known: names.length };
}

/**
 * Memory of the app: MEMORY USAGE (default sampling) of its record and of every key under its
 * `{appId}` scope, found by SCAN on every master (in a cluster the app's keys live on the one
 * master that serves its slot). Notification jobs in BullMQ's keys are not the app's and are
 * not counted. SCAN walks the whole keyspace of each master.
 */
export async function appMemory(redis: RedisClient, keys: Keys, origin: string): Promise<AppMemory> {
  const appId = appIdOf(origin);
  if (redis instanceof Cluster) await waitForReady(redis, 10_000);
  let bytes = 0;
  let count = 0;
  const record = await redis.memory('USAGE', keys.appRecord(origin));
  if (record !== null) {
    bytes += Number(record);
    count++;
  }
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', keys.appScopePattern(appId), 'COUNT', 1000);
      cursor = next;
      const usage = await pipelined(node, found, (p, key) => p.memory('USAGE', key));
      for (const value of usage) {
        // A key deleted between SCAN and MEMORY USAGE answers nil.
        if (value === null) continue;
        bytes += Number(value);
        count++;
      }
    } while (cursor !== '0');
  }
  return { bytes, keys: count, sampled: true };
}

/** Everything `versus apps stats` shows; null when no app has this origin. */
export async function appStats(redis: RedisClient, keys: Keys, origin: string, options: { testClock: boolean }): Promise<AppStats | null> {
  if ((await redis.exists(keys.appRecord(origin))) === 0) return null;
  const appId = appIdOf(origin);
  const counters = await readCounters(redis, keys, appId);
  const stored = await redis.zcard(keys.allTickets(appId));
  const { queues, known } = await waitingPerQueue(redis, keys, appId, options.testClock);
  const memory = await appMemory(redis, keys, origin);
  return {
    origin,
    appId,
    events: counters.events,
    tickets: counters.tickets,
    queues,
    queuesKnown: known,
    ticketsStored: stored,
    countersComplete: counters.tickets.waiting === queues.reduce((sum, q) => sum + q.waiting, 0),
    memory,
  };
}

function bytesText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** A client-chosen queue key as one safe terminal token: as is when plain printable ASCII, else JSON-quoted. */
function shownName(name: string): string {
  return /^[\x21-\x7e]+$/.test(name) && !name.startsWith('"') ? name : JSON.stringify(name);
}

/** The human-readable report of `versus apps stats`. */
export function formatAppStats(stats: AppStats): string {
  const { tickets, events } = stats;
  const lines = [
    `${stats.origin} (app ${stats.appId})`,
    `tickets     ${tickets.waiting} waiting, ${tickets.matched} matched, ${tickets.cancelled} cancelled (${tickets.requested} requested, ${tickets.expired} expired), ${tickets.tombstones} tombstones`,
    `events      ${events.admissions} admissions, ${events.matches} matches, ${events.cancellations} cancellations, ${events.expirations} expirations, ${events.tombstones} tombstones`,
  ];
  if (!stats.countersComplete) {
    const queued = stats.queues.reduce((sum, q) => sum + q.waiting, 0);
    lines.push(`note        the queues hold ${queued} waiting tickets, the counters ${tickets.waiting}: tickets that ended before the counters began count as waiting (or tickets changed while this ran)`);
  }
  lines.push(`queues      ${stats.queues.length} with waiting tickets, ${stats.queuesKnown} known`);
  const names = stats.queues.map((q) => shownName(q.queue));
  const width = Math.min(40, Math.max(5, ...names.map((n) => n.length)));
  for (const [i, q] of stats.queues.entries()) {
    const late = q.pastCutoff > 0 ? `  (${q.pastCutoff} past cutoff, expire when next reached)` : '';
    lines.push(`  ${names[i]!.padEnd(width)}  ${String(q.waiting).padStart(7)} waiting${late}`);
  }
  lines.push(`memory      ${bytesText(stats.memory.bytes)} in ${stats.memory.keys} keys (MEMORY USAGE, sampled: an estimate)`);
  return `${lines.join('\n')}\n`;
}
