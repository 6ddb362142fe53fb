/**
 * Redis memory per stored terminal ticket: used_memory (INFO memory) before and after storing
 * N terminal tickets in a fresh app (24-byte IDs, 16-byte players, 64-byte payloads; half
 * matched in pairs, half cancelled), every index included, with the Redis's own configuration.
 * A per-key view (MEMORY USAGE of every key of the app) breaks the bytes down by key kind.
 */
import type { Redis } from 'ioredis';
import {
  type BenchContext,
  deleteApp,
  info,
  nowMs,
  payloadOfBytes,
  pool,
  randomText,
  registerApp,
  settleLazyFree,
  sleep,
  valid,
} from './common.js';

export const TICKETS = 50_000;
const PLAYERS = 5_000; // 10 tickets per player
const QUEUES = 100;

export interface MemoryResults {
  tickets: number;
  matched: number;
  cancelled: number;
  players: number;
  queues: number;
  idBytes: number;
  playerBytes: number;
  payloadBytes: number;
  keyPrefix: string;
  usedMemoryBefore: number;
  usedMemoryAfter: number;
  /** (after - before) / tickets: the headline number. */
  bytesPerTicket: number;
  /** Sum of MEMORY USAGE over the app's keys / tickets (excludes the keyspace's own table). */
  memoryUsagePerTicket: number;
  /** MEMORY USAGE per ticket by key kind (t: tickets, p: players, all, qp, ...). */
  breakdown: Record<string, { keys: number; bytesPerTicket: number; encoding: string }>;
  keysAdded: number;
  /** Keys added to the whole Redis meanwhile minus this app's: non-zero means another client wrote. */
  foreignKeys: number;
  redisConfig: Record<string, string>;
  allocator: string;
  populateMs: number;
  attempts: number;
  /** True when even the last attempt saw other clients' writes: the headline number is unreliable. */
  disturbed: boolean;
}

const CONFIG_KEYS = [
  'hash-max-listpack-entries',
  'hash-max-listpack-value',
  'zset-max-listpack-entries',
  'zset-max-listpack-value',
  'maxmemory',
  'activerehashing',
];

async function usedMemory(redis: Redis): Promise<number> {
  // Client buffers of the bulk connection shrink in clientsCron; let a few cron passes run.
  await settleLazyFree(redis);
  await sleep(1500);
  return Number((await info(redis, 'memory'))['used_memory']);
}

export async function redisConfig(redis: Redis): Promise<Record<string, string>> {
  const config: Record<string, string> = {};
  for (const name of CONFIG_KEYS) {
    const pair = (await redis.config('GET', name)) as string[];
    config[name] = pair[1] ?? '';
  }
  return config;
}

function kindOf(scope: string, key: string): string {
  const rest = key.slice(scope.length);
  const colon = rest.indexOf(':');
  return colon < 0 ? rest : `${rest.slice(0, colon)}:*`;
}

const ATTEMPTS = 3;

/**
 * used_memory is one number for the whole Redis: when other clients add or delete keys during
 * the measurement (tests sharing this Redis do), or the reading is below what this app's own
 * keys hold, the measurement is repeated in a fresh app, up to ATTEMPTS times.
 */
export async function runMemory(ctx: BenchContext, log: (line: string) => void): Promise<MemoryResults> {
  let result: MemoryResults | null = null;
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    result = await measureOnce(ctx, log);
    result.attempts = attempt;
    result.disturbed = result.foreignKeys !== 0 || result.bytesPerTicket < result.memoryUsagePerTicket;
    if (!result.disturbed) return result;
    log(`  attempt ${attempt}: disturbed (${result.foreignKeys} keys of other clients appeared or went meanwhile)${attempt < ATTEMPTS ? ', measuring again' : ''}`);
  }
  return result!;
}

