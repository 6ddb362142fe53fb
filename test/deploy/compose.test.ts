import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../helpers/processes.js';

const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { command?: string[]; healthcheck?: unknown; depends_on?: Record<string, { condition: string }>; environment?: Record<string, string>; build?: string; ports?: string[] }>;
};
const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');

function dockerEngineAnswers(): boolean {
  try {
    execFileSync('docker', ['info'], { stdio: 'ignore', timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

describe('docker-compose.yml', () => {
  const { services } = compose;

  it('runs Redis with AOF persistence and a healthcheck', () => {
    expect(services['redis']?.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']));
    expect(services['redis']?.healthcheck).toBeDefined();
  });

  it('runs two API replicas and a worker from the image, each healthchecked and waiting for Redis', () => {
    for (const [name, role] of [['api1', 'api'], ['api2', 'api'], ['worker', 'worker']] as const) {
      const service = services[name]!;
      expect(service.build, name).toBe('.');
      expect(service.command, name).toEqual(['serve', '--role', role]);
      expect(service.healthcheck, name).toBeDefined();
      expect(service.depends_on?.['redis']?.condition, name).toBe('service_healthy');
      expect(service.environment?.['REDIS_URL'], name).toBe('redis://redis:6379');
    }
  });

  it('puts a load balancer in front of both replicas', () => {
    const lb = services['lb']!;
    expect(Object.keys(lb.depends_on ?? {}).sort()).toEqual(['api1', 'api2']);
    expect(lb.ports).toEqual(['8080:8080']);
    const nginx = readFileSync(join(REPO_ROOT, 'deploy', 'nginx.conf'), 'utf8');
    expect(nginx).toMatch(/server api1:8080/);
    expect(nginx).toMatch(/server api2:8080/);
  });
});

describe('Dockerfile', () => {
  it('builds in stages, installs production dependencies only, ships the Lua scripts, runs as non-root with a healthcheck', () => {
    expect(dockerfile.match(/^FROM /gm)).toHaveLength(2);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^COPY lua \.\/lua$/m);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK /m);
    expect(dockerfile).toMatch(/^ENV NODE_ENV=production$/m);
  });

  it('builds where a Docker engine runs', () => {
    if (!dockerEngineAnswers()) {
      console.log('Dockerfile build not run: no Docker engine answers `docker info` on this machine');
      return;
    }
    execFileSync('docker', ['build', '-q', '-t', 'versus:test', REPO_ROOT], { stdio: 'inherit', timeout: 600_000 });
  });
});
