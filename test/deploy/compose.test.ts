import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../helpers/processes.js';

interface Service {
  image?: string;
  build?: string;
  command?: string[];
  healthcheck?: { test?: string[] };
  depends_on?: Record<string, { condition: string }>;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
}

// `merge: true` resolves the `<<: *versus` merge keys the file uses for the shared service settings.
const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');

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
  const { services } = compose;

  it('runs Redis with AOF persistence on a volume, and a healthcheck', () => {
    const redis = services['redis']!;
    expect(redis.image).toMatch(/^redis:7/);
    expect(redis.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']));
    expect(redis.command).toEqual(expect.arrayContaining(['--appendfsync', 'everysec']));
    expect(redis.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    expect(redis.healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping']);
  });

  it('runs two API replicas and a worker from the image, each healthchecked and waiting for a healthy Redis', () => {
    for (const [name, role] of [['api1', 'api'], ['api2', 'api'], ['worker', 'worker']] as const) {
      const service = services[name]!;
      expect(service.build, name).toBe('.');
      expect(service.command, name).toEqual(['serve', '--role', role]);
      expect(service.healthcheck?.test?.join(' '), name).toMatch(API_HEALTHCHECK_URL);
      expect(service.depends_on?.['redis']?.condition, name).toBe('service_healthy');
      expect(service.environment?.['REDIS_URL'], name).toBe('redis://redis:6379');
      expect(service.environment?.['SERVICE_ENVIRONMENT'], name).toBeDefined();
      // Required from the host environment: compose stops with a message when it is unset.
      expect(service.environment?.['SERVICE_SIGNING_PUBLIC_KEY'], name).toMatch(/^\$\{SERVICE_SIGNING_PUBLIC_KEY:\?.+\}$/);
    }
  });

  it('passes the push settings through to the worker and to both APIs (which answer push_not_enabled without them)', () => {
    for (const service of ['worker', 'api1', 'api2']) {
      const env = services[service]!.environment ?? {};
      for (const name of ['VAPID_PUBLIC_KEY', 'VAPID_PRIVATE_KEY', 'VAPID_SUBJECT', 'PUSH_ENDPOINT_HOSTS']) {
        expect(env[name], `${service} ${name}`).toMatch(new RegExp(`^\\$\\{${name}(:-)?\\}$`));
      }
    }
  });

  it('puts a load balancer on host port 8080 in front of both replicas', () => {
    const lb = services['lb']!;
    expect(Object.keys(lb.depends_on ?? {}).sort()).toEqual(['api1', 'api2']);
    expect(lb.ports).toEqual(['8080:8080']);
    expect(lb.healthcheck).toBeDefined();
    const nginx = readFileSync(join(REPO_ROOT, 'deploy', 'nginx.conf'), 'utf8');
    expect(nginx).toMatch(/server api1:8080/);
    expect(nginx).toMatch(/server api2:8080/);
    expect(nginx).toMatch(/listen 8080;/);
  });

  it('is accepted by `docker compose config` where a compose client is installed', () => {
    const client = composeClient();
    if (!client) {
      console.log('docker compose config not run: neither `docker compose` nor `docker-compose` is installed here (the YAML checks above still ran)');
      return;
    }
    const [command, prefix] = client;
    const env = { ...process.env, SERVICE_SIGNING_PUBLIC_KEY: 'test-public-key' };
    execFileSync(command, [...prefix, 'config', '--quiet'], { cwd: REPO_ROOT, env, stdio: 'pipe', timeout: 30_000 });
    // Without the signing key, compose refuses to start anything.
    const { SERVICE_SIGNING_PUBLIC_KEY: _unset, ...without } = env;
    const refused = spawnSync(command, [...prefix, 'config', '--quiet'], { cwd: REPO_ROOT, env: without, encoding: 'utf8', timeout: 30_000 });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/SERVICE_SIGNING_PUBLIC_KEY/);
  });
});

describe('Dockerfile', () => {
  it('builds in stages, installs production dependencies only, ships the Lua scripts, runs as non-root with a healthcheck', () => {
    expect(dockerfile.match(/^FROM node:20-bookworm-slim/gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/^RUN npm run build$/m);
    expect(dockerfile).toMatch(/^RUN npm ci --omit=dev --ignore-scripts/m);
    expect(dockerfile).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(dockerfile).toMatch(/^COPY lua \.\/lua$/m);
    expect(dockerfile).toMatch(/^ENV NODE_ENV=production$/m);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^EXPOSE 8080$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK [^\n]*\\\n\s*CMD \["node", "-e", ".*\/healthz/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "dist\/cli\/main\.js"\]$/m);
    expect(dockerfile).toMatch(/^CMD \["serve", "--role", "api"\]$/m);
  });

  it('keeps local state out of the build context', () => {
    const ignored = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n').map((line) => line.trim());
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'dist', '.git', '.versus-dev', 'bench/results']));
  });

  it('builds, and the image runs the CLI, where a Docker engine runs', { timeout: 900_000 }, () => {
    if (!succeeds('docker', ['info'])) {
      console.log('Dockerfile build not run: no Docker engine answers `docker info` on this machine (the Dockerfile checks above still ran)');
      return;
    }
    const tag = `versus:test-${process.pid}`;
    try {
      execFileSync('docker', ['build', '-q', '-t', tag, REPO_ROOT], { stdio: 'pipe', timeout: 840_000 });
      const keys = JSON.parse(execFileSync('docker', ['run', '--rm', tag, 'keygen'], { encoding: 'utf8', timeout: 60_000 })) as Record<string, string>;
      expect(Object.keys(keys).sort()).toEqual(['publicKey', 'secretKey']);
      expect(execFileSync('docker', ['run', '--rm', '--entrypoint', 'id', tag, '-un'], { encoding: 'utf8', timeout: 60_000 }).trim()).toBe('node');
    } finally {
      spawnSync('docker', ['image', 'rm', '-f', tag], { stdio: 'ignore', timeout: 60_000 });
    }
  });
});
