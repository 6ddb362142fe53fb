import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { redisAnswers } from '../../src/redis/connection.js';

/**
 * A `redis-server` process of a test's own, on a free loopback port, for fault tests: stop it,
 * kill it, start it again on the same port with the same data directory. Only the process
 * started here is ever signalled (by its pid); a test calls remove() in afterAll, and a
 * process-exit hook kills whatever is still running if the test process ends first.
 */

const START_TIMEOUT_MS = 10_000;
/** Below the ephemeral range (outbound connections cannot hold them) and apart from the cluster setup's 7100-7999. */
const FIRST_PORT = 21_000;
const LAST_PORT = 29_999;

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = FIRST_PORT + Math.floor(Math.random() * (LAST_PORT - FIRST_PORT + 1));
    if (await portFree(port)) return port;
  }
  throw new Error('no free loopback port for a test redis-server');
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** A plain client for the test's own checks: fails fast, never queues. */
export function directClient(url: string): Redis {
  const client = new Redis(url, { connectTimeout: 1000, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null, lazyConnect: true });
  client.on('error', () => {});
  return client;
}

export class RedisServer {
  private child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly args: string[],
  ) {}

  /**
   * Starts `redis-server` on a free port with its data (and log) in a fresh temporary
   * directory; `args` are more redis-server options (e.g. `--appendonly yes`). RDB snapshots
   * are off unless `args` turns them on. Resolves once it answers PING.
   */
  static async start(args: string[] = []): Promise<RedisServer> {
    const dir = mkdtempSync(join(tmpdir(), 'versus-redis-'));
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const server = new RedisServer(await freePort(), dir, args);
      try {
        await server.launch();
        return server;
      } catch (error) {
        lastError = error; // most likely the port was taken in between: another one
      }
    }
    rmSync(dir, { recursive: true, force: true });
    throw lastError;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get log(): string {
    try {
      return readFileSync(join(this.dir, 'redis.log'), 'utf8');
    } catch {
      return '(no log)';
    }
  }

  /** Starts it again on the same port and directory (after stop or kill), with `extraArgs` added this time only. */
  async restart(extraArgs: string[] = []): Promise<void> {
    if (this.child && !exited(this.child)) throw new Error('redis-server is still running');
    await this.launch(extraArgs);
  }

  /** Sends `signal` to the process started here and resolves once it has exited (SIGKILL after 10 s). */
  async signal(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child || exited(child)) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    const late = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(late);
  }

  /** SIGSTOP: the process stays, its connections stay open, and it answers nothing until resume(). */
  pause(): void {
    if (this.child && !exited(this.child)) this.child.kill('SIGSTOP');
  }

  /** SIGCONT after pause(). */
  resume(): void {
    if (this.child && !exited(this.child)) this.child.kill('SIGCONT');
  }

  /** Kills it if it still runs and deletes its directory. For afterAll; idempotent. */
  async remove(): Promise<void> {
    await this.signal('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async launch(extraArgs: string[] = []): Promise<void> {
    const args = [
      '--port', String(this.port),
      '--bind', '127.0.0.1',
      '--dir', this.dir,
      '--logfile', join(this.dir, 'redis.log'),
      '--save', '',
      '--daemonize', 'no',
      ...this.args,
      ...extraArgs,
    ];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    this.child = child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const failed = await Promise.race([spawnError, sleep(50).then(() => null)]);
      if (failed) throw new Error(`redis-server could not be spawned: ${failed.message}`);
      if (exited(child)) throw new Error(`redis-server exited at start (port ${this.port}):\n${this.log.split('\n').slice(-5).join('\n')}`);
      if (await redisAnswers(this.url)) return;
    }
    child.kill('SIGKILL');
    throw new Error(`redis-server on port ${this.port} did not answer PING within ${START_TIMEOUT_MS / 1000} s`);
  }
}
