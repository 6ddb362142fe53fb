import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { LUA_DIR } from '../../src/redis/scripts.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { REPO_ROOT } from '../helpers/processes.js';

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  profiles?: string[];
  restart?: string;
  stop_grace_period?: string;
  healthcheck?: { test?: string[] };
  depends_on?: Record<string, { condition: string }>;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
}

// `merge: true` resolves the `<<: *anchor` merge keys the file uses for shared settings.
const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const { services } = compose;
const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
const configSource = readFileSync(join(REPO_ROOT, 'src', 'config.ts'), 'utf8');

const DEFAULT_SERVICES = ['api1', 'api2', 'lb', 'redis', 'worker'];
const CLUSTER_NODES = ['redis-cluster-1', 'redis-cluster-2', 'redis-cluster-3'];
const CLUSTER_SERVICES = [...CLUSTER_NODES, 'redis-cluster-init', 'api1-cluster', 'api2-cluster', 'worker-cluster', 'lb-cluster'].sort();
/** Versus processes (built from this repository) and their role, per stack. */
const VERSUS_DEFAULT = { api1: 'api', api2: 'api', worker: 'worker' } as const;
const VERSUS_CLUSTER = { 'api1-cluster': 'api', 'api2-cluster': 'api', 'worker-cluster': 'worker' } as const;

/**
 * Variables src/config.ts reads that compose leaves to their defaults, and why. Every other
 * variable it reads must be passed to the Versus services: a setting config.ts gains is then
 * either wired through docker-compose.yml or listed here on purpose.
 */
const LEFT_TO_DEFAULT: Record<string, string> = {
  REDIS_URL: 'passed to the standalone services only; the cluster services use REDIS_CLUSTER_NODES',
  REDIS_CLUSTER_NODES: 'passed to the cluster services only',
  SERVICE_SIGNING_KEY: 'the service secret key issues manifests (an operator task); replicas need only the public key',
  HOST: '0.0.0.0 is what a container listens on',
  HTTP_REQUEST_TIMEOUT_MS: 'default 30 s',
  HTTP_HEADERS_TIMEOUT_MS: 'default 10 s',
  HTTP_KEEP_ALIVE_TIMEOUT_MS: 'default 5 s; nginx drops idle upstream connections after 4 s (deploy/nginx.conf), before the API does',
  VERSUS_TEST_CLOCK: 'test only; refused with NODE_ENV=production, which the image sets',
  NODE_ENV: 'production, set by the image (Dockerfile ENV NODE_ENV=production)',
};

/** The names src/config.ts reads from the environment (its only reader of process.env). */
function configVariables(): Set<string> {
  const names = new Set<string>();
  for (const match of configSource.matchAll(/\(env, '([A-Z][A-Z0-9_]*)'/g)) names.add(match[1]!);
  for (const match of configSource.matchAll(/env\['([A-Z][A-Z0-9_]*)'\]/g)) names.add(match[1]!);
  return names;
}

/**
 * Compose's interpolation of one environment value from the host's variables:
 * `${X}`, `${X:-default}`, `${X-default}`, `${X:?message}` (which fails when X is unset or empty).
 */
function interpolate(value: string, host: Record<string, string>): string {
  return value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?:(:?-|:?\?)([^}]*))?\}/g, (_all, name: string, op: string | undefined, arg: string | undefined) => {
    const set = host[name];
    if (op === ':-') return set === undefined || set === '' ? arg! : set;
    if (op === '-') return set === undefined ? arg! : set;
    if (op === ':?' || op === '?') {
      if (set === undefined || (op === ':?' && set === '')) throw new Error(`compose would refuse: ${name}: ${arg}`);
      return set;
    }
    return set ?? '';
  });
}

/** The environment a service's container gets, given the host's variables. */
function containerEnv(service: Service, host: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), host)]));
}

/** `host:port` of each `server` line of an nginx upstream. */
function upstreamServers(conf: string): string[] {
  const upstream = /^upstream versus_api \{\n([^}]*)^\}/m.exec(conf)?.[1] ?? '';
  return [...upstream.matchAll(/^\s*server\s+([^\s;]+)/gm)].map((m) => m[1]!);
}

