import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Harness, type TestApp } from '../helpers/harness.js';
import { REPO_ROOT } from '../helpers/processes.js';

/**
 * Runs examples/app-server.ts exactly as examples/README.md says (`node --import tsx
 * examples/app-server.ts` with the variables `npm run dev` prints), against a real API and
 * Redis, and pairs two players through its HTTP routes.
 */

let h: Harness;
let app: TestApp;
let child: ChildProcess;
let appUrl: string;
let stderr = '';

function startExample(env: Record<string, string>): Promise<string> {
  child = spawn(process.execPath, ['--import', 'tsx', path.join('examples', 'app-server.ts')], {
    cwd: REPO_ROOT,
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`example did not start in 20 s\n${stderr}`)), 20_000);
    child.once('exit', (code) => reject(new Error(`example exited with ${code}\n${stderr}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /listening on (http:\/\/\S+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
  });
}

beforeAll(async () => {
  h = await Harness.start();
  app = await h.registerApp();
  appUrl = await startExample({
    VERSUS_APP_ORIGIN: app.origin,
    SERVICE_APP_KEY: app.secretKey,
    SERVICE_API_URL: h.url,
    PORT: '0',
  });
}, 30_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  await h?.stop();
});

async function as(player: string | null, method: string, route: string): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = player === null ? {} : { 'x-demo-player': player };
  const res = await fetch(`${appUrl}${route}`, { method, headers });
  return { status: res.status, body: await res.json() };
}

describe('examples/app-server.ts', () => {
  it('pairs two players through its HTTP routes', async () => {
    const alice = await as('alice', 'POST', '/matches');
    expect(alice.status).toBe(201);
    expect(alice.body.ticket).toMatchObject({ state: 'waiting', conditions: { seed: expect.any(Number) } });

    const bob = await as('bob', 'POST', '/matches');
    expect(bob.body.ticket).toMatchObject({ state: 'matched', opponent: 'alice', conditions: alice.body.ticket.conditions });

    // Alice sees the same match on her next read; the waiting player's conditions won.
    const mine = await as('alice', 'GET', '/matches');
    expect(mine.body.tickets).toEqual([
      { id: alice.body.ticket.id, state: 'matched', matchId: bob.body.ticket.matchId, opponent: 'bob', conditions: alice.body.ticket.conditions },
    ]);
    expect((await as('alice', 'GET', `/matches/${alice.body.ticket.id}`)).body.ticket.state).toBe('matched');
  });

  it('shows and cancels only the caller’s own tickets', async () => {
    const carol = await as('carol', 'POST', '/matches');
    expect(carol.body.ticket.state).toBe('waiting');
    expect((await as('mallory', 'GET', `/matches/${carol.body.ticket.id}`)).status).toBe(404);
    expect((await as('mallory', 'DELETE', `/matches/${carol.body.ticket.id}`)).status).toBe(404);
    const cancelled = await as('carol', 'DELETE', `/matches/${carol.body.ticket.id}`);
    expect(cancelled.body.ticket).toEqual({ id: carol.body.ticket.id, state: 'cancelled', reason: 'requested' });
    expect((await as(null, 'POST', '/matches')).status).toBe(401);
  });
});
