/**
 * HTTP createTicket throughput of one API process, against a floor server (bench/floor-server.ts)
 * under the same closed-loop load. Each server runs in its own child process; the load driver
 * runs in this (the bench) process and drives one server at a time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { signAppToken } from '../../src/shared/tokens.js';
import { type BenchContext, deleteApp, nowMs, percentile, redisCpuSeconds, registerApp } from './common.js';

export interface LoadOptions {
  connections: number;
  warmupMs: number;
  durationMs: number;
}

export interface LoadStats {
  requests: number;
  errors: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Share of 200 answers whose ticket was matched (floor: not applicable). */
  matchedShare: number;
  redisCpu: number;
  /** CPU of the server process over the measured window, as a share of one core. */
  serverCpu: number;
  /** CPU of the load driver (this process) over the measured window. */
  driverCpu: number;
}

export interface HttpResults {
  load: LoadOptions;
  driver: string;
  api: LoadStats;
  floor: LoadStats;
  /** API requests ÷ floor requests of each round. */
  roundRatios: number[];
}

/** Per server: warm-up, then `durationMs` measured in ROUNDS alternating windows. */
export const LOAD: LoadOptions = { connections: 48, warmupMs: 1500, durationMs: 6000 };
const ROUNDS = 4;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Child {
  process: ChildProcess;
  url: string;
}

async function startChild(script: string, env: Record<string, string>): Promise<Child> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL(`../${script}`, import.meta.url))], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start within 20 s`)), 20_000);
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before listening`)));
    lines.once('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { url: string }).url);
    });
  });
  return { process: child, url };
}

export async function stopChild(child: Child): Promise<void> {
  if (child.process.exitCode !== null) return;
  const exited = new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  child.process.kill('SIGTERM');
  const timer = setTimeout(() => child.process.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** CPU seconds of one process so far, from /proc (Linux). */
function processCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    // Fields after the command name: utime is field 14, stime 15 (1-based, whole line).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // clock ticks: 100 Hz on Linux
  } catch {
    return NaN;
  }
}

function post(agent: Agent, url: URL, body: Buffer, token: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length, authorization: `Bearer ${token}` },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

interface Target {
  name: string;
  child: Child;
  agent: Agent;
  url: URL;
  run: string;
  next: number;
}

interface Tally {
  requests: number;
  errors: number;
  matched: number;
  latencies: number[];
  seconds: number;
  /** Wall time of the windows including their last answers (CPU shares are over this). */
  wallSeconds: number;
  redisCpuSeconds: number;
  serverCpuSeconds: number;
  driverCpuSeconds: number;
  firstError: string;
}

const emptyTally = (): Tally => ({
  requests: 0, errors: 0, matched: 0, latencies: [], seconds: 0, wallSeconds: 0, redisCpuSeconds: 0, serverCpuSeconds: 0, driverCpuSeconds: 0, firstError: '',
});

/** A createTicket envelope with a unique ID: ticket k shares one of 64 queues with k±1, players differ. */
function body(target: Target): Buffer {
  const n = target.next++;
  return Buffer.from(
    `{"operation":"createTicket","input":{"id":"${target.run}-${n}","player":"u${n % 10007}","queue":{"key":"hq${(n >> 1) % 64}","size":2},"payload":{"seed":"bench-http-payload"}}}`,
  );
}

/**
 * One closed-loop window: `connections` loops, each sending one request at a time on a
 * keep-alive connection, for `ms`. Answers that arrive after the window are not counted (the
 * next window starts once they are in).
 */