async function measureOnce(ctx: BenchContext, log: (line: string) => void): Promise<MemoryResults> {
  const app = await registerApp(ctx, 'memory');
  try {
    const players = Array.from({ length: PLAYERS }, () => randomText(16));
    const payload = payloadOfBytes(64);
    const ticket = (player: string, queue: number) =>
      valid({ id: randomText(24), player, queue: { key: `mq${queue}`, size: 2 }, payload });

    const dbBefore = await ctx.admin.dbsize();
    const before = await usedMemory(ctx.admin);
    let matched = 0;
    let cancelled = 0;
    let nextPlayer = 0;
    const start = nowMs();
    // Task i issues its two calls back to back on one connection, so Redis runs them in order:
    // one task in three, two players in one queue (the second pairs with the first); the others,
    // a ticket and its cancellation (it waits alone in its queue, then is cancelled). That makes
    // N/2 matched and N/2 cancelled tickets.
    await pool((TICKETS * 3) / 4, 1000, async (i) => {
      const queue = i % QUEUES;
      // Players in turn: every player gets TICKETS / PLAYERS tickets, and a pair's two differ.
      const a = players[nextPlayer++ % PLAYERS]!;
      const b = i % 3 === 0 ? players[nextPlayer++ % PLAYERS]! : a;
      if (i % 3 === 0) {
        const [first, second] = await Promise.all([
          ctx.store.createTicket(app.appId, ticket(a, queue)),
          ctx.store.createTicket(app.appId, ticket(b, queue)),
        ]);
        // The first waits (its reply says so), the second pairs with it: both end matched.
        const waited = 'ticket' in first && first.ticket.includes('"state":"waiting"');
        if (waited && 'ticket' in second && second.ticket.includes('"state":"matched"')) matched += 2;
      } else {
        const t = ticket(a, queue);
        const [, cancel] = await Promise.all([ctx.store.createTicket(app.appId, t), ctx.store.cancelTicket(app.appId, t.input.id)]);
        if (cancel.includes('"state":"cancelled"')) cancelled++;
      }
    });
    const populateMs = nowMs() - start;
    if (matched !== TICKETS / 2 || cancelled !== TICKETS / 2) {
      throw new Error(`memory setup: expected ${TICKETS / 2} matched and cancelled, got ${matched} and ${cancelled}`);
    }
    const after = await usedMemory(ctx.admin);
    const dbAfter = await ctx.admin.dbsize();

    // Per-key view: every key of the app, by kind.
    const breakdown: MemoryResults['breakdown'] = {};
    let keysAdded = 0;
    let usageTotal = 0;
    let cursor = '0';
    do {
      const [next, keys] = await ctx.admin.scan(cursor, 'MATCH', `${app.scope}*`, 'COUNT', 5000);
      cursor = next;
      if (keys.length === 0) continue;
      const pipeline = ctx.bulk.pipeline();
      for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', 0);
      const usages = (await pipeline.exec()) ?? [];
      keys.forEach((key, index) => {
        const bytes = Number(usages[index]?.[1] ?? 0);
        const kind = kindOf(app.scope, key);
        const entry = (breakdown[kind] ??= { keys: 0, bytesPerTicket: 0, encoding: '' });
        entry.keys++;
        entry.bytesPerTicket += bytes;
        usageTotal += bytes;
        keysAdded++;
      });
      for (const [kind, entry] of Object.entries(breakdown)) {
        if (entry.encoding === '') {
          const sampleKey = keys.find((key) => kindOf(app.scope, key) === kind);
          if (sampleKey) entry.encoding = String(await ctx.admin.object('ENCODING', sampleKey));
        }
      }
    } while (cursor !== '0');
    for (const entry of Object.values(breakdown)) entry.bytesPerTicket /= TICKETS;

    const memoryInfo = await info(ctx.admin, 'memory');
    const result: MemoryResults = {
      tickets: TICKETS,
      matched,
      cancelled,
      players: PLAYERS,
      queues: QUEUES,
      idBytes: 24,
      playerBytes: 16,
      payloadBytes: 64,
      keyPrefix: ctx.prefix,
      usedMemoryBefore: before,
      usedMemoryAfter: after,
      bytesPerTicket: (after - before) / TICKETS,
      memoryUsagePerTicket: usageTotal / TICKETS,
      breakdown,
      keysAdded,
      // The app record (registered before the first reading) is not among the added keys.
      foreignKeys: dbAfter - dbBefore - keysAdded,
      redisConfig: await redisConfig(ctx.admin),
      allocator: memoryInfo['mem_allocator'] ?? '',
      populateMs,
      attempts: 1,
      disturbed: false,
    };
    log(`  ${result.bytesPerTicket.toFixed(0)} B/ticket by used_memory, ${result.memoryUsagePerTicket.toFixed(0)} B/ticket by MEMORY USAGE (${keysAdded} keys; populated in ${(populateMs / 1000).toFixed(1)} s)`);
    for (const [kind, entry] of Object.entries(breakdown)) {
      log(`    ${kind.padEnd(6)} ${String(entry.keys).padStart(6)} keys  ${entry.bytesPerTicket.toFixed(1).padStart(7)} B/ticket  (${entry.encoding})`);
    }
    return result;
  } finally {
    await deleteApp(ctx, app);
  }
}
