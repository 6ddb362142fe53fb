import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { REPO_ROOT } from '../helpers/processes.js';
import { redisUrl, testRedis } from '../setup/redis-url.js';
import { fences, matchesDocumented, section, statements, type Statement } from './readme.js';

/**
 * A newcomer's first hour, as README.md tells it, on a fresh copy of the project: the
 * commands of "Set up", "Five minutes with the API" and "A notification, without a browser"
 * are read from the README's `sh` blocks and run as written, in one bash session (the second
 * shell), while `npm run dev` runs in the background (the first shell). Each command must
 * exit 0 with nothing on stderr, and print what its `# -> …` lines document; each line of a
 * `text` block in those sections must appear in `npm run dev`'s output. `…` stands for any
 * text.
 *
 * The copy: the files `git ls-files --cached --others --exclude-standard` lists, as they are in
 * the working tree (what a clone would hold once this work is committed; in CI, a clean clone
 * of main, it is that clone). Three commands are not run as written, each for a stated reason:
 *  - `npm ci`: node_modules is a symlink to this checkout's (installed by the same lockfile;
 *    a real install would take most of the time budget);
 *  - `npm run dev`: runs as written, in the background, with PORT (a free port) and
 *    VERSUS_KEY_PREFIX (a fresh prefix) set, as README "Set up" documents for a second stack,
 *    and REDIS_URL pointing at the tests' Redis;
 *  - `npm test`: not run: it is the suite this test is part of.
 * Documented output that names the default port 8080 is read with the free port instead.
 */

const SECTIONS = ['Set up', 'Five minutes with the API', 'A notification, without a browser'];
const DEV_TIMEOUT_MS = 60_000;
const COMMAND_TIMEOUT_MS = 30_000;
const PRINT_TIMEOUT_MS = 20_000;

/** The environment of a newcomer's shell: this one's, without any Versus setting, test runner or npm variable. */
function shellEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (/^(VERSUS_|SERVICE_|VAPID_|PUSH_|REDIS_|HTTP_|VITEST|npm_)/i.test(name)) continue;
    if (['PORT', 'HOST', 'LOG_LEVEL', 'NODE_ENV', 'NODE_OPTIONS', 'TEST', 'INIT_CWD'].includes(name)) continue;
    env[name] = value;
  }
  return env;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The project as a fresh clone would hold it (see above), in a new directory. */
function copyProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'versus-readme-'));
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO_ROOT, encoding: 'utf8' });
  for (const file of new Set(listed.split('\0').filter((f) => f !== ''))) {
    const from = join(REPO_ROOT, file);
    if (!existsSync(from) && !isSymlink(from)) continue; // deleted in the working tree
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(from, join(dir, file), { verbatimSymlinks: true });
  }
  return dir;
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** One bash session: the newcomer's second shell. Commands run one at a time; variables and functions carry over. */
class Shell {
  private readonly child: ChildProcess;
  private stdout = '';
  private stderr = '';
  private readonly mark = `__readme_${process.pid}_${Date.now()}__`;

