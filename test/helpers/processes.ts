import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root (child processes run there so `--import tsx` resolves). */
export const REPO_ROOT = path.resolve(here, '..', '..');
const API_SCRIPT = path.join(here, 'api-process.ts');
const CLI = path.join(REPO_ROOT, 'src', 'cli', 'main.ts');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `versus …` (src/cli/main.ts through tsx) as a user would, with `env` layered over this
 * process's environment and `input` (or nothing) on stdin; resolves when it exits.
 */
export function runVersus(args: string[], env: Record<string, string | undefined> = {}, input?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env } });
    child.stdin!.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 15_000;
const STDERR_LIMIT = 64 * 1024;

export interface SpawnedApi {
  /** http://127.0.0.1:<port> */
  url: string;
  process: ChildProcess;
  /** Sends SIGTERM and resolves with the exit code (null when it ended by a signal). Idempotent. */
  stop(): Promise<number | null>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Spawns test/helpers/api-process.ts with `env` layered over this process's environment and
 * waits for its `LISTENING <url>` line; rejects (and kills the child) after 20 s or when it
 * exits first, with its stderr in the message.
 */
export function spawnApi(env: Record<string, string>): Promise<SpawnedApi> {
  const child = spawn(process.execPath, ['--import', 'tsx', API_SCRIPT], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, VERSUS_EXIT_WITH_PARENT: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });

  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    if (stderr.length < STDERR_LIMIT) stderr += chunk;
  });

  const exit = new Promise<number | null>((resolve) => {
    if (exited(child)) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });

  let stopping: Promise<number | null> | null = null;
  const stop = (): Promise<number | null> => {
    stopping ??= (async () => {
      if (!exited(child)) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        try {
          return await exit;
        } finally {
          clearTimeout(timer);
        }
      }
      return child.exitCode;
    })();
    return stopping;
  };

  return new Promise<SpawnedApi>((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!exited(child)) child.kill('SIGKILL');
      // Let the last stderr chunks arrive before reporting them.
      setTimeout(() => reject(new Error(`api process ${why}\n--- stderr ---\n${stderr}`)), 50);
    };
    const timer = setTimeout(() => fail(`did not print LISTENING within ${START_TIMEOUT_MS / 1000} s`), START_TIMEOUT_MS);

    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const match = /^LISTENING (\S+)$/.exec(line);
      if (!match || settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ url: match[1]!, process: child, stop });
    });
    // stdout keeps being drained by the line reader, so the child never blocks on a full pipe.

    child.once('error', (error) => fail(`could not be spawned: ${error.message}`));
    child.once('exit', (code, signal) => fail(`exited before listening (code ${code}, signal ${signal})`));
    // The child watches its stdin to exit with us; a write error after it exits is expected.
    child.stdin!.on('error', () => {});
  });
}
