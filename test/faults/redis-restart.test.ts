/**
 * Fault: the API's Redis stops and comes back. An API process pointed at a redis-server of the
 * test's own answers 503 {"error":"unavailable"} while Redis is away (not a hang, not a 500),
 * /readyz says it is not ready, and once redis-server runs again on the same port the same
 * process serves again, without a restart, reloading its scripts into the new server. The same
 * 503 while Redis is frozen, and while it answers BUSY (another client's script running past
 * the busy threshold).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadScript } from '../../src/redis/scripts.js';
import { checkInvariants, formatViolations, type Observation } from '../helpers/invariants.js';
import { directClient } from '../helpers/redis-server.js';
import { answered, listAll, operate, ownRedisSuite, send, waitUntil, type Reply } from './support.js';

const MATCHMAKING_SCRIPTS = ['createTicket', 'cancelTicket', 'listTickets'] as const;
/**
 * The restarted server knows SCRIPT only under this name. The API loads its scripts on every
 * (re)connection with SCRIPT LOAD; with that refused, the scripts can only come back through
 * the NOSCRIPT answer to EVALSHA (ScriptRunner then sends the source with EVAL), which is the
 * path this test makes certain to exercise. The test's own client checks SCRIPT EXISTS under
 * the new name.
 */
const RENAMED_SCRIPT = `script-${randomUUID().slice(0, 8)}`;

const unavailable = { status: 503, body: { error: 'unavailable' } };
const statusAndBody = (reply: Reply) => (answered(reply) ? { status: reply.status, body: reply.body } : reply);

function infoField(info: string, name: string, field: string): number {
  const line = info.split('\r\n').find((l) => l.startsWith(`${name}:`));
  const match = line === undefined ? null : new RegExp(`(?:^|[:,])${field}=(\\d+)`).exec(line.slice(name.length + 1));
  return match ? Number(match[1]) : 0;
}

