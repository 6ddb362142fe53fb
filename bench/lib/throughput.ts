/**
 * Admission scripts per second on one Redis, called directly (no HTTP): many concurrent
 * MatchmakingStore.createTicket calls, against the same number of EVALSHA of a trivial script
 * (`return ARGV[1]`, same KEYS and ARGV) through the same kind of connection.
 */
import type { Redis } from 'ioredis';
import { createTicketArgs, MatchmakingStore } from '../../src/matchmaking/store.js';
import { createRedis, waitForReady } from '../../src/redis/connection.js';
import { Keys } from '../../src/redis/keys.js';
import { type BenchContext, benchConfig, deleteApp, nowMs, pool, redisCpuSeconds, registerApp, valid } from './common.js';

export const TRIVIAL_SCRIPT = 'return ARGV[1]';

export interface RunStats {
  calls: number;
  seconds: number;
  perSecond: number;
  /** Redis CPU (user + sys) over the run, as a share of one core. */
  redisCpu: number;
  /** This (client) process's CPU over the run, as a share of one core. */
  clientCpu: number;
  /** Redis CPU per call, µs: what one call costs Redis whoever limits the rate. */
  redisCpuUsPerCall: number;
}

export interface ThroughputResults {
  calls: number;
  inFlight: number;
  rounds: number;
  connection: string;
  admissions: RunStats & { matchedShare: number };
  trivial: RunStats;
  /** admissions/s ÷ trivial/s of each round. */
  roundRatios: number[];
}

const ROUNDS = 4;
const CALLS = 40_000; // per side, in ROUNDS alternating runs
const WARMUP = 2_000;
const IN_FLIGHT = 256;
const PAYLOAD = { seed: 'bench-direct-throughput' };

function combine(runs: RunStats[]): RunStats {
  const calls = runs.reduce((n, r) => n + r.calls, 0);
  const seconds = runs.reduce((n, r) => n + r.seconds, 0);
  const redisCpuSeconds = runs.reduce((n, r) => n + r.redisCpu * r.seconds, 0);
  const clientCpuSeconds = runs.reduce((n, r) => n + r.clientCpu * r.seconds, 0);
  return {
    calls,
    seconds,
    perSecond: calls / seconds,
    redisCpu: redisCpuSeconds / seconds,
    clientCpu: clientCpuSeconds / seconds,
    redisCpuUsPerCall: (redisCpuSeconds * 1e6) / calls,
  };
}

async function measure(admin: Redis, calls: number, task: (i: number) => Promise<unknown>): Promise<RunStats> {
  const cpu0 = await redisCpuSeconds(admin);
  const own0 = process.cpuUsage();
  const start = nowMs();
  await pool(calls, IN_FLIGHT, task);
  const seconds = (nowMs() - start) / 1000;
  const own = process.cpuUsage(own0);
  const cpu1 = await redisCpuSeconds(admin);
  return {
    calls,
    seconds,
    perSecond: calls / seconds,
    redisCpu: (cpu1 - cpu0) / seconds,
    clientCpu: (own.user + own.system) / 1e6 / seconds,
    redisCpuUsPerCall: ((cpu1 - cpu0) * 1e6) / calls,
  };
}

export async function runThroughput(ctx: BenchContext, log: (line: string) => void): Promise<ThroughputResults> {
  const app = await registerApp(ctx, 'direct');
  // The production path (no test clock), on the connection kind the API uses (src/redis/connection.ts).
  const config = benchConfig(ctx.prefix, ctx.redisUrl, false);
  const redis = createRedis(config, { name: 'versus-bench-direct' });
  try {
    await waitForReady(redis, 3000);
    const store = new MatchmakingStore(redis, new Keys(ctx.prefix), { testClock: false });
    await store.preload();
    const sha = (await redis.script('LOAD', TRIVIAL_SCRIPT)) as string;

    // Ticket k pairs with its neighbour: 64 queues, many players, so nearly every other admission matches.
    let matched = 0;
    const input = (run: string, k: number) =>
      valid({ id: `${run}-${k}`, player: `u${k % 10007}`, queue: { key: `dq${(k >> 1) % 64}`, size: 2 }, payload: PAYLOAD });
    const admit = async (run: string, k: number) => {
      const outcome = await store.createTicket(app.appId, input(run, k));
      if (!('ticket' in outcome)) throw new Error(`direct admission refused: ${outcome.conflict}`);
      if (outcome.ticket.includes('"state":"matched"')) matched++;
    };
    // The trivial script gets exactly the KEYS and ARGV an admission sends.
    const trivialArgs = (run: string, k: number) => createTicketArgs(input(run, k), '0', null);
    const trivial = async (run: string, k: number) => {
      const args = trivialArgs(run, k);
      try {
        return await redis.evalsha(sha, 1, app.scope, ...args);
      } catch (error) {
        // A shared Redis may have its script cache flushed (tests do): resend the source, as ScriptRunner does.
        if (error instanceof Error && error.message.startsWith('NOSCRIPT')) return redis.eval(TRIVIAL_SCRIPT, 1, app.scope, ...args);
        throw error;
      }
    };

    await pool(WARMUP, IN_FLIGHT, (k) => admit('dw', k));
    await pool(WARMUP, IN_FLIGHT, (k) => trivial('tw', k));
    matched = 0;
    // Alternating runs, so a change in the machine's load touches both sides alike.
    const perRun = CALLS / ROUNDS;
    const trivialRuns: RunStats[] = [];
    const admissionRuns: RunStats[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const runTrivial = async () => trivialRuns.push(await measure(ctx.admin, perRun, (k) => trivial(`t${round}`, k)));
      const runAdmissions = async () => admissionRuns.push(await measure(ctx.admin, perRun, (k) => admit(`d${round}`, k)));
      if (round % 2 === 0) {
        await runTrivial();
        await runAdmissions();
      } else {
        await runAdmissions();
        await runTrivial();
      }
    }
    const trivialStats = combine(trivialRuns);
    const admissionStats = combine(admissionRuns);
    const roundRatios = admissionRuns.map((a, i) => a.perSecond / trivialRuns[i]!.perSecond);
    const matchedShare = matched / CALLS;
    log(`  admissions ${admissionStats.perSecond.toFixed(0)}/s (Redis CPU ${(admissionStats.redisCpu * 100).toFixed(0)}%, ${admissionStats.redisCpuUsPerCall.toFixed(1)} µs/call, client ${(admissionStats.clientCpu * 100).toFixed(0)}%, matched ${(matchedShare * 100).toFixed(0)}%)`);
    log(`  trivial EVALSHA ${trivialStats.perSecond.toFixed(0)}/s (Redis CPU ${(trivialStats.redisCpu * 100).toFixed(0)}%, ${trivialStats.redisCpuUsPerCall.toFixed(1)} µs/call, client ${(trivialStats.clientCpu * 100).toFixed(0)}%)`);
    return {
      calls: CALLS,
      inFlight: IN_FLIGHT,
      rounds: ROUNDS,
      roundRatios,
      connection: 'one ioredis connection from createRedis (as the API), no auto-pipelining',
      admissions: { ...admissionStats, matchedShare },
      trivial: trivialStats,
    };
  } finally {
    redis.disconnect();
    await deleteApp(ctx, app);
  }
}
