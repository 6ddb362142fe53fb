import { createHash, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { AppRegistry, DEFAULT_USER_DAYS, type AppRecord } from '../../src/apps/registry.js';
import { loadConfig, type Config } from '../../src/config.js';
import { MatchmakingStore } from '../../src/matchmaking/store.js';
import { queuePolicyJson, type ValidTicketInput } from '../../src/matchmaking/validation.js';
import { appIdOf, Keys } from '../../src/redis/keys.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { canonicalJson } from '../../src/shared/json.js';
import type { TicketInput } from '../../src/shared/matchmaking-types.js';

/** Everything one bench run shares: its own key prefix, connections, and a store per clock mode. */
export interface BenchContext {
  prefix: string;
  redisUrl: string;
  /** Test clock on: scripts read a frozen per-app time when one is set (admission shapes). */
  config: Config;
  keys: Keys;
  /** Bulk connection: auto-pipelined, no command timeout (setups of 100k..1M admissions). */
  bulk: Redis;
  /** Control connection: INFO, clock, cleanup; never queued behind bulk traffic. */
  admin: Redis;
  /** MatchmakingStore on `bulk`, test clock honoured. */
  store: MatchmakingStore;
  registry: AppRegistry;
}

export function benchPrefix(): string {
  // Short, so key names stay close to production's `vs` (it matters for bytes per ticket).
  return `bv${randomBytes(3).toString('hex')}`;
}

export function benchConfig(prefix: string, redisUrl: string, testClock: boolean): Config {
  return loadConfig({
    REDIS_URL: redisUrl,
    VERSUS_KEY_PREFIX: prefix,
    VERSUS_TEST_CLOCK: testClock ? '1' : '0',
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
  });
}

export async function openContext(prefix: string, redisUrl: string): Promise<BenchContext> {
  const config = benchConfig(prefix, redisUrl, true);
  const keys = new Keys(prefix);
  const bulk = new Redis(redisUrl, { enableAutoPipelining: true, connectionName: 'versus-bench-bulk' });
  const admin = new Redis(redisUrl, { connectionName: 'versus-bench-admin' });
  const store = new MatchmakingStore(bulk, keys, { testClock: true });
  await store.preload();
  return { prefix, redisUrl, config, keys, bulk, admin, store, registry: new AppRegistry(admin, keys, 0) };
}

export interface BenchApp {
  origin: string;
  appId: string;
  scope: string;
  secretKey: string;
}

let appCounter = 0;

/** A verified production app record, as manifest verification stores it (like test/helpers/harness.ts). */
export async function registerApp(ctx: BenchContext, label: string): Promise<BenchApp> {
  const keys = generateKeyPair();
  const origin = `https://${label}-${++appCounter}-${ctx.prefix}.bench.example`;
  const record: AppRecord = {
    origin,
    appId: appIdOf(origin),
    name: `bench ${label}`,
    appKey: keys.publicKey,
    push: false,
    environment: 'production',
    verified: true,
    manifest: 'bench',
    verifiedAt: Date.now(),
    pushMuted: false,
    audienceDays: null,
    userDays: DEFAULT_USER_DAYS,
  };
  await ctx.registry.put(record);
  return { origin, appId: record.appId, scope: ctx.keys.appScope(record.appId), secretKey: keys.secretKey };
}

/** What validation would hand the store for this input (the inputs here are valid by construction). */
export function valid(input: TicketInput): ValidTicketInput {
  return { input, policyJson: queuePolicyJson(input.queue), payloadJson: canonicalJson(input.payload) };
}

/** Runs task(0..count-1), issuing tasks in index order, with at most `inFlight` unfinished. */
export async function pool(count: number, inFlight: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  const worker = async () => {
    while (next < count && failure === null) {
      const i = next++;
      try {
        await task(i);
      } catch (error) {
        failure = error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, worker));
  if (failure !== null) throw failure;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function info(redis: Redis, section: string): Promise<Record<string, string>> {
  const text = await redis.info(section);
  const fields: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}

export interface ScriptStats {
  calls: number;
  usec: number;
}

/** Server-side totals of script calls (EVALSHA and EVAL), from INFO commandstats. */
export async function scriptStats(redis: Redis): Promise<ScriptStats> {
  const stats = await info(redis, 'commandstats');
  const total: ScriptStats = { calls: 0, usec: 0 };
  for (const name of ['cmdstat_evalsha', 'cmdstat_eval']) {
    const line = stats[name];
    if (!line) continue;
    total.calls += Number(/calls=(\d+)/.exec(line)?.[1] ?? 0);
    total.usec += Number(/usec=(\d+)/.exec(line)?.[1] ?? 0);
  }
  return total;
}

export interface TimedCall<T> {
  value: T;
  /** Script execution time inside Redis (µs), or null when it could not be told apart from other clients' scripts. */
  serverUs: number | null;
  /** Where serverUs came from. */
  source: 'commandstats' | 'slowlog' | null;
  clientUs: number;
}

let slowlogThresholdUs: number | null = null;

/** Redis's own slowlog threshold (µs; default 10 ms), or -1 when the slowlog is off. */
async function slowlogThreshold(admin: Redis): Promise<number> {
  if (slowlogThresholdUs === null) {
    const pair = (await admin.config('GET', 'slowlog-log-slower-than')) as string[];
    slowlogThresholdUs = Number(pair[1] ?? -1);
  }
  return slowlogThresholdUs;
}

/** The duration (µs) of the most recent slowlog entry whose arguments include `marker`. */
async function slowlogDuration(admin: Redis, marker: string): Promise<number | null> {
  const entries = (await admin.call('SLOWLOG', 'GET', '128')) as Array<[number, number, number, string[], ...unknown[]]>;
  for (const entry of entries) {
    if (Array.isArray(entry[3]) && entry[3].includes(marker)) return Number(entry[2]);
  }
  return null;
}

/**
 * Times one script call both ways: round trip on the client, and execution inside Redis. Inside
 * Redis it is the difference of INFO commandstats around the call (exact to 1 µs) when no other
 * client's script ran in between; for a long call that was disturbed so, the entry Redis's own
 * slowlog made of it (found by `marker`, an argument of the call such as the ticket ID). Else null.
 */
export async function timeScriptCall<T>(admin: Redis, call: () => Promise<T>, marker?: string): Promise<TimedCall<T>> {
  const before = await scriptStats(admin);
  const start = nowMs();
  const value = await call();
  const clientUs = (nowMs() - start) * 1000;
  const after = await scriptStats(admin);
  if (after.calls - before.calls === 1) return { value, serverUs: after.usec - before.usec, source: 'commandstats', clientUs };
  const threshold = await slowlogThreshold(admin);
  if (marker !== undefined && threshold >= 0 && clientUs >= threshold) {
    const logged = await slowlogDuration(admin, marker);
    if (logged !== null) return { value, serverUs: logged, source: 'slowlog', clientUs };
  }
  return { value, serverUs: null, source: null, clientUs };
}

/** CPU seconds Redis has used so far (user + sys), for utilisation over a phase. */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const cpu = await info(redis, 'cpu');
  return Number(cpu['used_cpu_user'] ?? 0) + Number(cpu['used_cpu_sys'] ?? 0);
}

/** Deletes every key under `<prefix>:` (SCAN + UNLINK); returns how many. */
export async function deleteKeys(redis: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 5000);
    cursor = next;
    if (keys.length > 0) deleted += await redis.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}

/** Deletes one app's matchmaking keys (between sections, so later ones start from a lean Redis). */
export async function deleteApp(ctx: BenchContext, app: BenchApp): Promise<number> {
  // The scope contains `{appId}`: braces are glob-safe in SCAN MATCH, but escape [ ] * ? \ anyway.
  const escaped = app.scope.replace(/[[\]*?\\]/g, (c) => `\\${c}`);
  return deleteKeys(ctx.admin, `${escaped}*`);
}

/** Waits until Redis has freed what UNLINK handed to its background thread. */
export async function settleLazyFree(redis: Redis, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const memory = await info(redis, 'memory');
    if (Number(memory['lazyfree_pending_objects'] ?? 0) === 0) return;
    await sleep(100);
  }
}

/** Fixed-length random text of base64url characters (IDs, players). */
export function randomText(length: number): string {
  return randomBytes(Math.ceil((length * 3) / 4) + 1).toString('base64url').slice(0, length);
}

/** A payload whose canonical JSON is exactly `bytes` long: {"seed":"xxx…"}. */
export function payloadOfBytes(bytes: number, seed = 0): { seed: string } {
  const fill = createHash('sha256').update(String(seed)).digest('hex').repeat(Math.ceil(bytes / 64) + 1);
  return { seed: fill.slice(0, bytes - '{"seed":""}'.length) };
}

export function fmtInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