describe('Redis stopped and started again under a running API', () => {
  const shas = MATCHMAKING_SCRIPTS.map((name) => loadScript(name).sha);
  // AOF on: SIGTERM writes it out, so the app record and tickets come back with the server.
  const own = ownRedisSuite('Restart', ['--appendonly', 'yes']);

  it('answers 503 unavailable while Redis is down, and serves again after it restarts, reloading its scripts through NOSCRIPT', async () => {
    const token = await own.app.token();
    const ticket = (id: string, player: string, key = 'duel') => ({ id, player, queue: { key, size: 2 as const }, payload: { id } });
    const observations: Observation[] = [];
    const call = async (operation: 'createTicket' | 'cancelTicket', input: { id: string }) => {
      const reply = await operate(own.api.url, token, operation, input);
      if (answered(reply) && reply.status === 200) observations.push({ operation, input, status: reply.status, body: reply.body });
      return reply;
    };

    // Serving: a match and a waiting ticket; the scripts were loaded at start.
    expect(statusAndBody(await call('createTicket', ticket('a', 'alice')))).toMatchObject({ status: 200, body: { state: 'waiting' } });
    expect(statusAndBody(await call('createTicket', ticket('b', 'bob')))).toMatchObject({ status: 200, body: { state: 'matched' } });
    expect(statusAndBody(await call('createTicket', ticket('c', 'carol')))).toMatchObject({ status: 200, body: { state: 'waiting' } });
    expect(await own.admin.script('EXISTS', ...shas)).toEqual([1, 1, 1]);

    // Redis stops (SIGTERM: a clean shutdown) while a burst of admissions is in flight: each is
    // answered, 200 (done before the stop) or 503 unavailable.
    own.admin.disconnect();
    const burst = Array.from({ length: 30 }, (_, i) => call('createTicket', ticket(`burst-${i}`, `burster-${i}`, 'burst')));
    await own.server.signal('SIGTERM');
    const burstReplies = (await Promise.all(burst)).map(statusAndBody);
    for (const reply of burstReplies) expect([200, 503], JSON.stringify(reply)).toContain((reply as { status?: number }).status);
    for (const reply of burstReplies.filter((r) => (r as { status?: number }).status === 503)) expect(reply).toEqual(unavailable);
    const burstAccepted = burstReplies.filter((r) => (r as { status?: number }).status === 200).length;

    // Down: every operation answers 503 unavailable, each before the client's guard (5 s);
    // /readyz is 503, /healthz (the process itself) 200.
    expect(statusAndBody(await operate(own.api.url, token, 'createTicket', ticket('d', 'dave')))).toEqual(unavailable);
    expect(statusAndBody(await operate(own.api.url, token, 'listTickets', {}))).toEqual(unavailable);
    expect(statusAndBody(await operate(own.api.url, token, 'cancelTicket', { id: 'c' }))).toEqual(unavailable);
    expect(statusAndBody(await send(own.api.url, '/readyz', { method: 'GET' }))).toEqual(unavailable);
    expect(statusAndBody(await send(own.api.url, '/healthz', { method: 'GET' }))).toEqual({ status: 200, body: { status: 'ok' } });

    // Back on the same port, with the same data and an empty script cache.
    await own.server.restart(['--rename-command', 'SCRIPT', RENAMED_SCRIPT]);
    own.admin = directClient(own.server.url);
    await own.admin.connect();
    await waitUntil('/readyz to answer 200 after the restart', async () => {
      const reply = await send(own.api.url, '/readyz', { method: 'GET' });
      return answered(reply) && reply.status === 200;
    });
    // Ready, and still no script in the new server: the reconnection could not load them.
    expect(await own.admin.call(RENAMED_SCRIPT, 'EXISTS', ...shas)).toEqual([0, 0, 0]);

    // The same process serves again: dave joins carol, who waited through the restart.
    const dave = await call('createTicket', ticket('d', 'dave'));
    expect(statusAndBody(dave)).toMatchObject({ status: 200, body: { state: 'matched', match: { tickets: [{ input: { id: 'c' } }, { input: { id: 'd' } }] } } });
    expect(statusAndBody(await call('cancelTicket', { id: 'a' }))).toMatchObject({ status: 200, body: { state: 'matched' } });
    const listing = await listAll(own.api.url, token);

    // Each script came back through EVALSHA -> NOSCRIPT -> EVAL (which caches it).
    expect(await own.admin.call(RENAMED_SCRIPT, 'EXISTS', ...shas)).toEqual([1, 1, 1]);
    expect(infoField(await own.admin.info('errorstats'), 'errorstat_NOSCRIPT', 'count')).toBeGreaterThanOrEqual(MATCHMAKING_SCRIPTS.length);
    expect(infoField(await own.admin.info('commandstats'), 'cmdstat_eval', 'calls')).toBeGreaterThanOrEqual(MATCHMAKING_SCRIPTS.length);

    // Nothing acknowledged before the stop was lost, and every answer agrees with the final state.
    const listed = new Set((listing as Array<{ id: string }>).map((t) => t.id));
    for (const id of ['a', 'b', 'c', 'd']) expect(listed).toContain(id);
    const violations = checkInvariants(listing, observations);
    expect(violations, formatViolations(violations)).toEqual([]);
    console.info(`redis restart: ${burstAccepted} of ${burstReplies.length} admissions in flight at the stop were accepted, the rest answered 503`);
  }, 60_000);
});