async function window(ctx: BenchContext, target: Target, token: string, connections: number, ms: number, tally: Tally | null): Promise<void> {
  const redis0 = await redisCpuSeconds(ctx.admin);
  const server0 = processCpuSeconds(target.child.process.pid);
  const driver0 = process.cpuUsage();
  const start = nowMs();
  const end = start + ms;
  const loop = async () => {
    while (nowMs() < end) {
      const sent = nowMs();
      const answer = await post(target.agent, target.url, body(target), token);
      const done = nowMs();
      if (tally === null || done > end) continue;
      tally.requests++;
      tally.latencies.push(done - sent);
      if (answer.status !== 200) {
        tally.errors++;
        tally.firstError ||= `${answer.status} ${answer.text.slice(0, 200)}`;
      } else if (answer.text.includes('"state":"matched"')) {
        tally.matched++;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  if (tally === null) return;
  const driver = process.cpuUsage(driver0);
  tally.seconds += ms / 1000;
  tally.wallSeconds += (nowMs() - start) / 1000;
  tally.serverCpuSeconds += processCpuSeconds(target.child.process.pid) - server0;
  tally.driverCpuSeconds += (driver.user + driver.system) / 1e6;
  tally.redisCpuSeconds += (await redisCpuSeconds(ctx.admin)) - redis0;
}

function statsOf(tally: Tally): LoadStats {
  if (tally.errors > 0) throw new Error(`${tally.errors} of ${tally.requests} requests failed, first: ${tally.firstError}`);
  return {
    requests: tally.requests,
    errors: tally.errors,
    perSecond: tally.requests / tally.seconds,
    p50Ms: percentile(tally.latencies, 50),
    p99Ms: percentile(tally.latencies, 99),
    matchedShare: tally.requests === 0 ? 0 : tally.matched / tally.requests,
    redisCpu: tally.redisCpuSeconds / tally.wallSeconds,
    serverCpu: tally.serverCpuSeconds / tally.wallSeconds,
    driverCpu: tally.driverCpuSeconds / tally.wallSeconds,
  };
}

export async function runHttp(ctx: BenchContext, log: (line: string) => void, children: Set<Child>): Promise<HttpResults> {
  const app = await registerApp(ctx, 'http');
  const env = {
    REDIS_URL: ctx.redisUrl,
    VERSUS_KEY_PREFIX: ctx.prefix,
    VERSUS_TEST_CLOCK: '0',
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    NODE_ENV: 'production',
  };
  const targets: Target[] = [];
  try {
    for (const [name, script, run] of [['API', 'api-server.ts', 'ha'], ['floor', 'floor-server.ts', 'hf']] as const) {
      const child = await startChild(script, env);
      children.add(child);
      targets.push({ name, child, agent: new Agent({ keepAlive: true, maxSockets: LOAD.connections }), url: new URL('/api/matchmaking', child.url), run, next: 0 });
    }
    // One token for the section (60 s lifetime; the section lasts about 15 s), as a client reuses it.
    const token = await signAppToken(app.secretKey, app.origin);
    for (const target of targets) await window(ctx, target, token, LOAD.connections, LOAD.warmupMs, null);
    // Alternating windows, so a change in the machine's load touches both servers alike.
    const tallies = targets.map(emptyTally);
    const windowMs = LOAD.durationMs / ROUNDS;
    const roundRatios: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const before = tallies.map((t) => t.requests);
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const i of order) await window(ctx, targets[i]!, token, LOAD.connections, windowMs, tallies[i]!);
      roundRatios.push((tallies[0]!.requests - before[0]!) / (tallies[1]!.requests - before[1]!));
    }
    const [api, floor] = tallies.map(statsOf) as [LoadStats, LoadStats];
    log(`  API ${api.perSecond.toFixed(0)} req/s (p50 ${api.p50Ms.toFixed(1)} ms, p99 ${api.p99Ms.toFixed(1)} ms, matched ${(api.matchedShare * 100).toFixed(0)}%; CPU: server ${(api.serverCpu * 100).toFixed(0)}%, Redis ${(api.redisCpu * 100).toFixed(0)}%, driver ${(api.driverCpu * 100).toFixed(0)}%)`);
    log(`  floor ${floor.perSecond.toFixed(0)} req/s (p50 ${floor.p50Ms.toFixed(1)} ms, p99 ${floor.p99Ms.toFixed(1)} ms; CPU: server ${(floor.serverCpu * 100).toFixed(0)}%, Redis ${(floor.redisCpu * 100).toFixed(0)}%, driver ${(floor.driverCpu * 100).toFixed(0)}%)`);
    log(`  ratio by round: ${roundRatios.map((r) => r.toFixed(2)).join(', ')}`);
    return {
      load: LOAD,
      driver: `closed loop in the bench process: ${LOAD.connections} keep-alive connections (node:http Agent) per server; both servers run at once, each in its own child process, and are driven in turn: ${LOAD.warmupMs} ms warm-up each, then ${ROUNDS} alternating windows of ${windowMs} ms each; driver, servers and Redis share the machine's cores`,
      api,
      floor,
      roundRatios,
    };
  } finally {
    for (const target of targets) {
      target.agent.destroy();
      await stopChild(target.child);
      children.delete(target.child);
    }
    await deleteApp(ctx, app);
  }
}
