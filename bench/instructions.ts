/**
 * `npm run bench:instructions`: CPU instructions Redis spends per createTicket script call,
 * counted by valgrind's callgrind in a private redis-server on a free loopback port, against a
 * trivial EVALSHA (`return ARGV[1]`) with the same KEYS and ARGV. Instruction counts do not move
 * with the machine's load, so this is the number to compare when changing a script; the direct
 * scripts/s ratio of `npm run bench` is the same question asked in time (and kernel time for
 * the network, which callgrind does not see, is in that one only).
 *
 * Needs `valgrind` (with callgrind_control) and `redis-server` on PATH. Takes about a minute.
 * WIDE_SHAPES add three rated queues whose window holds more than one read batch.
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

/**
 * Shapes whose window holds more than one read batch (pairing.lua readWideWindow), each a queue
 * of WIDE tickets built first (test clock): every measured call is an admission that waits and
 * its cancel, counted together, so the queue keeps its shape.
 *   (a) rated: WIDE tickets of the joiner at 1000 and one of another player at 5000; the joiner
 *       at 1000 passes its own run.
 *   (b') WIDE tickets of one player at 1015 (band 10), inside the band 1010 of a ticket at -20
 *       admitted 1000 s earlier; a joiner at 1000 fits none and passes the flood.
 *   (b''') WIDE tickets of two players taking turns at 1015, 1026, 1037, … inside the band of a
 *       ticket far below; a joiner at 1000 fits none: nothing to pass, the count answers.
 */
const WIDE = 2000;
const WIDE_CALLS = 300;
const WIDE_T0 = 1_800_000_000_000;
const WIDE_SHAPES: Array<{ name: string; policy: { initial: number; widenPerSecond: number }; joiner: string; build: (admit: (id: string, player: string, rating: number) => Promise<void>, clock: (ms: number) => Promise<void>) => Promise<void> }> = [
  {
    name: '(a) rated, own run in the window',
    policy: { initial: 1, widenPerSecond: 0.001 },
    joiner: 'me',
    build: async (admit) => {
      await pool(WIDE, IN_FLIGHT, (k) => admit(`own-${k}`, 'me', 1000));
      await admit('other', 'other', 5000);
    },
  },
  {
    name: "(b') a flood in the window",
    policy: { initial: 10, widenPerSecond: 1 },
    joiner: 'joiner',
    build: async (admit, clock) => {
      await admit('old', 'old', -20);
      await clock(WIDE_T0 + 1_000_000);
      await pool(WIDE, IN_FLIGHT, (k) => admit(`flood-${k}`, 'flood', 1015));
    },
  },
  {
    name: "(b''') floods taking turns",
    policy: { initial: 10, widenPerSecond: 1 },
    joiner: 'joiner',
    build: async (admit, clock) => {
      const wait = 11 * WIDE + 100; // seconds: the old ticket's band then spans the floods
      await admit('old', 'old', 1000 - (wait + 30));
      await clock(WIDE_T0 + wait * 1000);
      await pool(WIDE, IN_FLIGHT, (k) => admit(`turn-${k}`, k % 2 ? 'flood-b' : 'flood-a', 1015 + 11 * k));
    },
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

function dumpFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => /^callgrind\.out\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
}

/** Total instructions of the newest callgrind dump in `dir`. */
function lastDumpInstructions(dir: string): number {
  const text = readFileSync(join(dir, dumpFiles(dir).at(-1)!), 'utf8');
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
  // Refused connections while valgrind starts redis-server are expected (waitForPing says when it
  // never answers); without a listener ioredis printed each one as an unhandled error.
  redis.on('error', () => undefined);
  const pid = String(child.pid);
  /** Instructions per call of `run`, which makes `calls` calls. */
  const dumpAfter = async (label: string, run: () => Promise<void>, calls = CALLS): Promise<number> => {
    execFileSync('callgrind_control', ['--zero', pid], { stdio: 'ignore' });
    await run();
    const before = dumpFiles(dir).length;
    execFileSync('callgrind_control', [`--dump=${label}`, pid], { stdio: 'ignore' });
    // A dump that was not written would leave the previous one to be read as this one.
    if (dumpFiles(dir).length !== before + 1) throw new Error(`callgrind wrote no dump for ${label}`);
    return lastDumpInstructions(dir) / calls;
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

    const clocked = new MatchmakingStore(redis, keys, { testClock: true });
    await clocked.preload();
    const wideRows: Array<[string, number]> = [];
    for (const [n, shape] of WIDE_SHAPES.entries()) {
      const app = `wide${n}`;
      const queue = { key: 'q', size: 2 as const, rating: shape.policy };
      const clock = async (ms: number) => {
        await redis.set(keys.testClock(app), String(ms));
      };
      const admit = async (id: string, player: string, rating: number) => {
        const outcome = await clocked.createTicket(app, valid({ id, player, queue, rating, payload: { id } }));
        if (!('ticket' in outcome) || (JSON.parse(outcome.ticket) as { state: string }).state !== 'waiting') throw new Error(`${shape.name}: ${id} did not wait`);
      };
      const joinAndCancel = async (k: number) => {
        await admit(`join-${k}`, shape.joiner, 1000);
        await clocked.cancelTicket(app, `join-${k}`);
      };
      await clock(WIDE_T0);
      await shape.build(admit, clock);
      for (let k = 0; k < 50; k++) await joinAndCancel(WIDE_CALLS + k);
      const perPair = await dumpAfter(
        `wide${n}`,
        async () => {
          for (let k = 0; k < WIDE_CALLS; k++) await joinAndCancel(k);
        },
        WIDE_CALLS,
      );
      wideRows.push([shape.name, perPair]);
    }

    console.log(`Redis instructions per script call (callgrind, ${CALLS} calls each, half wait and half match)\n`);
    const line = (call: string, n: number) =>
      console.log(`| ${call.padEnd(35)} | ${Math.round(n).toLocaleString('en-US').padStart(12)} | ${`${(n / trivial).toFixed(2)}x`.padStart(16)} |`);
    console.log(`| ${'call'.padEnd(35)} | instructions | ratio to trivial |`);
    console.log(`|:${'-'.repeat(35)}-|-------------:|-----------------:|`);
    line('trivial EVALSHA', trivial);
    for (const [name, n] of rows) line(`createTicket, ${name}`, n);
    console.log(`\nA window of more than one batch (${WIDE} tickets), per admission that waits and its cancel (${WIDE_CALLS} of each, test clock)\n`);
    console.log(`| ${'shape'.padEnd(35)} | instructions |`);
    console.log(`|:${'-'.repeat(35)}-|-------------:|`);
    for (const [name, n] of wideRows) console.log(`| ${name.padEnd(35)} | ${Math.round(n).toLocaleString('en-US').padStart(12)} |`);
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
