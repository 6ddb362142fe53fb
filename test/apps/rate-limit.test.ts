import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimit } from '../../src/apps/limits.js';
import { issueManifest } from '../../src/apps/manifest.js';
import { registerManifest } from '../../src/apps/verification.js';
import { shortHash } from '../../src/push/store.js';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { createKeyProof } from '../../src/shared/tokens.js';
import type { TestApp } from '../helpers/harness.js';
import { runVersus, spawnApi, type SpawnedApi } from '../helpers/processes.js';
import { ticket } from '../helpers/tickets.js';
import { PushWorld } from '../push/support/env.js';

/**
 * Per-app admission and notification limits (`versus apps limits`), enforced in Redis: two API
 * replicas (this process's server and a child process) share one bucket per app and limit; time
 * moves only through the app's test clock. A refusal is 429 `{"error":"unavailable"}` and
 * changes nothing.
 */
const T0 = 1_800_000_000_000;
let world: PushWorld;
/** The second replica: `versus serve --role api` code in a child process, same Redis and prefix. */
let replica: SpawnedApi;

beforeAll(async () => {
  world = await PushWorld.start();
  replica = await spawnApi(world.env);
});
afterAll(async () => {
  await replica?.stop();
  await world?.stop();
});

const perSecond = (count: number, burst: number): RateLimit => ({ count, periodMs: 1000, burst });
const RATE_LIMITED = { status: 429, body: { error: 'unavailable' } };

interface Reply {
  status: number;
  body: any;
  retryAfter: string | null;
}

async function post(base: string, path: string, body: unknown, headers: Record<string, string>): Promise<Reply> {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text), retryAfter: response.headers.get('retry-after') };
}

/** The two replicas by index: 0 is the in-process server, 1 the child process. */
const urls = () => [world.harness.url, replica.url];

async function mm(app: TestApp, operation: string, input: unknown, via = 0): Promise<Reply> {
  return post(urls()[via]!, '/api/matchmaking', { operation, input }, { authorization: `Bearer ${await app.token()}` });
}