  constructor(cwd: string, env: Record<string, string>) {
    this.child = spawn('bash', ['--noprofile', '--norc'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
  }

  /** Runs one statement; resolves with its output, its stderr and its exit status. */
  async run(command: string): Promise<{ output: string; stderr: string; status: number }> {
    this.stdout = '';
    this.stderr = '';
    this.child.stdin!.write(`${command}\n__status=$?; printf '\\n${this.mark} %s\\n' "$__status"; printf '${this.mark}\\n' >&2\n`);
    const deadline = Date.now() + COMMAND_TIMEOUT_MS;
    const end = new RegExp(`\\n${this.mark} (\\d+)\\n$`);
    while (!(end.test(this.stdout) && this.stderr.endsWith(`${this.mark}\n`))) {
      if (this.child.exitCode !== null) throw new Error(`the shell exited running:\n${command}\n${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`no end within ${COMMAND_TIMEOUT_MS} ms of:\n${command}\nstdout: ${this.stdout}\nstderr: ${this.stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const status = Number(end.exec(this.stdout)![1]);
    return { output: this.stdout.replace(end, ''), stderr: this.stderr.slice(0, -`${this.mark}\n`.length), status };
  }

  /** Ends the session (by its pid) and waits for it. */
  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exit = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin!.end();
    this.child.kill('SIGTERM');
    await exit;
  }
}

/** The first shell: a command left running in the background, in a process group of its own. */
class Background {
  readonly child: ChildProcess;
  private out = '';
  private err = '';

  constructor(command: string, cwd: string, env: Record<string, string>) {
    this.child = spawn('bash', ['-c', command], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => (this.out += d));
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.err += d));
  }

  get output(): string {
    return `stdout:\n${this.out.slice(-4000)}\nstderr:\n${this.err.slice(-4000)}`;
  }

  /** Waits until a line of its stdout is the documented one; resolves with that line. */
  async waitForLine(documented: string, ms: number): Promise<string> {
    const deadline = Date.now() + ms;
    for (;;) {
      const line = this.out.split('\n').find((l) => matchesDocumented(documented, l));
      if (line !== undefined) return line;
      if (this.child.exitCode !== null || this.child.signalCode !== null) throw new Error(`npm run dev ended before printing\n  ${documented}\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`npm run dev did not print within ${ms} ms\n  ${documented}\n${this.output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Whether any process of its group is left. */
  private groupAlive(): boolean {
    try {
      process.kill(-this.child.pid!, 0);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Ctrl-C, as in a terminal: SIGINT to the whole group (npm, the dev command, its worker).
   * Resolves true when every process of the group ended within 20 s; else kills what is left
   * and resolves false.
   */
  async stop(): Promise<boolean> {
    if (!this.groupAlive()) return true;
    process.kill(-this.child.pid!, 'SIGINT');
    const deadline = Date.now() + 20_000;
    while (this.groupAlive()) {
      if (Date.now() > deadline) {
        process.kill(-this.child.pid!, 'SIGKILL');
        return false;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return true;
  }
}

/** The documented output of a statement, against what it printed. */
function expectDocumentedOutput(statement: Statement, output: string): void {
  if (statement.expected.length === 0) return;
  const lines = output.replace(/\n$/, '').split('\n');
  const ok = lines.length === statement.expected.length && statement.expected.every((documented, i) => matchesDocumented(documented, lines[i]!));
  expect(ok, `README.md documents\n  ${statement.expected.join('\n  ')}\nfor\n  ${statement.command}\nbut it printed\n  ${lines.join('\n  ')}`).toBe(true);
}

describe('README: the first hour', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterAll(async () => {
    // Every cleanup runs, whatever an earlier one threw; the first failure is reported.
    const failures: unknown[] = [];
    for (const cleanup of cleanups.reverse()) await Promise.resolve().then(cleanup).catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw failures[0];
  });

  it('Set up, Five minutes with the API and A notification, without a browser: each command as written, its documented output, the decrypted notification', async () => {
    const dir = copyProject();
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const prefix = testPrefix();
    cleanups.push(async () => {
      const redis = await testRedis();
      await deleteKeys(redis, prefix);
      redis.disconnect();
    });
    const port = await freePort();
    const env = shellEnv();
    const shell = new Shell(dir, env);
    cleanups.push(() => shell.close());
    let dev: Background | null = null;
    let devStarted = false;
    cleanups.push(async () => {
      // Every process it started must end with Ctrl-C: else this test fails (after killing them).
      if (dev) expect(await dev.stop(), `npm run dev left processes after SIGINT\n${dev.output}`).toBe(true);
    });

    const readme = readFileSync(join(dir, 'README.md'), 'utf8');
    for (const heading of SECTIONS) {
      const blocks = fences(section(readme, heading)).filter((f) => f.info === 'sh' || f.info === 'text');
      expect(blocks.length, `README.md "${heading}" has no sh or text block`).toBeGreaterThan(0);
      for (const block of blocks) {
        if (block.info === 'text') {
          // Output of `npm run dev`, in the first shell.
          if (!dev) throw new Error(`README.md "${heading}" documents output of npm run dev before starting it`);
          const printed: string[] = [];
          for (const documented of block.text.split('\n').filter((l) => l.trim() !== '')) {
            // The first output waits for the build and the start; later output, for a delivery.
            printed.push(await dev.waitForLine(documented.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`), devStarted ? PRINT_TIMEOUT_MS : DEV_TIMEOUT_MS));
            devStarted = true;
          }
          if (printed.some((line) => line.startsWith('SERVICE_APP_KEY='))) {
            // "The same lines are written to `.versus-dev/app.env`."
            expect(readFileSync(join(dir, '.versus-dev', 'app.env'), 'utf8')).toBe(printed.map((l) => `${l}\n`).join(''));
          }
          continue;
        }
        for (const statement of statements(block.text)) {
          // In "Set up", the install, the dev stack and the suite are handled as the header says.
          const parts = heading === 'Set up' ? statement.command.split(/\s*&&\s*/) : [statement.command];
          for (const command of parts) {
            if (heading === 'Set up' && command === 'npm ci') {
              symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
              continue;
            }
            if (heading === 'Set up' && command === 'npm test') continue;
            if (heading === 'Set up' && command === 'npm run dev') {
              dev = new Background(command, dir, { ...env, PORT: String(port), VERSUS_KEY_PREFIX: prefix, REDIS_URL: redisUrl() });
              continue;
            }
            const result = await shell.run(command);
            expect({ command, status: result.status, stderr: result.stderr }).toEqual({ command, status: 0, stderr: '' });
            expectDocumentedOutput(statement, result.output);
          }
        }
      }
    }
    expect(dev, 'README.md "Set up" never runs npm run dev').not.toBeNull();
    // The stack kept to its own key prefix: the developer's own state (prefix `vs`) was not touched.
    const redis = await testRedis();
    try {
      expect(await redis.sismember(`${prefix}:apps`, 'https://demo.versus.localhost')).toBe(1);
    } finally {
      redis.disconnect();
    }
  }, 120_000);
});