describe('Redis frozen (SIGSTOP) under a running API', () => {
  const own = ownRedisSuite('Frozen');

  it('answers 503 unavailable while Redis accepts connections but answers nothing, then serves; identical retries settle the unknown outcomes', async () => {
    const token = await own.app.token();
    const a = { id: 'a', player: 'alice', queue: { key: 'duel', size: 2 as const }, payload: 1 };
    const b = { id: 'b', player: 'bob', queue: { key: 'duel', size: 2 as const }, payload: 2 };
    const observations: Observation[] = [];
    const call = async (operation: 'createTicket' | 'cancelTicket', input: { id: string }) => {
      const reply = await operate(own.api.url, token, operation, input);
      if (answered(reply) && reply.status === 200) observations.push({ operation, input, status: reply.status, body: reply.body });
      return reply;
    };
    expect(statusAndBody(await call('createTicket', a))).toMatchObject({ status: 200, body: { state: 'waiting' } });

    // Frozen: the socket stays open, so only the API's command timeout ends each request.
    own.server.pause();
    const whileFrozen = await Promise.all([
      call('createTicket', b),
      call('cancelTicket', { id: 'a' }),
      operate(own.api.url, token, 'listTickets', {}),
      send(own.api.url, '/readyz', { method: 'GET' }),
    ]);
    expect(whileFrozen.map(statusAndBody)).toEqual([unavailable, unavailable, unavailable, unavailable]);
    expect(statusAndBody(await send(own.api.url, '/healthz', { method: 'GET' }))).toEqual({ status: 200, body: { status: 'ok' } });

    own.server.resume();
    await waitUntil('/readyz to answer 200 after SIGCONT', async () => {
      const reply = await send(own.api.url, '/readyz', { method: 'GET' });
      return answered(reply) && reply.status === 200;
    });
    // The requests answered 503 reached Redis and may have run once it resumed: the spec's
    // recovery, the identical request again, returns whatever state they left.
    expect(statusAndBody(await call('createTicket', b))).toMatchObject({ status: 200 });
    const cancel = statusAndBody(await call('cancelTicket', { id: 'a' }));
    expect(cancel).toMatchObject({ status: 200 });
    expect(['matched', 'cancelled']).toContain((cancel as { body: { state: string } }).body.state);
    const violations = checkInvariants(await listAll(own.api.url, token), observations);
    expect(violations, formatViolations(violations)).toEqual([]);
  }, 60_000);
});

describe('Redis busy with another client\'s long script under a running API', () => {
  const own = ownRedisSuite('Busy');

  it('answers 503 unavailable while another client\'s script runs past the busy threshold (Redis answers BUSY), then serves', async () => {
    const token = await own.app.token();
    // A long script, as a rating tree's build or an expired burst's retirement on a deep queue
    // can be: a read-only loop of at most 3 s (SCRIPT KILL ends it sooner), past a threshold of
    // 100 ms instead of 5 s.
    await own.admin.config('SET', 'lua-time-limit', '100');
    const looper = directClient(own.server.url);
    await looper.connect();
    const loop = looper
      .eval("local s = redis.call('TIME'); repeat local t = redis.call('TIME') until (t[1] - s[1]) * 1e6 + t[2] - s[2] > 3e6; return 1", 0)
      .then(() => 'ended', (error: Error) => error.message);
    try {
      // Redis answers other clients only once the script has run past the threshold, with BUSY.
      await waitUntil('Redis to answer BUSY', async () => (await own.admin.ping().then(() => '', (error: Error) => error.message)).startsWith('BUSY'));
      const whileBusy = await Promise.all([
        operate(own.api.url, token, 'createTicket', { id: 'busy-1', player: 'carol', queue: { key: 'busy', size: 2 }, payload: 1 }),
        operate(own.api.url, token, 'listTickets', {}),
      ]);
      expect(whileBusy.map(statusAndBody)).toEqual([unavailable, unavailable]);
      await own.admin.call('SCRIPT', 'KILL');
      expect(await loop).toMatch(/killed/i);
    } finally {
      await own.admin.call('SCRIPT', 'KILL').catch(() => undefined); // when an expectation failed first
      await loop;
      await own.admin.config('SET', 'lua-time-limit', '5000');
      looper.disconnect();
    }
    // BUSY refused the admission before it ran: the same request now creates the ticket.
    expect(statusAndBody(await operate(own.api.url, token, 'createTicket', { id: 'busy-1', player: 'carol', queue: { key: 'busy', size: 2 }, payload: 1 }))).toMatchObject({
      status: 200,
      body: { id: 'busy-1', state: 'waiting' },
    });
  }, 60_000);
});