async function notify(app: TestApp, content: Record<string, unknown>, options: { via?: number; broadcast?: boolean; idempotencyKey?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${await app.token()}` };
  if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
  return post(urls()[options.via ?? 0]!, options.broadcast ? '/api/push/broadcast' : '/api/push', content, headers);
}

const status = (reply: Reply) => ({ status: reply.status, body: reply.body });

/** Every job on the push queue, whatever its state (no worker runs here). */
async function jobCount(): Promise<number> {
  const counts = await world.queue.getJobCounts();
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

const versus = (args: string[]) => runVersus(args, world.env);

async function limitedApp(limits: { admissions?: RateLimit; notifications?: RateLimit }): Promise<TestApp> {
  const app = await world.harness.registerApp({
    audienceDays: 30,
    limits: { admissions: limits.admissions ?? null, notifications: limits.notifications ?? null },
  });
  await world.harness.setClock(app, T0);
  return app;
}

describe('admission limit', () => {
  it('is one bucket for both replicas; a refusal is 429 unavailable with Retry-After and writes nothing', async () => {
    const app = await limitedApp({ admissions: perSecond(2, 3) });
    const admitted = [ticket(), ticket(), ticket()];
    for (const [i, input] of admitted.entries()) {
      expect((await mm(app, 'createTicket', input, i % 2)).status, `admission ${i}`).toBe(200);
    }
    // A fresh queue key with a policy: refused, so neither the ticket nor the queue's policy is stored.
    const refused = ticket({ queue: { key: 'fresh', size: 2 } });
    for (const via of [1, 0]) {
      const reply = await mm(app, 'createTicket', refused, via);
      expect(status(reply)).toEqual(RATE_LIMITED);
      expect(reply.retryAfter).toBe('1');
    }
    expect(await world.harness.redis.exists(world.keys.ticket(app.appId, refused.id))).toBe(0);
    expect((await mm(app, 'listTickets', {})).body.tickets.map((t: { id: string }) => t.id)).toEqual(admitted.map((t) => t.id));

    // One token comes back every 500 ms of the app's clock; the bucket holds at most 3.
    await world.harness.setClock(app, T0 + 499);
    expect(status(await mm(app, 'createTicket', refused, 1))).toEqual(RATE_LIMITED);
    await world.harness.setClock(app, T0 + 500);
    const later = await mm(app, 'createTicket', { ...refused, queue: { key: 'fresh', size: 2, rating: { initial: 5, widenPerSecond: 1 } } });
    expect(later.status).toBe(200); // the refusal had not fixed the queue's policy either
    expect(status(await mm(app, 'createTicket', ticket(), 1))).toEqual(RATE_LIMITED);

    await world.harness.setClock(app, T0 + 60_000);
    for (let i = 0; i < 3; i++) expect((await mm(app, 'createTicket', ticket(), i % 2)).status).toBe(200);
    expect(status(await mm(app, 'createTicket', ticket()))).toEqual(RATE_LIMITED);
  });

  it('never limits retries, conflicting retries, tombstones, listings or cancels', async () => {
    const app = await limitedApp({ admissions: perSecond(1, 1) });
    const waiting = ticket();
    const first = await mm(app, 'createTicket', waiting);
    expect(first.body.state).toBe('waiting');
    expect(status(await mm(app, 'createTicket', ticket()))).toEqual(RATE_LIMITED);
    for (const via of [0, 1]) {
      expect(status(await mm(app, 'createTicket', waiting, via))).toEqual({ status: 200, body: first.body });
      expect(status(await mm(app, 'createTicket', { ...waiting, payload: { other: true } }, via))).toEqual({ status: 409, body: { error: 'ticket_conflict' } });
      expect((await mm(app, 'listTickets', { id: waiting.id }, via)).body.tickets).toEqual([first.body]);
    }
    // A queue conflict is decided before the limit; so is validation.
    expect(status(await mm(app, 'createTicket', ticket({ queue: { key: 'duel', size: 2, rating: { initial: 1, widenPerSecond: 1 } } })))).toEqual({ status: 409, body: { error: 'queue_conflict' } });
    expect((await mm(app, 'createTicket', { ...ticket(), extra: 1 })).status).toBe(400);
    // A cancel of an unknown ID records a tombstone; creating that ID returns it.
    const tombstone = await mm(app, 'cancelTicket', { id: 'never-admitted' }, 1);
    expect(tombstone.body).toMatchObject({ id: 'never-admitted', state: 'cancelled', admission: null });
    expect(status(await mm(app, 'createTicket', ticket({ id: 'never-admitted' })))).toEqual({ status: 200, body: tombstone.body });
    const cancelled = await mm(app, 'cancelTicket', { id: waiting.id }, 1);
    expect(cancelled.body).toMatchObject({ state: 'cancelled', reason: 'requested' });
    expect(status(await mm(app, 'createTicket', waiting))).toEqual({ status: 200, body: cancelled.body });
    // Still no token for a new ID: none of the above took one.
    expect(status(await mm(app, 'createTicket', ticket()))).toEqual(RATE_LIMITED);
  });

  it('is per app: another app, limited or not, is unaffected by an exhausted bucket', async () => {
    const exhausted = await limitedApp({ admissions: perSecond(1, 1) });
    const limited = await limitedApp({ admissions: perSecond(1, 2) });
    const unlimited = await limitedApp({});
    expect((await mm(exhausted, 'createTicket', ticket())).status).toBe(200);
    expect(status(await mm(exhausted, 'createTicket', ticket(), 1))).toEqual(RATE_LIMITED);
    expect((await mm(limited, 'createTicket', ticket())).status).toBe(200);
    expect((await mm(limited, 'createTicket', ticket(), 1)).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await mm(unlimited, 'createTicket', ticket(), i % 2)).status).toBe(200);
    // Without a limit the script never touches a bucket.
    expect(await world.harness.redis.exists(world.keys.admissionLimit(unlimited.appId))).toBe(0);
    expect(await world.harness.redis.exists(world.keys.admissionLimit(limited.appId))).toBe(1);
  });
});

describe('notification limit', () => {
  it('limits accepted sends of both kinds across replicas; a refusal enqueues nothing; replays take no token', async () => {
    const app = await limitedApp({ notifications: perSecond(1, 2) });
    const { wallet } = await world.user(app);
    const content = { to: wallet.address, title: 'Round 2', body: 'Your move' };
    const jobsBefore = await jobCount();

    const first = await notify(app, content, { via: 0, idempotencyKey: 'first' });
    expect(first.status).toBe(202);
    expect((await notify(app, { title: 'All', body: 'hands' }, { via: 1, broadcast: true })).status).toBe(202);
    expect(await jobCount()).toBe(jobsBefore + 2);

    const refusedUser = await notify(app, content, { via: 1, idempotencyKey: 'refused' });
    expect(status(refusedUser)).toEqual(RATE_LIMITED);
    expect(refusedUser.retryAfter).toBe('1');
    expect(status(await notify(app, { title: 'All', body: 'hands' }, { via: 0, broadcast: true }))).toEqual(RATE_LIMITED);
    expect(await jobCount()).toBe(jobsBefore + 2);
    expect(await world.harness.redis.exists(world.keys.pushIdempotency(app.appId, shortHash('key:refused')))).toBe(0);

    // The replay of an accepted send answers its first id on either replica, while the bucket is empty.
    for (const via of [0, 1]) expect(status(await notify(app, content, { via, idempotencyKey: 'first' }))).toEqual({ status: 202, body: first.body });
    // Refusals by earlier checks take no token either.
    expect((await notify(app, { ...content, title: ' ' })).body).toEqual({ error: 'invalid_title' });

    // A token every second of the app's clock; the refused key stored nothing, so it is a new send.
    await world.harness.setClock(app, T0 + 1000);
    const retried = await notify(app, { ...content, body: 'Other content' }, { via: 1, idempotencyKey: 'refused' });
    expect(retried.status).toBe(202);
    expect(await world.queue.getJob(retried.body.id)).toBeDefined();
    expect(status(await notify(app, content))).toEqual(RATE_LIMITED);
    expect(await jobCount()).toBe(jobsBefore + 3);
  });

  it('is per app and separate from the admission limit', async () => {
    const app = await limitedApp({ admissions: perSecond(1, 1), notifications: perSecond(1, 1) });
    const other = await limitedApp({});
    const { wallet } = await world.user(app);
    await world.host('/api/host/visits', wallet, { origin: other.origin });
    expect((await notify(app, { to: wallet.address, title: 't', body: 'b' })).status).toBe(202);
    expect(status(await notify(app, { to: wallet.address, title: 't', body: 'b' }, { via: 1 }))).toEqual(RATE_LIMITED);
    expect((await mm(app, 'createTicket', ticket())).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await notify(other, { to: wallet.address, title: 't', body: `${i}` }, { via: i % 2 })).status).toBe(202);
  });
});

describe('versus apps limits', () => {
  it('sets, shows and clears limits; the API enforces them once its cached record is renewed', async () => {
    const app = await limitedApp({});
    const shownLimits = async () => JSON.parse((await versus(['apps', 'show', app.origin])).stdout).limits;
    expect(await shownLimits()).toEqual({ admissions: null, notifications: null });

    expect(await versus(['apps', 'limits', app.origin, '--admissions', '1/s'])).toEqual({
      code: 0,
      stdout: `${app.origin}: admissions 1/s (burst 1), notifications off\n`,
      stderr: '',
    });
    expect((await versus(['apps', 'limits', app.origin, '--notifications', '600/min', '--notification-burst', '50'])).stdout).toBe(
      `${app.origin}: admissions 1/s (burst 1), notifications 600/min (burst 50)\n`,
    );
    expect((await versus(['apps', 'limits', app.origin, '--admission-burst', '4'])).stdout).toBe(
      `${app.origin}: admissions 1/s (burst 4), notifications 600/min (burst 50)\n`,
    );
    expect(await shownLimits()).toEqual({ admissions: { rate: '1/s', burst: 4 }, notifications: { rate: '600/min', burst: 50 } });
    expect((await world.harness.registry.fetch(app.origin))!.limits).toEqual({
      admissions: { count: 1, periodMs: 1000, burst: 4 },
      notifications: { count: 600, periodMs: 60_000, burst: 50 },
    });
    expect((await versus(['apps', 'limits', app.origin])).stdout).toBe(`${app.origin}: admissions 1/s (burst 4), notifications 600/min (burst 50)\n`);

    // The in-process replica's cached record (2 s) renewed as if the time had passed.
    await world.harness.server.services.registry.fetch(app.origin);
    for (let i = 0; i < 4; i++) expect((await mm(app, 'createTicket', ticket())).status).toBe(200);
    expect(status(await mm(app, 'createTicket', ticket()))).toEqual(RATE_LIMITED);

    expect((await versus(['apps', 'limits', app.origin, '--admissions', 'off'])).stdout).toBe(`${app.origin}: admissions off, notifications 600/min (burst 50)\n`);
    expect((await versus(['apps', 'limits', app.origin, '--notifications', 'off'])).stdout).toBe(`${app.origin}: admissions off, notifications off\n`);
    expect(await shownLimits()).toEqual({ admissions: null, notifications: null });
    expect((await world.harness.registry.fetch(app.origin))!.limits).toBeUndefined();
    await world.harness.server.services.registry.fetch(app.origin);
    expect((await mm(app, 'createTicket', ticket())).status).toBe(200);
  });

  it('keeps the limits when the app is registered again from a new manifest', async () => {
    const app = await limitedApp({ admissions: perSecond(5, 5) });
    const service = generateKeyPair();
    const manifest = await issueManifest({
      signingKey: service.secretKey,
      origin: app.origin,
      name: 'Renamed',
      appKey: app.publicKey,
      proof: await createKeyProof(app.secretKey, app.origin),
      push: true,
    });
    await registerManifest(manifest, { registry: world.harness.registry, config: { signingPublicKey: service.publicKey, environment: 'production' } });
    expect(await world.harness.registry.fetch(app.origin)).toMatchObject({ name: 'Renamed', limits: { admissions: perSecond(5, 5), notifications: null } });
  });

  it('refuses bad values in one line, exit 1, changing nothing', async () => {
    const app = await limitedApp({ admissions: perSecond(3, 3) });
    for (const [args, message] of [
      [['--admissions', '0/s'], '--admissions must be N/s, N/min or N/h with N a whole number from 1 to 1000000, or off'],
      [['--admissions', '10'], '--admissions must be N/s, N/min or N/h with N a whole number from 1 to 1000000, or off'],
      [['--notifications', '5/day'], '--notifications must be N/s, N/min or N/h with N a whole number from 1 to 1000000, or off'],
      [['--admission-burst', '0'], '--admission-burst must be a whole number from 1 to 1000000'],
      [['--admissions', 'off', '--admission-burst', '3'], '--admission-burst cannot be set with --admissions off'],
      [['--notification-burst', '3'], 'no notification limit to change the burst of: set --notifications N/s too'],
    ] as const) {
      expect(await versus(['apps', 'limits', app.origin, ...args]), args.join(' ')).toEqual({ code: 1, stdout: '', stderr: `versus: ${message}\n` });
    }
    expect(await versus(['apps', 'limits', 'https://nobody.example', '--admissions', '1/s'])).toEqual({ code: 1, stdout: '', stderr: 'versus: no app https://nobody.example\n' });
    expect((await world.harness.registry.fetch(app.origin))!.limits).toEqual({ admissions: perSecond(3, 3), notifications: null });
  });
});
