import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Keys } from '../../src/redis/keys.js';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { REPO_ROOT, runVersus } from '../helpers/processes.js';
import { redisUrl } from '../setup/redis-url.js';

const CLI = join(REPO_ROOT, 'src', 'cli', 'main.ts');
const prefix = testPrefix();
let redis: Redis;

/** Runs `versus …` as a user would; resolves with exit code, stdout and stderr. */
function versus(args: string[], env: Record<string, string> = {}, input?: string) {
  return runVersus(args, { REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, LOG_LEVEL: 'silent', ...env }, input);
}

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('versus CLI', () => {
  it('keygen → manifest proof → manifest issue → apps register → apps show/list', async () => {
    const keygen = await versus(['keygen']);
    expect(keygen.code).toBe(0);
    const service = JSON.parse(keygen.stdout);
    expect(Object.keys(service)).toEqual(['secretKey', 'publicKey']);
    const app = JSON.parse((await versus(['keygen'])).stdout);
    const origin = 'https://cli.example';

    const proof = await versus(['manifest', 'proof', '--origin', origin], { SERVICE_APP_KEY: app.secretKey });
    expect(proof.code).toBe(0);
    const issued = await versus(['manifest', 'issue', '--origin', origin, '--name', 'CLI Game', '--app-key', app.publicKey, '--proof', proof.stdout.trim(), '--push'], {
      SERVICE_SIGNING_KEY: service.secretKey,
    });
    expect(issued.code, issued.stderr).toBe(0);
    const registered = await versus(['apps', 'register', '--manifest', '-'], { SERVICE_SIGNING_PUBLIC_KEY: service.publicKey }, `\n${issued.stdout}\n`);
    expect(registered).toMatchObject({ code: 0, stdout: `registered ${origin} (CLI Game, production)\n` });

    const shown = JSON.parse((await versus(['apps', 'show', origin])).stdout);
    expect(shown).toMatchObject({ origin, name: 'CLI Game', appKey: app.publicKey, push: true, verified: true, environment: 'production' });
    expect(shown.manifest).toBeUndefined();
    const listed = await versus(['apps', 'list']);
    expect(listed.stdout).toBe(`${origin}\tCLI Game\tproduction\tverified\tpush=yes\n`);

    // A staging manifest on a production service: exit 1, one line, no stack trace.
    const staging = await versus(['manifest', 'issue', '--origin', origin, '--name', 'CLI Game', '--app-key', app.publicKey, '--proof', proof.stdout.trim(), '--staging'], {
      SERVICE_SIGNING_KEY: service.secretKey,
    });
    const refused = await versus(['apps', 'register', '--manifest', '-'], { SERVICE_SIGNING_PUBLIC_KEY: service.publicKey }, staging.stdout);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe('versus: the manifest is for staging but this service is production\n');
  });

  it('a bad setting stops with one line naming the variable', async () => {
    const res = await versus(['apps', 'list'], { SERVICE_SIGNING_KEY: 'not-a-key' });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe('versus: SERVICE_SIGNING_KEY: not a base58 64-byte Ed25519 secret key\n');
    const port = await versus(['serve'], { PORT: 'eighty' });
    expect(port).toMatchObject({ code: 1, stderr: 'versus: PORT: not a port number: eighty\n' });
    const appKey = await versus(['token'], { SERVICE_APP_KEY: 'not-a-key', VERSUS_APP_ORIGIN: 'https://x.example' });
    expect(appKey).toMatchObject({ code: 1, stderr: 'versus: SERVICE_APP_KEY: not a base58 64-byte Ed25519 secret key\n' });
  });

  it('--help prints the usage and exits 0', async () => {
    const help = await versus(['apps', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('versus manifest issue --origin O --name N --app-key PUB --proof JWS');
    expect(help.stderr).toBe('');
  });

  it('manifest issue refuses a proof made by another key, in one line', async () => {
    const service = JSON.parse((await versus(['keygen'])).stdout);
    const app = JSON.parse((await versus(['keygen'])).stdout);
    const thief = JSON.parse((await versus(['keygen'])).stdout);
    const proof = await versus(['manifest', 'proof', '--origin', 'https://x.example'], { SERVICE_APP_KEY: thief.secretKey });
    const res = await versus(['manifest', 'issue', '--origin', 'https://x.example', '--name', 'X', '--app-key', app.publicKey, '--proof', proof.stdout.trim()], {
      SERVICE_SIGNING_KEY: service.secretKey,
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/^versus: the key proof is not valid for this app key[^\n]*\n$/);
  });
});

async function waitUntil(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Runs `versus dev` until it prints its four environment lines; returns them, its output and a stop function. */
async function startDev(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, 'dev'], { cwd: REPO_ROOT, env: { ...process.env, LOG_LEVEL: 'silent', ...env } });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      if (/^VERSUS_DEMO_WALLET=.*\n/m.test(stdout)) resolve();
    });
    void exited.then((code) => reject(new Error(`versus dev exited ${code}: ${stderr}`)));
  });
  const lines = Object.fromEntries(stdout.trim().split('\n').map((l) => l.split(/=(.*)/s).slice(0, 2)));
  return { lines, stdout: () => stdout, stderr: () => stderr, stop: async () => (child.kill('SIGTERM'), exited.then((code) => code ?? `signal ${child.signalCode}`)) };
}