/** Whether a .dockerignore pattern (`dir`, `name`, `*`, `**` forms; no `!`) excludes `path` or a parent of it. */
function dockerignoreMatches(pattern: string, path: string): boolean {
  const source = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*\//g, '\u0000').replace(/\*/g, '[^/]*').replace(/\u0000/g, '(?:.*/)?');
  return new RegExp(`^${source}(?:/.*)?$`).test(path);
}

/** Exit status 0 of a command (false when it is missing, fails or hangs). */
function succeeds(command: string, args: string[], timeout = 10_000): boolean {
  const result = spawnSync(command, args, { stdio: 'ignore', timeout });
  return result.status === 0;
}

/** `docker compose` (plugin) or `docker-compose` (standalone), when either is installed. */
function composeClient(): [string, string[]] | null {
  if (succeeds('docker', ['compose', 'version'])) return ['docker', ['compose']];
  if (succeeds('docker-compose', ['version'])) return ['docker-compose', []];
  return null;
}

const API_HEALTHCHECK_URL = /http:\/\/127\.0\.0\.1:8080\/(healthz|readyz)/;

describe('docker-compose.yml', () => {
  it('starts exactly Redis, two API replicas, a worker and the load balancer without a profile; everything else is in the cluster profile', () => {
    const plain = Object.keys(services).filter((name) => services[name]!.profiles === undefined).sort();
    expect(plain).toEqual(DEFAULT_SERVICES);
    const profiled = Object.keys(services).filter((name) => services[name]!.profiles !== undefined).sort();
    expect(profiled).toEqual(CLUSTER_SERVICES);
    for (const name of profiled) expect(services[name]!.profiles, name).toEqual(['cluster']);
  });

  it('has no dependency a plain `up` cannot satisfy, and every dependency exists', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const target of Object.keys(service.depends_on ?? {})) {
        expect(services[target], `${name} depends on ${target}`).toBeDefined();
        // A service outside the profile must not need one inside it.
        if (service.profiles === undefined) expect(services[target]!.profiles, `${name} -> ${target}`).toBeUndefined();
      }
    }
  });

  it('runs Redis with AOF (appendfsync everysec) on a volume, and a healthcheck', () => {
    const redis = services['redis']!;
    expect(redis.image).toMatch(/^redis:7/);
    expect(redis.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']));
    expect(redis.command).toEqual(expect.arrayContaining(['--appendfsync', 'everysec']));
    expect(redis.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    expect(redis.healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping']);
  });

  it('runs two API replicas and a worker from the image, each healthchecked and waiting for a healthy Redis', () => {
    for (const [name, role] of Object.entries(VERSUS_DEFAULT)) {
      const service = services[name]!;
      expect(service.build, name).toBe('.');
      expect(service.command, name).toEqual(['serve', '--role', role]);
      expect(service.healthcheck?.test?.join(' '), name).toMatch(API_HEALTHCHECK_URL);
      expect(service.depends_on?.['redis']?.condition, name).toBe('service_healthy');
      expect(service.environment?.['REDIS_URL'], name).toBe('redis://redis:6379');
      expect(service.environment?.['REDIS_CLUSTER_NODES'], name).toBeUndefined();
      // Required from the host environment: compose stops with a message when it is unset.
      expect(service.environment?.['SERVICE_SIGNING_PUBLIC_KEY'], name).toMatch(/^\$\{SERVICE_SIGNING_PUBLIC_KEY:\?.+\}$/);
      // A worker drains its jobs for up to 12 s on SIGTERM; compose's default is 10 s.
      expect(Number.parseInt(service.stop_grace_period ?? '10s', 10), name).toBeGreaterThanOrEqual(15);
    }
  });

  it('passes the push settings through to every worker and API (which answer push_not_enabled without them)', () => {
    for (const service of [...Object.keys(VERSUS_DEFAULT), ...Object.keys(VERSUS_CLUSTER)]) {
      const env = services[service]!.environment ?? {};
      for (const name of ['VAPID_PUBLIC_KEY', 'VAPID_PRIVATE_KEY', 'VAPID_SUBJECT', 'PUSH_ENDPOINT_HOSTS']) {
        expect(env[name], `${service} ${name}`).toMatch(new RegExp(`^\\$\\{${name}(:-)?\\}$`));
      }
    }
  });

  it('gives every long-running service a healthcheck, and only the one-shot init none', () => {
    for (const [name, service] of Object.entries(services)) {
      if (name === 'redis-cluster-init') {
        expect(service.restart).toBe('no');
        continue;
      }
      expect(service.healthcheck?.test?.length, name).toBeGreaterThan(1);
      expect(service.restart, name).toBe('unless-stopped');
    }
  });

  describe('what src/config.ts reads', () => {
    const variables = configVariables();
    const signing = generateKeyPair();
    // Only the required variable is set on the host: every ${X:-default} falls to its default.
    const host = { SERVICE_SIGNING_PUBLIC_KEY: signing.publicKey };

    it('is found in config.ts (the scan below relies on it)', () => {
      for (const name of ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'SERVICE_SIGNING_PUBLIC_KEY', 'PORT', 'VAPID_PUBLIC_KEY', 'HTTP_REQUEST_TIMEOUT_MS']) {
        expect(variables.has(name), name).toBe(true);
      }
    });

    it('is passed by compose to every Versus service, or left to its default on purpose', () => {
      for (const name of [...Object.keys(VERSUS_DEFAULT), ...Object.keys(VERSUS_CLUSTER)]) {
        const passed = new Set(Object.keys(services[name]!.environment ?? {}));
        const missing = [...variables].filter((v) => !passed.has(v) && !(v in LEFT_TO_DEFAULT));
        expect(missing, `${name}: config.ts reads these; pass them in docker-compose.yml or list them in LEFT_TO_DEFAULT`).toEqual([]);
        for (const v of passed) expect(variables.has(v), `${name} passes ${v}, which config.ts does not read`).toBe(true);
      }
      for (const name of Object.keys(LEFT_TO_DEFAULT)) expect(variables.has(name), `LEFT_TO_DEFAULT lists ${name}, which config.ts no longer reads`).toBe(true);
    });

    it('loads with what compose passes, so no required variable is missing, and listens where the healthchecks and nginx look', () => {
      for (const [name, role] of [...Object.entries(VERSUS_DEFAULT), ...Object.entries(VERSUS_CLUSTER)]) {
        const env = containerEnv(services[name]!, host);
        const config = loadConfig(env);
        expect(config.port, name).toBe(8080);
        expect(config.signingPublicKey, name).toBe(signing.publicKey);
        expect(config.environment, name).toBe('production');
        expect(config.vapid, `${name} (${role}) without VAPID keys on the host`).toBeNull();
        if (name in VERSUS_CLUSTER) {
          expect(config.redisClusterNodes, name).toEqual(CLUSTER_NODES.map((node) => ({ host: node, port: 6379 })));
        } else {
          expect(config.redisClusterNodes, name).toBeNull();
          expect(config.redisUrl, name).toBe('redis://redis:6379');
        }
      }
    });

    it('refuses to start without the signing public key, and passes VAPID keys from the host through', () => {
      expect(() => containerEnv(services['api1']!, {})).toThrow(/SERVICE_SIGNING_PUBLIC_KEY/);
      const vapid = {
        VAPID_PUBLIC_KEY: 'B'.repeat(87),
        VAPID_PRIVATE_KEY: 'A'.repeat(43),
        VAPID_SUBJECT: 'mailto:ops@game.example',
      };
      for (const name of ['worker', 'worker-cluster']) {
        expect(loadConfig(containerEnv(services[name]!, { ...host, ...vapid })).vapid, name).toEqual({
          publicKey: vapid.VAPID_PUBLIC_KEY,
          privateKey: vapid.VAPID_PRIVATE_KEY,
          subject: vapid.VAPID_SUBJECT,
        });
      }
    });
  });

  it('puts a load balancer on host port 8080 in front of both replicas', () => {
    const lb = services['lb']!;
    expect(Object.keys(lb.depends_on ?? {}).sort()).toEqual(['api1', 'api2']);
    for (const dep of Object.values(lb.depends_on ?? {})) expect(dep.condition).toBe('service_healthy');
    expect(lb.ports).toEqual(['8080:8080']);
    expect(lb.healthcheck).toBeDefined();
    expect(lb.volumes).toEqual(['./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro']);
    const nginx = readFileSync(join(REPO_ROOT, 'deploy', 'nginx.conf'), 'utf8');
    expect(upstreamServers(nginx)).toEqual(['api1:8080', 'api2:8080']);
    expect(nginx).toMatch(/listen 8080;/);
    // Per-process metrics are not published through the load balancer.
    expect(nginx).toMatch(/location = \/metrics \{\s*return 404;\s*\}/);
    // Upstream names are re-resolved (`resolve` needs a zone, a resolver and nginx >= 1.27.3).
    expect(nginx).toMatch(/^resolver 127\.0\.0\.11\b/m);
    expect(nginx).toMatch(/^\s*zone versus_api \d+k;/m);
    expect(lb.image).toMatch(/^nginx:1\.(2[89]|[3-9]\d)-alpine$/);
  });

  describe('profile "cluster"', () => {
    const nodesValue = services['api1-cluster']?.environment?.['REDIS_CLUSTER_NODES'];

    it('runs three Redis Cluster nodes with AOF, each announcing its own service name to clients', () => {
      const volumes = new Set<string>();
      for (const name of CLUSTER_NODES) {
        const node = services[name]!;
        const command = node.command ?? [];
        const flag = (option: string) => command[command.indexOf(option) + 1];
        expect(node.image, name).toMatch(/^redis:7/);
        expect(command[0], name).toBe('redis-server');
        expect(command.includes('--port'), `${name} listens on 6379, the port REDIS_CLUSTER_NODES names`).toBe(false);
        expect(flag('--cluster-enabled'), name).toBe('yes');
        expect(flag('--cluster-config-file'), name).toBe('nodes.conf');
        expect(flag('--appendonly'), name).toBe('yes');
        expect(flag('--appendfsync'), name).toBe('everysec');
        expect(flag('--cluster-announce-hostname'), name).toBe(name);
        expect(flag('--cluster-preferred-endpoint-type'), name).toBe('hostname');
        expect(node.healthcheck?.test, name).toEqual(['CMD', 'redis-cli', 'ping']);
        // Its own volume at /data (the image's working directory): the AOF and nodes.conf survive.
        const data = node.volumes?.find((v) => v.endsWith(':/data'));
        expect(data, name).toBeDefined();
        volumes.add(data!.split(':')[0]!);
        expect(compose.volumes, name).toHaveProperty(data!.split(':')[0]!);
      }
      expect(volumes.size).toBe(3);
    });

    it('creates the cluster once, with a one-shot init that waits for the nodes and names the same nodes as the services', () => {
      const init = services['redis-cluster-init']!;
      expect(init.image).toMatch(/^redis:7/);
      expect(Object.keys(init.depends_on ?? {}).sort()).toEqual(CLUSTER_NODES);
      for (const dep of Object.values(init.depends_on ?? {})) expect(dep.condition).toBe('service_healthy');
      expect(init.environment?.['REDIS_CLUSTER_NODES']).toBe(nodesValue);
      expect(init.command).toEqual(['sh', '/usr/local/bin/redis-cluster-init.sh']);
      expect(init.volumes).toEqual(['./deploy/redis-cluster-init.sh:/usr/local/bin/redis-cluster-init.sh:ro']);
      const script = readFileSync(join(REPO_ROOT, 'deploy', 'redis-cluster-init.sh'), 'utf8');
      expect(script).toMatch(/redis-cli --cluster create \$addresses --cluster-replicas 0 --cluster-yes/);
      // Its behaviour (create, then nothing on the next run, refusal of a mixed set) runs in cluster-profile.test.ts.
    });

    it('runs two API replicas and a worker on the cluster, started once the init has succeeded', () => {
      expect(nodesValue?.split(',')).toEqual(CLUSTER_NODES.map((n) => `${n}:6379`));
      for (const [name, role] of Object.entries(VERSUS_CLUSTER)) {
        const service = services[name]!;
        expect(service.build, name).toBe('.');
        expect(service.command, name).toEqual(['serve', '--role', role]);
        expect(service.healthcheck?.test?.join(' '), name).toMatch(API_HEALTHCHECK_URL);
        expect(service.depends_on, name).toEqual({ 'redis-cluster-init': { condition: 'service_completed_successfully' } });
        expect(service.environment?.['REDIS_CLUSTER_NODES'], name).toBe(nodesValue);
        expect(service.environment?.['REDIS_URL'], name).toBeUndefined();
        const { REDIS_CLUSTER_NODES: _c, ...rest } = service.environment ?? {};
        const { REDIS_URL: _u, ...standalone } = services[name.replace('-cluster', '')]!.environment ?? {};
        expect(rest, `${name} has the same settings as its standalone twin`).toEqual(standalone);
        expect(service.stop_grace_period, name).toBe(services[name.replace('-cluster', '')]!.stop_grace_period);
      }
    });

    it('puts its own load balancer on host port 8081, with the nginx settings of the default one', () => {
      const lb = services['lb-cluster']!;
      expect(Object.keys(lb.depends_on ?? {}).sort()).toEqual(['api1-cluster', 'api2-cluster']);
      expect(lb.ports).toEqual(['8081:8080']);
      expect(lb.image).toBe(services['lb']!.image);
      expect(lb.healthcheck).toEqual(services['lb']!.healthcheck);
      expect(lb.volumes).toEqual(['./deploy/nginx-cluster.conf:/etc/nginx/conf.d/default.conf:ro']);
      const conf = readFileSync(join(REPO_ROOT, 'deploy', 'nginx-cluster.conf'), 'utf8');
      expect(upstreamServers(conf)).toEqual(['api1-cluster:8080', 'api2-cluster:8080']);
      // Apart from its two header lines and the upstream names, the same file as deploy/nginx.conf.
      const standalone = readFileSync(join(REPO_ROOT, 'deploy', 'nginx.conf'), 'utf8');
      const body = conf.split('\n').slice(2).join('\n').replace(/(api[12])-cluster:8080/g, '$1:8080');
      expect(body).toBe(standalone);
    });
  });

  it('is accepted by `docker compose config` (plain and with --profile cluster) where a compose client is installed', () => {
    const client = composeClient();
    if (!client) {
      console.log('docker compose config not run: neither `docker compose` nor `docker-compose` is installed here (the YAML checks above still ran)');
      return;
    }
    const [command, prefix] = client;
    const env = { ...process.env, SERVICE_SIGNING_PUBLIC_KEY: 'test-public-key' };
    const run = (args: string[]) => execFileSync(command, [...prefix, ...args], { cwd: REPO_ROOT, env, encoding: 'utf8', stdio: 'pipe', timeout: 30_000 });
    run(['config', '--quiet']);
    run(['--profile', 'cluster', 'config', '--quiet']);
    expect(run(['config', '--services']).trim().split('\n').sort()).toEqual(DEFAULT_SERVICES);
    expect(run(['--profile', 'cluster', 'config', '--services']).trim().split('\n').sort()).toEqual([...DEFAULT_SERVICES, ...CLUSTER_SERVICES].sort());
    // Without the signing key, compose refuses to start anything.
    const { SERVICE_SIGNING_PUBLIC_KEY: _unset, ...without } = env;
    const refused = spawnSync(command, [...prefix, 'config', '--quiet'], { cwd: REPO_ROOT, env: without, encoding: 'utf8', timeout: 30_000 });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/SERVICE_SIGNING_PUBLIC_KEY/);
  });
});

