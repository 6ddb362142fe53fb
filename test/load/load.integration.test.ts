import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadOptions } from '../../src/load/options.js';
import type { LoadReport, ProgressSnapshot } from '../../src/load/report.js';
import { LoadRunError, runLoad } from '../../src/load/runner.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { Harness, type TestApp } from '../helpers/harness.js';
import { REPO_ROOT, runVersus } from '../helpers/processes.js';

let harness: Harness;

beforeAll(async () => {
  harness = await Harness.start();
});
afterAll(async () => {
  await harness?.stop();
});

function optionsFor(app: TestApp, overrides: Partial<LoadOptions> = {}): LoadOptions {
  return {
    url: harness.url,
    origin: app.origin,
    key: app.secretKey,
    model: { kind: 'concurrency', workers: 4 },
    durationMs: 2000,
    timeoutMs: 10_000,
    players: 20,
    queues: 2,
    rated: 0.3,
    cancel: 0.3,
    seed: 12345,
    idPrefix: 'itest-',
    json: false,
    ...overrides,
  };
}

/** Every ticket of the app, through listTickets pages. */
async function allTickets(app: TestApp): Promise<Array<{ id: string; state: string; match?: { id: string } }>> {
  const tickets: Array<{ id: string; state: string; match?: { id: string } }> = [];
  let cursor: string | null = null;
  do {
    const reply: { status: number; body: any } = await harness.call(app, 'listTickets', cursor === null ? {} : { cursor });
    expect(reply.status).toBe(200);
    tickets.push(...reply.body.tickets);
    cursor = reply.body.nextCursor;
  } while (cursor !== null);
  return tickets;
}

/** Every request answered is counted once, as ok or as an error. */
function expectAccounted(report: LoadReport): void {
  const { admissions, cancels } = report;
  expect(admissions.ok + admissions.errors).toBe(admissions.sent);
  expect(admissions.states.waiting + admissions.states.matched + admissions.states.cancelled).toBe(admissions.ok);
  expect(admissions.latencyMs.count).toBe(admissions.sent);
  expect(cancels.ok + cancels.errors).toBe(cancels.sent);
  expect(cancels.states.cancelled + cancels.states.matched).toBe(cancels.ok);
}

describe('versus load against a real API', () => {
  it('closed model: reports what it did, and the API holds exactly the admissions it reports', async () => {
    const app = await harness.registerApp();
    const progress: ProgressSnapshot[] = [];
    const report = await runLoad(optionsFor(app), { onProgress: (p) => progress.push(p), progressIntervalMs: 250, runId: 'closed01' });

    expectAccounted(report);
    expect(report.admissions.sent).toBeGreaterThan(0);
    expect(report.errors).toEqual({});
    expect(report.admissions.errors).toBe(0);
    expect(report.matches.pairs).toBeGreaterThan(0);
    expect(report.matches.matchedAdmissions).toBeGreaterThan(0);
    expect(report.admissions.latencyMs.p50).toBeGreaterThan(0);
    expect(report.admissions.latencyMs.p99).toBeLessThanOrEqual(report.admissions.latencyMs.max);
    expect(report.run).toMatchObject({ id: 'closed01', model: 'concurrency', concurrency: 4, seed: 12345 });
    expect(progress.length).toBeGreaterThan(0);

    // The app's tickets are exactly this run's accepted admissions, in the states reported.
    const tickets = await allTickets(app);
    expect(tickets.length).toBe(report.admissions.ok);
    expect(tickets.every((t) => t.id.startsWith('itest-closed01-t'))).toBe(true);
    expect(new Set(tickets.map((t) => t.id)).size).toBe(tickets.length);
    const matched = tickets.filter((t) => t.state === 'matched');
    // Every pair is two of this run's tickets; the joining one answered matched at admission.
    expect(matched.length).toBe(2 * report.matches.pairs);
    expect(new Set(matched.map((t) => t.match!.id)).size).toBe(report.matches.pairs);
    expect(report.matches.pairs).toBe(report.matches.matchedAdmissions);
    expect(tickets.filter((t) => t.state === 'cancelled').length).toBe(report.cancels.states.cancelled);
  });

  it('open model: every admission due is sent or reported unsent, and latency counts from the schedule', async () => {
    const app = await harness.registerApp();
    const report = await runLoad(optionsFor(app, { model: { kind: 'rate', perSecond: 100, maxInFlight: 8 }, durationMs: 1000, cancel: 0 }));
    expectAccounted(report);
    expect(report.run).toMatchObject({ model: 'rate', rate: 100, maxInFlight: 8, concurrency: null });
    // Admissions k = 0..99 are due at k * 10 ms, all inside the 1 s window.
    expect(report.admissions.sent + report.admissions.unsent).toBe(100);
    expect(report.admissions.errors).toBe(0);
    expect(report.cancels.sent).toBe(0);
    expect((await allTickets(app)).length).toBe(report.admissions.ok);
  });

  it('two runs with the same seed never collide', async () => {
    const app = await harness.registerApp();
    const options = optionsFor(app, { durationMs: 300, model: { kind: 'concurrency', workers: 2 } });
    const first = await runLoad(options);
    const second = await runLoad(options);
    expect(first.run.id).not.toBe(second.run.id);
    expect(first.errors).toEqual({});
    expect(second.errors).toEqual({});
    expect((await allTickets(app)).length).toBe(first.admissions.ok + second.admissions.ok);
  });

  it('refuses to start when the API refuses the app', async () => {
    const app = await harness.registerApp();
    const stranger = optionsFor(app, { key: generateKeyPair().secretKey });
    await expect(runLoad(stranger)).rejects.toThrow(LoadRunError);
    await expect(runLoad(stranger)).rejects.toThrow(/refused the app .* \(unauthenticated\): check --origin and --key/);
    expect(await allTickets(app)).toEqual([]);
  });

  it('runs through the CLI and prints one JSON report', async () => {
    const app = await harness.registerApp();
    const args = ['load', '--url', harness.url, '--origin', app.origin, '--duration', '1s', '--concurrency', '2', '--players', '10', '--queues', '1', '--json'];
    const { code, stdout, stderr } = await runVersus(args, { SERVICE_APP_KEY: app.secretKey, SERVICE_API_URL: '', VERSUS_APP_ORIGIN: '' });
    expect(code, stderr).toBe(0);
    expect(stderr).toBe(''); // no progress line with --json
    expect(stdout.trim().split('\n')).toHaveLength(1);
    const report = JSON.parse(stdout) as LoadReport;
    expectAccounted(report);
    expect(report.admissions.sent).toBeGreaterThan(0);
    expect(report.errors).toEqual({});
    expect(report.matches.pairs).toBeGreaterThan(0);
    expect(report.run).toMatchObject({ origin: app.origin, url: harness.url, concurrency: 2, players: 10, queues: 1 });
    expect((await allTickets(app)).length).toBe(report.admissions.ok);
  });

  it('the CLI refuses bad flags with one line and exit 1', async () => {
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'src', 'cli', 'main.ts'), 'load', '--rate', '10', '--concurrency', '2'], { cwd: REPO_ROOT });
      let out = '';
      let err = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (err += d));
      child.on('close', (exit) => resolve({ code: exit, stdout: out, stderr: err }));
    });
    expect({ code, stdout, stderr }).toEqual({ code: 1, stdout: '', stderr: 'versus: use --rate or --concurrency, not both\n' });
  });
});