describe('versus dev', () => {
  // Each test starts the stack (API, a tsx-compiled worker process, the push service) on a shared 2-core machine.
  const STACK_TIMEOUT_MS = 90_000;

  it('uses the Redis that answers, registers the demo app, and serves a walkthrough that pairs two players', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'versus-dev-'));
    const dev = await startDev({ REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, VERSUS_DEV_DIR: dir, PORT: String(await freePort()) });
    try {
      expect(Object.keys(dev.lines)).toEqual(['SERVICE_APP_KEY', 'SERVICE_API_URL', 'VERSUS_APP_ORIGIN', 'VERSUS_DEMO_WALLET']);
      expect(readFileSync(join(dir, 'app.env'), 'utf8')).toBe(Object.entries(dev.lines).map(([k, v]) => `${k}=${v}\n`).join(''));
      const env = { SERVICE_APP_KEY: dev.lines['SERVICE_APP_KEY']!, VERSUS_APP_ORIGIN: dev.lines['VERSUS_APP_ORIGIN']! };
      const call = async (body: unknown) => {
        const token = (await versus(['token'], env)).stdout.trim();
        const res = await fetch(`${dev.lines['SERVICE_API_URL']}/api/matchmaking`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return res.json() as Promise<any>;
      };
      const queue = { key: 'chess:blitz', size: 2 };
      expect((await call({ operation: 'createTicket', input: { id: 't-alice-1', player: 'alice', queue, payload: { seed: 42 } } })).state).toBe('waiting');
      const bob = await call({ operation: 'createTicket', input: { id: 't-bob-1', player: 'bob', queue, payload: { seed: 7 } } });
      expect(bob).toMatchObject({ state: 'matched', match: { payload: { seed: 42 } } });
      // Push is enabled (VAPID keys of its own): a send reaches the audience check, not push_not_enabled.
      const token = (await versus(['token'], env)).stdout.trim();
      const push = await fetch(`${dev.lines['SERVICE_API_URL']}/api/push`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ to: '11111111111111111111111111111111', title: 'Hi', body: 'Your move' }),
      });
      expect(push.status).toBe(404);
      expect(await push.json()).toEqual({ error: 'unknown_user' });
      expect(dev.stderr()).toContain(`using the Redis at ${redisUrl()}`);

      // The demo wallet is subscribed at the loopback push service: the push worker (a child
      // process) delivers, and the push service prints the notification decrypted.
      const wallet = dev.lines['VERSUS_DEMO_WALLET']!;
      const sent = await fetch(`${dev.lines['SERVICE_API_URL']}/api/push`, {
        method: 'POST',
        headers: { authorization: `Bearer ${(await versus(['token'], env)).stdout.trim()}`, 'content-type': 'application/json' },
        body: JSON.stringify({ to: wallet, title: 'Your move', body: 'Bob played e4', path: '/games/42' }),
      });
      expect(sent.status).toBe(202);
      const line = `push service: to wallet ${wallet}: "Versus Demo: Your move" "Bob played e4" (opens https://demo.versus.localhost/games/42)\n`;
      await waitUntil('the printed notification', () => dev.stdout().includes(line));
      // Printed lines carry no key: neither the app's nor the VAPID keys nor the subscription's.
      const keys = JSON.parse(readFileSync(join(dir, 'keys.json'), 'utf8'));
      for (const secret of [keys.appSecretKey, keys.serviceSecretKey, keys.vapid.privateKey, keys.vapid.publicKey, keys.demoWalletSecretKey]) {
        expect(dev.stdout().replace(/^SERVICE_APP_KEY=.*\n/m, '') + dev.stderr()).not.toContain(secret);
      }
    } finally {
      expect(await dev.stop(), dev.stderr()).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }, STACK_TIMEOUT_MS);

  it('a restart replaces the demo subscription (its port changed) instead of adding one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'versus-dev-'));
    const env = { REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, VERSUS_DEV_DIR: dir };
    try {
      const first = await startDev({ ...env, PORT: String(await freePort()) });
      const wallet = first.lines['VERSUS_DEMO_WALLET']!;
      const endpoint = readFileSync(join(dir, 'push-service', 'endpoint'), 'utf8').trim();
      expect(await first.stop()).toBe(0);
      const second = await startDev({ ...env, PORT: String(await freePort()) });
      try {
        expect(second.lines['VERSUS_DEMO_WALLET']).toBe(wallet);
        const next = readFileSync(join(dir, 'push-service', 'endpoint'), 'utf8').trim();
        expect(next).not.toBe(endpoint);
        expect(await redis.hkeys(new Keys(prefix).walletSubscriptions(wallet))).toEqual([next]);
      } finally {
        expect(await second.stop()).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, STACK_TIMEOUT_MS);

  it('without openssl: no loopback push service, said in one line; the rest of the stack runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'versus-dev-'));
    const dev = await startDev({ REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, VERSUS_DEV_DIR: dir, PORT: String(await freePort()), PATH: '/nonexistent' });
    try {
      expect(dev.stderr()).toContain('versus dev: no loopback push service (openssl is not installed, needed for its certificate): notifications are accepted, not delivered\n');
      const sent = await fetch(`${dev.lines['SERVICE_API_URL']}/api/push`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${(await versus(['token'], { SERVICE_APP_KEY: dev.lines['SERVICE_APP_KEY']!, VERSUS_APP_ORIGIN: dev.lines['VERSUS_APP_ORIGIN']! })).stdout.trim()}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ to: dev.lines['VERSUS_DEMO_WALLET'], title: 'Hi', body: 'Nobody prints this' }),
      });
      expect(sent.status).toBe(202);
    } finally {
      expect(await dev.stop(), dev.stderr()).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }, STACK_TIMEOUT_MS);

  it('starts the local redis-server when none answers, with its data in the dev folder', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'versus-dev-'));
    const redisPort = await freePort();
    const dev = await startDev({ REDIS_URL: `redis://127.0.0.1:${redisPort}`, VERSUS_DEV_DIR: dir, PORT: String(await freePort()) });
    try {
      expect(dev.stderr()).toContain(`started redis-server on port ${redisPort} (data in ${join(dir, 'redis')})`);
      const local = new Redis(`redis://127.0.0.1:${redisPort}`);
      expect(await local.sismember('vs:apps', dev.lines['VERSUS_APP_ORIGIN']!)).toBe(1);
      local.disconnect();
    } finally {
      expect(await dev.stop()).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
    // The redis-server it started is gone with it.
    const probe = new Redis(`redis://127.0.0.1:${redisPort}`, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    await expect(probe.connect()).rejects.toThrow();
  }, STACK_TIMEOUT_MS);

  it('stops with one line saying how to get Redis when none answers and redis-server is missing', async () => {
    const res = await versus(['dev'], { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, PATH: '/nonexistent', VERSUS_DEV_DIR: mkdtempSync(join(tmpdir(), 'versus-dev-')) });
    expect(res.code).toBe(1);
    expect(res.stderr.trim().split('\n')).toHaveLength(1);
    expect(res.stderr).toMatch(/^versus: no Redis answers at .* and redis-server is not installed; install Redis \(apt-get install redis-server/);
  });
});
