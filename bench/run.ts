/**
 * `npm run bench [-- --quick]`: Versus's cost goals (DESIGN.md "Redis layout"), measured in one
 * run on one machine, printed as a table and written to bench/results/ (<timestamp>.json,
 * latest.json, latest.svg). Every key lives under a prefix of its own, deleted at the end, also
 * on failure or Ctrl-C. The goals are reported, never asserted: the exit status is non-zero only
 * when a section could not run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { type AdmissionResults, runAdmission } from './lib/admission.js';
import { type BenchContext, benchPrefix, deleteKeys, info, nowMs, openContext } from './lib/common.js';
import { type HttpResults, runHttp, stopChild } from './lib/http.js';
import { type ListResults, runList } from './lib/list.js';
import { type MemoryResults, runMemory, TICKETS } from './lib/memory.js';
import { evaluate, machine, machineLine, type Row, svg, table } from './lib/report.js';
import { runThroughput, type ThroughputResults } from './lib/throughput.js';

const USAGE = `usage: npm run bench [-- --quick] [-- --only memory,admission,direct,http,list]
  --quick   listTickets with 100k tickets instead of 1M (reported as such)
  --only    run some sections (results are still written; rows of skipped sections are absent)
  REDIS_URL (default redis://127.0.0.1:6379) is the Redis under test.`;

const SECTIONS = ['memory', 'admission', 'direct', 'http', 'list'] as const;
type Section = (typeof SECTIONS)[number];

function parseArgs(argv: string[]): { quick: boolean; only: Set<Section> } {
  let quick = false;
  let only = new Set<Section>(SECTIONS);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--quick') quick = true;
    else if (arg === '--only' || arg.startsWith('--only=')) {
      const list = arg === '--only' ? argv[++i] ?? '' : arg.slice('--only='.length);
      const names = list.split(',').filter(Boolean);
      for (const name of names) if (!SECTIONS.includes(name as Section)) throw new Error(`unknown section ${name}\n${USAGE}`);
      only = new Set(names as Section[]);
    } else if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}\n${USAGE}`);
  }
  return { quick, only };
}

const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

interface Results {
  memory?: MemoryResults;
  admission?: AdmissionResults;
  direct?: ThroughputResults;
  http?: HttpResults;
  list?: ListResults;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

function rows(results: Results, errors: Map<Section, string>, only: Set<Section>): Row[] {
  const out: Row[] = [];
  const errorRow = (section: Section, metric: string): Row => ({
    group: section, metric, value: null, unit: '', baseline: null, baselineNote: '', ratio: null, goal: null, pass: false, chart: null, error: errors.get(section) ?? 'failed',
  });
  const le2 = { on: 'ratio', op: '<=', limit: 2, text: '≤ 2x' } as const;
  const depthName = (d: number) => (d >= 1000 ? `${d / 1000}k` : String(d));

  if (only.has('admission')) {
    const a = results.admission;
    if (!a) out.push(errorRow('admission', 'admission script time'));
    else {
      // DESIGN.md's shapes against depth 0, with the goal at 100k; `fromDepth` for a shape of ours
      // whose cost starts at that depth (no goal: the rows show how it grows from there).
      const shape = (label: string, short: string, series: Array<{ depth: number; serverUs: number }>, fromDepth = 0) => {
        const base = series.find((s) => s.depth === fromDepth)!;
        const goal = fromDepth === 0;
        for (const s of series.filter((s) => s.depth > 0)) {
          const ratio = s.serverUs / base.serverUs;
          const atGoal = goal && s.depth === 100_000;
          out.push({
            group: 'admission', metric: `admission ${label}, depth ${depthName(s.depth)}`, value: s.serverUs, unit: 'µs', baseline: base.serverUs, baselineNote: `at ${depthName(fromDepth)}`,
            ratio: s === base ? null : ratio, goal: atGoal ? le2 : null, pass: null,
            chart: s === base ? null : { ratio, goal: atGoal ? 2 : null, label: `${short} ${depthName(s.depth)}` },
          });
        }
      };
      shape('(a) own tickets at head', '(a) own head', a.ownHead);
      shape('(a) own tickets at head, rated', '(a) own head, rated', a.ownHeadRated);
      shape('(b) incompatible rated', '(b) rated', a.rated);
      shape("(b') one player's flood in a wide window", "(b') flood", a.floodInWindow);
      shape("(b'') the flood's player also fits, nearer", "(b'') flood + fit", a.floodWithFit);
      shape("(b''') two players' floods taking turns", "(b''') turns", a.turns);
      shape("(b''') + fit, one fitting ticket nearest", "(b''') turns + fit", a.turnsWithFit);
      shape('(d) oldest partner behind many others (rating tree)', '(d) tree', a.oldestBehind, 1_000);
      // The admission that builds a queue's tree pays O(n) once, like a burst of expired tickets:
      // per waiting ticket against depth 1k.
      const builds = a.oldestBehind.filter((s) => s.depth > 0 && typeof s.treeBuildUs === 'number');
      const firstBuild = builds[0];
      const basePerTicket = firstBuild ? firstBuild.treeBuildUs! / firstBuild.depth : 0;
      for (const s of builds) {
        const perTicket = s.treeBuildUs! / s.depth;
        const ratio = perTicket / basePerTicket;
        out.push({
          group: 'admission', metric: `admission (d) that builds the rating tree at ${depthName(s.depth)}, per waiting ticket`, value: perTicket, unit: 'µs',
          baseline: s === firstBuild ? null : basePerTicket, baselineNote: s === firstBuild ? '(baseline)' : 'at 1k',
          ratio: s === firstBuild ? null : ratio, goal: null, pass: null,
          chart: s === firstBuild ? null : { ratio, goal: null, label: `(d) build/ticket ${depthName(s.depth)}` },
        });
      }
      const first = a.burst[0]!;
      for (const b of a.burst) {
        const ratio = b.perRetiredUs / first.perRetiredUs;
        out.push({
          group: 'admission', metric: `admission (c) expired burst of ${depthName(b.depth)}, per retired ticket`, value: b.perRetiredUs, unit: 'µs',
          baseline: b === first ? null : first.perRetiredUs, baselineNote: b === first ? '(baseline)' : 'at 1k',
          ratio: b === first ? null : ratio, goal: b.depth === 100_000 ? le2 : null, pass: null,
          chart: b === first ? null : { ratio, goal: b.depth === 100_000 ? 2 : null, label: `(c) retire/ticket ${depthName(b.depth)}` },
        });
      }
      for (const b of a.burst) {
        const ratio = b.nextServerUs / b.baselineUs;
        out.push({
          group: 'admission', metric: `admission (c) 200 admissions after burst of ${depthName(b.depth)}`, value: b.nextServerUs, unit: 'µs', baseline: b.baselineUs, baselineNote: 'no burst',
          ratio, goal: b.depth === 100_000 ? le2 : null, pass: null, chart: { ratio, goal: b.depth === 100_000 ? 2 : null, label: `(c) 200 after burst ${depthName(b.depth)}` },
        });
      }
    }
  }
  if (only.has('http')) {
    const h = results.http;
    if (!h) out.push(errorRow('http', 'HTTP createTicket, 1 API process'));
    else {
      const ratio = h.api.perSecond / h.floor.perSecond;
      out.push({
        group: 'http', metric: 'HTTP createTicket, 1 API process', value: h.api.perSecond, unit: 'req/s', baseline: h.floor.perSecond, baselineNote: 'floor',
        ratio, goal: { on: 'ratio', op: '>=', limit: 0.5, text: '≥ 0.5' }, pass: null, chart: { ratio, goal: 0.5, label: 'HTTP API / floor' },
      });
    }
  }
  if (only.has('direct')) {
    const d = results.direct;
    if (!d) out.push(errorRow('direct', 'admission scripts on one Redis, direct'));
    else {
      const ratio = d.admissions.perSecond / d.trivial.perSecond;
      out.push({
        group: 'direct', metric: 'admission scripts on one Redis, direct', value: d.admissions.perSecond, unit: '/s', baseline: d.trivial.perSecond, baselineNote: 'trivial',
        ratio, goal: { on: 'ratio', op: '>=', limit: 0.4, text: '≥ 0.4' }, pass: null, chart: { ratio, goal: 0.4, label: 'direct admissions / trivial' },
      });
      // The same runs seen from Redis: calls per second of Redis CPU (the trivial run is client-bound here).
      const perCpu = (us: number) => 1e6 / us;
      const cpuRatio = perCpu(d.admissions.redisCpuUsPerCall) / perCpu(d.trivial.redisCpuUsPerCall);
      out.push({
        group: 'direct', metric: 'same, per second of Redis CPU (info)', value: perCpu(d.admissions.redisCpuUsPerCall), unit: '/s', baseline: perCpu(d.trivial.redisCpuUsPerCall), baselineNote: 'trivial',
        ratio: cpuRatio, goal: null, pass: null, chart: { ratio: cpuRatio, goal: null, label: 'direct, per Redis CPU-second' },
      });
    }
  }
  if (only.has('memory')) {
    const m = results.memory;
    if (!m) out.push(errorRow('memory', 'Redis memory per terminal ticket'));
    else {
      out.push({
        group: 'memory', metric: `Redis memory per terminal ticket${m.disturbed ? ' (disturbed by other clients)' : ''}`, value: m.bytesPerTicket, unit: 'B', baseline: null, baselineNote: '', ratio: null,
        goal: { on: 'value', op: '<=', limit: 600, text: '≤ 600 B' }, pass: null, chart: { ratio: m.bytesPerTicket / 600, goal: 1, label: 'memory / 600 B budget' },
      });
    }
  }
  if (only.has('list')) {
    const l = results.list;
    if (!l) out.push(errorRow('list', 'listTickets page'));
    else {
      const size = l.large.tickets >= 1_000_000 ? `${l.large.tickets / 1_000_000}M` : `${l.large.tickets / 1000}k`;
      for (const [kind, label] of [['first', 'first page'], ['middle', 'middle page'], ['player', "one player's page"]] as const) {
        const ratio = l.large[kind] / l.small[kind];
        out.push({
          group: 'list', metric: `listTickets ${label}, ${size} tickets${l.quick ? ' (--quick)' : ''}`, value: l.large[kind], unit: 'µs', baseline: l.small[kind], baselineNote: 'at 1k',
          ratio, goal: le2, pass: null, chart: { ratio, goal: 2, label: `list ${kind} ${size} / 1k` },
        });
      }
    }
  }
  return out.map(evaluate);
}

async function main(): Promise<number> {
  const { quick, only } = parseArgs(process.argv.slice(2));
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  const loadStart = os.loadavg();
  const started = new Date();
  const startMs = nowMs();
  const prefix = benchPrefix();
  const children = new Set<Parameters<typeof stopChild>[0]>();
  let ctx: BenchContext | null = null;

  let cleaning: Promise<void> | null = null;
  const cleanup = () => {
    cleaning ??= (async () => {
      for (const child of children) await stopChild(child).catch(() => {});
      if (ctx) {
        const deleted = await deleteKeys(ctx.admin, `${prefix}:*`).catch((error: Error) => {
          log(`cleanup failed: ${error.message} (delete keys matching ${prefix}:* by hand)`);
          return 0;
        });
        log(`cleanup: deleted ${deleted} keys under ${prefix}:`);
        ctx.bulk.disconnect();
        ctx.admin.disconnect();
      }
    })();
    return cleaning;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping and cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }

  const results: Results = {};
  const errors = new Map<Section, string>();
  let redisVersion = '';
  let allocator = '';
  try {
    ctx = await openContext(prefix, redisUrl);
    const server = await info(ctx.admin, 'server');
    redisVersion = server['redis_version'] ?? '';
    allocator = (await info(ctx.admin, 'memory'))['mem_allocator'] ?? '';
    log(`versus bench: key prefix ${prefix}, Redis ${redisVersion} at ${redisUrl}${quick ? ', --quick' : ''}`);
    const run = async <K extends Section>(section: K, title: string, body: () => Promise<unknown>) => {
      if (!only.has(section)) return;
      const t = nowMs();
      log(`\n${title}`);
      try {
        await body();
        log(`  (${((nowMs() - t) / 1000).toFixed(1)} s)`);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        errors.set(section, message.split('\n')[0]!);
        log(`  FAILED: ${error instanceof Error ? (error.stack ?? message) : message}`);
      }
    };
    const c = ctx;
    // Memory first, while Redis holds nothing of this run (used_memory is a global reading).
    await run('memory', `Memory: ${TICKETS.toLocaleString('en-US')} terminal tickets in a fresh app`, async () => {
      results.memory = await runMemory(c, log);
    });
    await run('admission', 'Admission script time by queue depth (median in Redis)', async () => {
      results.admission = await runAdmission(c, log);
    });
    await run('direct', 'Admission scripts per second, direct (no HTTP)', async () => {
      results.direct = await runThroughput(c, log);
    });
    await run('http', 'HTTP createTicket throughput: API vs floor server', async () => {
      results.http = await runHttp(c, log, children);
    });
    await run('list', `listTickets page time: 1k vs ${quick ? '100k (--quick)' : '1M'} tickets`, async () => {
      results.list = await runList(c, quick ? 100_000 : 1_000_000, quick, log);
    });
  } finally {
    await cleanup();
  }

  const durationS = (nowMs() - startMs) / 1000;
  const m = machine(redisVersion, allocator, loadStart);
  const table_rows = rows(results, errors, only);
  const title = `Versus bench ${started.toISOString()}`;
  const printed = table(table_rows);
  console.log(`\n${title} (${durationS.toFixed(0)} s${quick ? ', --quick' : ''})`);
  console.log(`machine: ${machineLine(m)}`);
  if (results.memory) {
    const cfg = results.memory.redisConfig;
    console.log(`redis config: ${Object.entries(cfg).map(([k, v]) => `${k}=${v}`).join(', ')}`);
  }
  console.log(`\n${printed}\n`);

  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  const json = JSON.stringify({ title, startedAt: started.toISOString(), durationS, quick, sections: [...only], machine: m, rows: table_rows, errors: Object.fromEntries(errors), results }, null, 2);
  const chart = svg(table_rows, title, machineLine(m));
  writeFileSync(`${RESULTS_DIR}${stamp}.json`, `${json}\n`);
  writeFileSync(`${RESULTS_DIR}latest.json`, `${json}\n`);
  writeFileSync(`${RESULTS_DIR}${stamp}.svg`, chart);
  writeFileSync(`${RESULTS_DIR}latest.svg`, chart);
  log(`wrote bench/results/${stamp}.json, latest.json, latest.svg`);
  return errors.size > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);
