import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

/**
 * A throwaway Redis Cluster of three masters (no replicas) on loopback ports, made of
 * `redis-server` processes this module starts itself and `redis-cli --cluster create`.
 * Nothing persists: every node writes its nodes.conf into one temporary directory, removed
 * on stop. Only the processes started here are ever signalled, by their pids.
 */

export interface LocalCluster {
  /** `127.0.0.1:<port>` of each master, the REDIS_CLUSTER_NODES value. */
  nodes: string[];
  ports: number[];
  pids: number[];
  dir: string;
  /** SIGTERM, then SIGKILL after 3 s, to exactly the started pids; removes the directory. */
  stop(): Promise<void>;
}

const MASTERS = 3;
const START_BUDGET_MS = 20_000;
/** Ports tried: 7100 up; a cluster node also listens on port + 10000 (the cluster bus). */
const FIRST_PORT = 7100;
const LAST_PORT = 7999;

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** Three ports that are free, and whose bus ports are free, from a random start in the range (parallel runs rarely collide). */
async function freePorts(count: number, avoid: Set<number>): Promise<number[]> {
  const span = LAST_PORT - FIRST_PORT + 1;
  const start = Math.floor(Math.random() * span);
  const found: number[] = [];
  for (let i = 0; i < span && found.length < count; i += 1) {
    const port = FIRST_PORT + ((start + i) % span);
    if (avoid.has(port)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) found.push(port);
  }
  if (found.length < count) throw new Error(`Redis Cluster for the tests: fewer than ${count} free ports in ${FIRST_PORT}-${LAST_PORT}`);
  return found;
}

function have(binary: string): boolean {
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (exited(child) || child.pid === undefined) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const late = sleep(3000).then(() => 'late' as const);
  if ((await Promise.race([gone, late])) === 'late' && !exited(child)) {
    child.kill('SIGKILL');
    await gone;
  }
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-5).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Runs a command with arguments; resolves with its exit code and output, or rejects past the deadline. */
function run(command: string, args: string[], deadline: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish in time:\n${output}`));
    }, Math.max(0, deadline - Date.now()));
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

async function clusterInfo(port: number): Promise<string> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.call('CLUSTER', 'INFO')) as string;
  } catch {
    return '';
  } finally {
    client.disconnect();
  }
}

/** Starts the nodes, creates the cluster, and resolves once every node reports cluster_state:ok (else rejects within about 20 s). */
export async function startCluster(): Promise<LocalCluster> {
  for (const binary of ['redis-server', 'redis-cli']) {
    if (!have(binary)) {
      throw new Error(`Redis Cluster for the tests: ${binary} is not installed (apt-get install redis-server; it brings redis-cli)`);
    }
  }
  const deadline = Date.now() + START_BUDGET_MS;
  const dir = mkdtempSync(join(tmpdir(), 'versus-cluster-'));
  const children: ChildProcess[] = [];
  // Should the test run end without its teardown, the nodes still go with this process.
  const killLeft = () => {
    for (const child of children) if (!exited(child)) child.kill('SIGKILL');
  };
  process.once('exit', killLeft);
  const stop = async () => {
    await Promise.all(children.map(stopChild));
    process.off('exit', killLeft);
    rmSync(dir, { recursive: true, force: true });
  };
  const tried = new Set<number>();
  try {
    let ports: number[] = [];
    // A port found free can be taken before redis-server binds it: such a node exits, and
    // the start is retried on other ports (a few times, within the budget).
    for (let attempt = 1; ; attempt += 1) {
      ports = await freePorts(MASTERS, tried);
      for (const port of ports) tried.add(port);
      const started = ports.map((port) =>
        spawn('redis-server', [
          '--port', String(port),
          '--bind', '127.0.0.1',
          '--cluster-enabled', 'yes',
          '--cluster-config-file', join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout', '5000',
          '--save', '',
          '--appendonly', 'no',
          '--dir', dir,
          '--logfile', join(dir, `redis-${port}.log`),
          '--daemonize', 'no',
        ], { stdio: 'ignore' }),
      );
      children.push(...started);
      const answering = await Promise.all(ports.map(async (port, i) => {
        while (Date.now() < deadline && !exited(started[i]!)) {
          if ((await clusterInfo(port)) !== '') return true;
          await sleep(50);
        }
        return false;
      }));
      if (answering.every(Boolean)) break;
      const logs = ports.map((port) => `127.0.0.1:${port}: ${tail(join(dir, `redis-${port}.log`))}`).join('\n');
      await Promise.all(started.map(stopChild));
      if (attempt >= 3 || Date.now() >= deadline) throw new Error(`Redis Cluster for the tests: redis-server did not start:\n${logs}`);
    }

    const nodes = ports.map((port) => `127.0.0.1:${port}`);
    const created = await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], deadline);
    if (created.code !== 0) throw new Error(`Redis Cluster for the tests: redis-cli --cluster create failed:\n${created.output}`);

    for (;;) {
      const infos = await Promise.all(ports.map(clusterInfo));
      if (infos.every((info) => /cluster_state:ok/.test(info) && /cluster_known_nodes:3\b/.test(info))) break;
      if (Date.now() >= deadline) {
        throw new Error(`Redis Cluster for the tests: cluster_state is not ok on every node after ${START_BUDGET_MS / 1000} s:\n${infos.join('\n---\n')}`);
      }
      await sleep(100);
    }
    return { nodes, ports, pids: children.filter((c) => !exited(c)).map((c) => c.pid!), dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