describe('Dockerfile', () => {
  const stages = dockerfile.split(/^(?=FROM )/m).filter((part) => part.startsWith('FROM '));
  const runtime = stages.at(-1) ?? '';

  it('builds in a build stage and runs from a separate runtime stage', () => {
    expect(stages.map((stage) => stage.split('\n')[0])).toEqual(['FROM node:20-bookworm-slim AS build', 'FROM node:20-bookworm-slim AS runtime']);
    expect(stages[0]).toMatch(/^RUN npm ci --ignore-scripts/m);
    expect(stages[0]).toMatch(/^COPY src \.\/src$/m);
    expect(stages[0]).toMatch(/^RUN npm run build$/m);
  });

  it('ships production dependencies, the compiled code and the Lua scripts only, and runs as non-root with a healthcheck', () => {
    expect(runtime).toMatch(/^RUN npm ci --omit=dev --ignore-scripts[^\n]*&& npm cache clean --force$/m);
    expect(runtime).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(runtime).toMatch(/^COPY package\.json package-lock\.json \.\/$/m);
    expect(runtime).toMatch(/^COPY lua \.\/lua$/m);
    // Nothing else: no sources, tests, or the build stage's node_modules with its dev dependencies.
    const copies = runtime.split('\n').filter((line) => line.startsWith('COPY '));
    expect(copies).toHaveLength(3);
    expect(runtime).toMatch(/^WORKDIR \/app$/m);
    expect(runtime).toMatch(/^ENV NODE_ENV=production$/m);
    const user = /^USER (\S+)$/m.exec(runtime)?.[1];
    expect(user).toBe('node');
    expect(runtime.indexOf('USER node')).toBeGreaterThan(runtime.lastIndexOf('RUN '));
    expect(runtime).toMatch(/^EXPOSE 8080$/m);
    expect(runtime).toMatch(/^HEALTHCHECK [^\n]*\\\n\s*CMD \["node", "-e", ".*\/healthz/m);
    expect(runtime).toMatch(/^ENTRYPOINT \["node", "dist\/cli\/main\.js"\]$/m);
    expect(runtime).toMatch(/^CMD \["serve", "--role", "api"\]$/m);
  });

  it('puts the Lua scripts where the compiled code reads them (<package root>/lua next to dist/)', () => {
    expect(relative(REPO_ROOT, LUA_DIR)).toBe('lua');
    expect(existsSync(join(LUA_DIR, 'createTicket.lua'))).toBe(true);
  });

  it('keeps local state, secrets and what the image does not need out of the build context, but not what it copies', () => {
    const ignored = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', '.git', '.versus-dev', 'bench/results', 'test', '**/*.env', '**/.env']));
    const sources = [...new Set([...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/)))];
    expect(sources.sort()).toEqual(['lua', 'package-lock.json', 'package.json', 'src', 'tsconfig.build.json', 'tsconfig.json']);
    for (const source of sources) {
      for (const pattern of ignored) {
        expect(dockerignoreMatches(pattern, source), `.dockerignore "${pattern}" excludes ${source}, which the Dockerfile copies`).toBe(false);
      }
    }
  });

  it('builds, and the image runs the CLI as `node` without dev dependencies or sources, where a Docker engine runs', { timeout: 900_000 }, () => {
    if (!succeeds('docker', ['info'])) {
      console.log('Dockerfile build not run: no Docker engine answers `docker info` on this machine (the Dockerfile checks above still ran)');
      return;
    }
    const tag = `versus:test-${process.pid}`;
    try {
      execFileSync('docker', ['build', '-q', '-t', tag, REPO_ROOT], { stdio: 'pipe', timeout: 840_000 });
      const help = execFileSync('docker', ['run', '--rm', tag, '--help'], { encoding: 'utf8', timeout: 60_000 });
      expect(help).toMatch(/versus serve \[--role api\|worker\|all\]/);
      const keys = JSON.parse(execFileSync('docker', ['run', '--rm', tag, 'keygen'], { encoding: 'utf8', timeout: 60_000 })) as Record<string, string>;
      expect(Object.keys(keys).sort()).toEqual(['publicKey', 'secretKey']);
      expect(execFileSync('docker', ['run', '--rm', '--entrypoint', 'id', tag, '-un'], { encoding: 'utf8', timeout: 60_000 }).trim()).toBe('node');
      const layout = spawnSync('docker', ['run', '--rm', '--entrypoint', 'sh', tag, '-c',
        'test -f lua/createTicket.lua && test -f dist/cli/main.js && test -d node_modules/ioredis && test ! -e node_modules/vitest && test ! -e node_modules/typescript && test ! -e src && test ! -e test'],
      { encoding: 'utf8', timeout: 60_000 });
      expect(layout.status, layout.stderr).toBe(0);
    } finally {
      spawnSync('docker', ['image', 'rm', '-f', tag], { stdio: 'ignore', timeout: 60_000 });
    }
  });
});
