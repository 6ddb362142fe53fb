/**
 * `npm run bench:instructions`: CPU instructions Redis spends per createTicket script call,
 * counted by valgrind's callgrind in a private redis-server on a free loopback port, against a
 * trivial EVALSHA (`return ARGV[1]`) with the same KEYS and ARGV. Instruction counts do not move
 * with the machine's load, so this is the number to compare when changing a script; the direct
 * scripts/s ratio of `npm run bench` is the same question asked in time (and kernel time for
 * the network, which callgrind does not see, is in that one only).
 *
 * Needs `valgrind` (with callgrind_control) and `redis-server` on PATH. Takes about a minute.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createTicketArgs, MatchmakingStore } from '../src/matchmaking/store.js';
import { Keys } from '../src/redis/keys.js';
import type { TicketInput } from '../src/shared/matchmaking-types.js';
import { pool, sleep, valid } from './lib/common.js';
import { TRIVIAL_SCRIPT } from './lib/throughput.js';

const CALLS = 2000; // per shape, after WARMUP calls of the same shape
const WARMUP = 500;
const IN_FLIGHT = 32;

/** Each shape pairs ticket k with ticket k^1 in 64 queues, so half the admissions wait and half match. */
const SHAPES: Array<{ name: string; input: (k: number) => TicketInput }> = [
  { name: 'unrated', input: (k) => ({ id: `u-${k}`, player: `p${k % 10007}`, queue: { key: `uq${(k >> 1) % 64}`, size: 2 }, payload: { k } }) },
  {
    name: 'rated',
    input: (k) => ({
      id: `r-${k}`,
      player: `p${k % 10007}`,
      queue: { key: `rq${(k >> 1) % 64}`, size: 2, rating: { initial: 50, widenPerSecond: 1 } },
      rating: 1000 + (k % 7),
      payload: { k },
    }),
  },
  {
    name: 'unrated, with cutoffs',
    input: (k) => ({ id: `x-${k}`, player: `p${k % 10007}`, queue: { key: `xq${(k >> 1) % 64}`, size: 2 }, payload: { k }, expiresAt: 4_000_000_000_000 }),
  },
];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function have(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function waitForPing(redis: Redis, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`redis-server under valgrind exited (${child.exitCode})`);
    try {
      if ((await redis.ping()) === 'PONG') return;
    } catch {
      // still starting: valgrind makes Redis slow to come up
    }
    await sleep(100);
  }
  throw new Error('redis-server under valgrind did not answer PING within 20 s');
}

/** Total instructions of the newest callgrind dump in `dir`. */
function lastDumpInstructions(dir: string): number {
  const dumps = readdirSync(dir)
    .filter((f) => /^callgrind\.out\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  const text = readFileSync(join(dir, dumps.at(-1)!), 'utf8');
  const total = /^(?:summary|totals): (\d+)/m.exec(text);
  if (!total) throw new Error('callgrind dump without totals');
  return Number(total[1]);
}

async function main(): Promise<void> {
  for (const tool of ['valgrind', 'callgrind_control', 'redis-server']) {
    if (!have(tool)) {
      console.error(`bench:instructions needs ${tool} on PATH (Debian: apt-get install valgrind redis-server)`);
      process.exit(2);
    }
  }
  const dir = mkdtempSync(join(os.tmpdir(), 'versus-callgrind-'));
  const port = await freePort();
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${join(dir, 'callgrind.out')}`, 'redis-server', '--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 100 });
  const pid = String(child.pid);
  const dumpAfter = async (label: string, run: () => Promise<void>): Promise<number> => {
    execFileSync('callgrind_control', ['--zero', pid], { stdio: 'ignore' });
    await run();
    execFileSync('callgrind_control', [`--dump=${label}`, pid], { stdio: 'ignore' });
    return lastDumpInstructions(dir) / CALLS;
  };
  try {
    await redis.connect().catch(() => undefined);
    await waitForPing(redis, child);
    const keys = new Keys('vi');
    const store = new MatchmakingStore(redis, keys, { testClock: false });
    await store.preload();
    const sha = (await redis.script('LOAD', TRIVIAL_SCRIPT)) as string;
    const scope = keys.appScope('instructions');

    const trivialArgs = createTicketArgs(valid(SHAPES[0]!.input(0)), '0', null); // what an admission sends
    await pool(WARMUP, IN_FLIGHT, () => redis.evalsha(sha, 1, scope, ...trivialArgs));
    const trivial = await dumpAfter('trivial', () => pool(CALLS, IN_FLIGHT, () => redis.evalsha(sha, 1, scope, ...trivialArgs)));

    const rows: Array<[string, number]> = [];
    for (const shape of SHAPES) {
      const admit = async (k: number) => {
        const outcome = await store.createTicket('instructions', valid(shape.input(k)));
        if (!('ticket' in outcome)) throw new Error(`${shape.name}: admission refused (${outcome.conflict})`);
      };
      await pool(WARMUP, IN_FLIGHT, (k) => admit(CALLS + k));
      rows.push([shape.name, await dumpAfter(shape.name, () => pool(CALLS, IN_FLIGHT, admit))]);
    }

    console.log(`Redis instructions per script call (callgrind, ${CALLS} calls each, half wait and half match)\n`);
    const line = (call: string, n: number) =>
      console.log(`| ${call.padEnd(35)} | ${Math.round(n).toLocaleString('en-US').padStart(12)} | ${`${(n / trivial).toFixed(2)}x`.padStart(16)} |`);
    console.log(`| ${'call'.padEnd(35)} | instructions | ratio to trivial |`);
    console.log(`|:${'-'.repeat(35)}-|-------------:|-----------------:|`);
    line('trivial EVALSHA', trivial);
    for (const [name, n] of rows) line(`createTicket, ${name}`, n);
  } finally {
    redis.disconnect();
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
