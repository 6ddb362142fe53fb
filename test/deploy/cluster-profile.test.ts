import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { createRedis, masters, waitForReady, type RedisClient } from '../../src/redis/connection.js';
import { REPO_ROOT, spawnApi, type SpawnedApi } from '../helpers/processes.js';
import { directClient, RedisServer } from '../helpers/redis-server.js';

/**
 * The compose `cluster` profile's Redis settings, run for real on loopback: three redis-server
 * processes with exactly the flags docker-compose.yml gives redis-cluster-N (the announced host
 * name becomes `localhost`, the one name every machine resolves), then deploy/redis-cluster-init.sh
 * as the init service runs it, then the Versus cluster client and API, which must reach the
 * nodes by the host names the cluster announces.
 */

const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { command?: string[] }>;
};
const INIT_SCRIPT = join(REPO_ROOT, 'deploy', 'redis-cluster-init.sh');
const HOSTNAME = 'localhost';

const missing = ['redis-server', 'redis-cli', 'getent', 'sh'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0);
if (missing.length > 0) console.log(`cluster profile run skipped: ${missing.join(', ')} not installed here (the compose file checks in compose.test.ts still ran)`);

/** redis-server options of a compose cluster node, announcing `hostname`, for the RedisServer helper (which sets port, bind and dir). */
function nodeArgs(service: string, hostname: string): string[] {
  const command = compose.services[service]?.command ?? [];
  expect(command[0]).toBe('redis-server');
  const args = command.slice(1);
  const at = args.indexOf('--cluster-announce-hostname');
  expect(at).toBeGreaterThan(-1);
  args[at + 1] = hostname;
  // `localhost` may resolve to ::1 first: listen there too where the machine has IPv6.
  return [...args, '--bind', '127.0.0.1 -::1'];
}

/** Runs the init script with REDIS_CLUSTER_NODES; resolves with its exit code and output. */
function runInit(nodes: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', [INIT_SCRIPT], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', REDIS_CLUSTER_NODES: nodes.join(','), WAIT_SECONDS: '20' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe.skipIf(missing.length > 0)('compose profile "cluster" on loopback', () => {
  const servers: RedisServer[] = [];
  let nodes: string[] = [];
  let client: RedisClient | null = null;
  let api: SpawnedApi | null = null;

  beforeAll(async () => {
    for (const [i, service] of ['redis-cluster-1', 'redis-cluster-2', 'redis-cluster-3'].entries()) {
      // Sequential: each start picks its own free port.
      servers[i] = await RedisServer.start(nodeArgs(service, HOSTNAME));
    }
    nodes = servers.map((server) => `${HOSTNAME}:${server.port}`);
  });

  afterAll(async () => {
    await api?.stop();
    client?.disconnect();
    await Promise.all(servers.map((server) => server.remove()));
  });

  it('starts the nodes with cluster mode and AOF on, as configured', async () => {
    for (const server of servers) {
      const probe = directClient(server.url);
      try {
        await probe.connect();
        expect(await probe.config('GET', 'cluster-enabled')).toEqual(['cluster-enabled', 'yes']);
        expect(await probe.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
        expect(await probe.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
        expect(await probe.config('GET', 'cluster-preferred-endpoint-type')).toEqual(['cluster-preferred-endpoint-type', 'hostname']);
      } finally {
        probe.disconnect();
      }
    }
  });

  it('the init creates the cluster, and does nothing the next time', { timeout: 60_000 }, async () => {
    const first = await runInit(nodes);
    expect(first.code, first.output).toBe(0);
    expect(first.output).toMatch(/creating a cluster of/);
    expect(first.output).toMatch(/cluster_state:ok on all 3 nodes/);
    const again = await runInit(nodes);
    expect(again.code, again.output).toBe(0);
    expect(again.output).toMatch(/exists already; nothing to create/);
    expect(again.output).not.toMatch(/creating/);
  });

  it('the init refuses a mix of a made cluster and a fresh node, and changes nothing', { timeout: 60_000 }, async () => {
    const extra = await RedisServer.start(nodeArgs('redis-cluster-1', HOSTNAME));
    try {
      const refused = await runInit([...nodes, `${HOSTNAME}:${extra.port}`]);
      expect(refused.code, refused.output).toBe(1);
      expect(refused.output).toMatch(/neither all fresh nor one complete cluster/);
      const probe = directClient(extra.url);
      try {
        await probe.connect();
        expect(await probe.call('CLUSTER', 'INFO')).toMatch(/cluster_known_nodes:1\b/);
      } finally {
        probe.disconnect();
      }
    } finally {
      await extra.remove();
    }
  });

  it('announces the host name to clients, and the Versus cluster client reaches every master by it', async () => {
    const probe = directClient(servers[0]!.url);
    try {
      await probe.connect();
      const slots = (await probe.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]]]>;
      expect(slots.map(([, , master]) => master[0])).toEqual(slots.map(() => HOSTNAME));
    } finally {
      probe.disconnect();
    }
    client = createRedis(loadConfig({ REDIS_CLUSTER_NODES: nodes.join(',') }));
    client.on('error', () => {});
    await waitForReady(client, 10_000);
    expect(masters(client).map((m) => `${m.options.host}:${m.options.port}`).sort()).toEqual([...nodes].sort());
    // Keys in slots of all three masters: MOVED answers name the host too.
    const keys = Array.from({ length: 30 }, (_, i) => `versus-deploy-test:{k${i}}`);
    try {
      for (const key of keys) await client.set(key, key, 'EX', 60);
      for (const key of keys) expect(await client.get(key)).toBe(key);
    } finally {
      for (const key of keys) await client.del(key);
    }
  });

  it('a Versus API with the compose REDIS_CLUSTER_NODES form becomes ready on it', { timeout: 60_000 }, async () => {
    api = await spawnApi({ REDIS_CLUSTER_NODES: nodes.join(','), VERSUS_KEY_PREFIX: `deploytest${process.pid}`, LOG_LEVEL: 'silent' });
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i += 1) {
      status = (await fetch(`${api.url}/readyz`)).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(200);
    expect(await api.stop()).toBe(0);
  });
});
