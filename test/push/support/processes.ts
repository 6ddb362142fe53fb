import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from '../../helpers/processes.js';

const WORKER_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'worker-process.ts');

export interface SpawnedWorker {
  url: string;
  process: ChildProcess;
  /** SIGTERM: finishes the jobs in hand, then exits. */
  stop(): Promise<void>;
  /** SIGKILL: a crash. */
  kill(): Promise<void>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Spawns a worker child process with `env` over this process's environment; resolves at its LISTENING line. */
export function spawnWorker(env: Record<string, string>, tuning: Record<string, number> = {}, role: 'worker' | 'all' = 'worker'): Promise<SpawnedWorker> {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER_SCRIPT, JSON.stringify(tuning), role], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    if (stderr.length < 64 * 1024) stderr += chunk;
  });
  child.stdin!.on('error', () => {});
  const exit = new Promise<void>((resolve) => {
    if (exited(child)) resolve();
    else child.once('exit', () => resolve());
  });
  const end = async (signal: NodeJS.Signals) => {
    if (!exited(child)) child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exit;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`worker did not start within 20 s\n${stderr}`));
    }, 20_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /^LISTENING (\S+)$/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      resolve({ url: match[1]!, process: child, stop: () => end('SIGTERM'), kill: () => end('SIGKILL') });
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      setTimeout(() => reject(new Error(`worker exited before listening (code ${code}, signal ${signal})\n${stderr}`)), 50);
    });
  });
}
