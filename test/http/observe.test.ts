import { randomBytes, randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { pino } from 'pino';
import { register } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startServer } from '../../src/http/server.js';
import { parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { testConfig, testPrefix, type TestApp } from '../helpers/harness.js';
import { Wallet } from '../push/support/wallet.js';
import { hostCommon, LoggedServer, type LogLine, subscriptionJson } from '../security/support.js';

/**
 * Structured logs and HTTP metrics (src/http/observe.ts): a request ID on every response and
 * on every log line of its request, one access line per request, nothing secret in any line,
 * and the two metrics counted from the same completion hook.
 */

let s: LoggedServer;
let app: TestApp;

beforeAll(async () => {
  s = await LoggedServer.start();
  app = await s.registerApp({ name: 'Observed', audienceDays: 30 });
});
afterAll(async () => {
  await s.stop();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface Sent {
  status: number;
  requestId: string;
  body: string;
}

async function send(path: string, init: RequestInit = {}): Promise<Sent> {
  const response = await fetch(`${s.url}${path}`, { ...init, signal: AbortSignal.timeout(20_000) });
  const body = await response.text();
  return { status: response.status, requestId: response.headers.get('x-request-id') ?? '', body };
}

function post(path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Sent> {
  return send(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}

/** The access line of a request: written once its response finished, which may be just after the client read it. */
async function accessLine(requestId: string): Promise<LogLine> {
  return vi.waitFor(() => {
    const lines = s.log.filter((line) => line['requestId'] === requestId && line.msg === 'request');
    if (lines.length === 0) throw new Error(`no access line for ${requestId}`);
    return lines[0]!;
  });
}

/** Sends requests one at a time and returns, for each, the log lines written while it was handled. */
async function linesOf(requests: Array<() => Promise<Sent>>): Promise<Array<{ sent: Sent; lines: LogLine[] }>> {
  const out: Array<{ sent: Sent; lines: LogLine[] }> = [];
  for (const request of requests) {
    const mark = s.log.length;
    const sent = await request();
    const access = await accessLine(sent.requestId);
    out.push({ sent, lines: s.log.slice(mark, s.log.indexOf(access) + 1) });
  }
  return out;
}

describe('request IDs', () => {
  it('echoes a safe X-Request-Id and replaces anything else with a fresh UUID, on every kind of response', async () => {
    const token = `Bearer ${await app.token()}`;
    const kept = 'edge-7f3a:42_B.x';
    const cases: Array<{ request: (id?: string) => Promise<Sent>; status: number }> = [
      { request: (id) => send('/healthz', { headers: id ? { 'x-request-id': id } : {} }), status: 200 },
      { request: (id) => send('/no/such/route', { headers: id ? { 'x-request-id': id } : {} }), status: 404 },
      { request: (id) => post('/api/matchmaking', '{"operation":"listTickets"}', id ? { 'x-request-id': id } : {}), status: 401 },
      { request: (id) => post('/api/matchmaking', Buffer.alloc(70 * 1024, 0x20), { authorization: token, ...(id ? { 'x-request-id': id } : {}) }), status: 413 },
      { request: (id) => post('/api/matchmaking', '{"operation":"nope"}', { authorization: token, ...(id ? { 'x-request-id': id } : {}) }), status: 400 },
      { request: (id) => post('/api/matchmaking', '{"operation":"listTickets"}', { authorization: token, ...(id ? { 'x-request-id': id } : {}) }), status: 200 },
      { request: (id) => post('/api/host/visits', '{}', id ? { 'x-request-id': id } : {}), status: 400 },
    ];
    const refused = ['', 'x'.repeat(129), 'has space', 'semi;colon', 'caf\u00e9', 'a,b'];
    for (const { request, status } of cases) {
      const withKept = await request(kept);
      expect(withKept.status).toBe(status);
      expect(withKept.requestId).toBe(kept);
      const none = await request();
      expect(none.status).toBe(status);
      expect(none.requestId).toMatch(UUID);
      for (const bad of refused) {
        const sent = await request(bad === 'caf\u00e9' ? Buffer.from(bad).toString('latin1') : bad);
        expect(sent.requestId, JSON.stringify(bad)).toMatch(UUID);
      }
    }
    // Two requests never share a generated ID.
    const a = await send('/healthz');
    const b = await send('/healthz');
    expect(a.requestId).not.toBe(b.requestId);
    // The longest accepted ID is 128 characters.
    expect((await send('/healthz', { headers: { 'x-request-id': 'y'.repeat(128) } })).requestId).toBe('y'.repeat(128));
  });

  it('goes on every line of its request, error lines included, and on the worker face too', async () => {
    const down = testConfig(testPrefix(), { REDIS_URL: 'redis://127.0.0.1:1' });
    const log: LogLine[] = [];
    const logger = pino({ level: 'trace' }, { write: (line: string) => void log.push(JSON.parse(line) as LogLine) });
    const api = await startServer(down, { port: 0, host: '127.0.0.1', logger });
    try {
      const response = await fetch(`${api.url}/api/matchmaking`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await app.token()}`, 'x-request-id': 'down-1' },
        body: '{"operation":"listTickets"}',
        signal: AbortSignal.timeout(20_000),
      });
      expect(response.status).toBe(503);
      expect(response.headers.get('x-request-id')).toBe('down-1');
      const failed = await vi.waitFor(() => {
        const line = log.find((l) => l.msg === 'request failed');
        if (!line) throw new Error('no error line yet');
        return line;
      });
      expect(failed['requestId']).toBe('down-1');
      expect(failed['code']).toBe('unavailable');
      await vi.waitFor(() => expect(log.some((l) => l.msg === 'request' && l['requestId'] === 'down-1' && l['status'] === 503)).toBe(true));
    } finally {
      await api.close();
    }
    // Lines written outside any request carry no request ID.
    expect(log.find((l) => l.msg === 'versus listening')).not.toHaveProperty('requestId');

    const workerLog: LogLine[] = [];
    const workerLogger = pino({ level: 'trace' }, { write: (line: string) => void workerLog.push(JSON.parse(line) as LogLine) });
    const worker = await startServer(testConfig(testPrefix()), { port: 0, host: '127.0.0.1', logger: workerLogger, role: 'worker' });
    try {
      for (const [path, status] of [['/healthz', 200], ['/readyz', 200], ['/api/matchmaking', 404]] as const) {
        const response = await fetch(`${worker.url}${path}`, { headers: { 'x-request-id': `w-${status}` }, signal: AbortSignal.timeout(20_000) });
        expect(response.status).toBe(status);
        expect(response.headers.get('x-request-id')).toBe(`w-${status}`);
        await vi.waitFor(() => expect(workerLog.some((l) => l.msg === 'request' && l['requestId'] === `w-${status}`)).toBe(true));
      }
      const fresh = await fetch(`${worker.url}/healthz`, { headers: { 'x-request-id': 'bad id' }, signal: AbortSignal.timeout(20_000) });
      expect(fresh.headers.get('x-request-id')).toMatch(UUID);
    } finally {
      await worker.close();
    }
  });
});

describe('access lines', () => {
  it('one per request at completion: id, method, route pattern, operation, app, code, status, duration', async () => {
    const input = { id: `t-${randomUUID()}`, player: 'p1', queue: { key: 'q', size: 2 }, payload: { seed: 1 } };
    const [unauthenticated, created, conflict, unknownOp, notFound, health] = await linesOf([
      () => post('/api/matchmaking', JSON.stringify({ operation: 'createTicket', input }), { authorization: 'Bearer' }),
      async () => post('/api/matchmaking', JSON.stringify({ operation: 'createTicket', input }), { authorization: `Bearer ${await app.token()}` }),
      async () => post('/api/matchmaking', JSON.stringify({ operation: 'createTicket', input: { ...input, payload: { seed: 2 } } }), { authorization: `Bearer ${await app.token()}` }),
      async () => post('/api/matchmaking', JSON.stringify({ operation: 'dropTables' }), { authorization: `Bearer ${await app.token()}` }),
      () => send('/api/matchmaking/tickets/42'),
      () => send('/healthz', { method: 'HEAD' }),
    ]);
    const access = (entry: { lines: LogLine[] }) => entry.lines.filter((l) => l.msg === 'request');
    for (const entry of [unauthenticated, created, conflict, unknownOp, notFound, health]) expect(access(entry!)).toHaveLength(1);
    // An empty bearer: unauthenticated before the body is read, so no app and no operation.
    expect(access(unauthenticated!)[0]).toMatchObject({ method: 'POST', route: '/api/matchmaking', operation: 'other', code: 'unauthenticated', status: 401 });
    expect(access(unauthenticated!)[0]).not.toHaveProperty('app');

    expect(created!.sent.status).toBe(200);
    const line = access(created!)[0]!;
    expect(Object.keys(line).filter((k) => !['level', 'time', 'pid', 'hostname', 'msg'].includes(k)).sort()).toEqual(
      ['app', 'code', 'durationMs', 'method', 'operation', 'requestId', 'route', 'status'].sort(),
    );
    expect(line).toMatchObject({ level: 30, requestId: created!.sent.requestId, method: 'POST', route: '/api/matchmaking', operation: 'createTicket', app: app.origin, code: 'ok', status: 200 });
    expect(typeof line['durationMs']).toBe('number');
    expect(line['durationMs'] as number).toBeGreaterThanOrEqual(0);

    expect(access(conflict!)[0]).toMatchObject({ operation: 'createTicket', app: app.origin, code: 'ticket_conflict', status: 409 });
    expect(access(unknownOp!)[0]).toMatchObject({ operation: 'other', app: app.origin, code: 'invalid_argument', status: 400 });
    expect(access(notFound!)[0]).toMatchObject({ method: 'GET', route: null, operation: 'other', code: 'not_found', status: 404 });
    expect(access(health!)[0]).toMatchObject({ method: 'HEAD', route: '/healthz', operation: 'health', code: 'ok', status: 200 });
  });

  it('names the push and host operations and the app of a send', async () => {
    const wallet = new Wallet();
    const visit = JSON.stringify({ ...hostCommon(wallet), origin: app.origin });
    const [visited, pushed, broadcast, refused] = await linesOf([
      () => post('/api/host/visits', visit, { 'x-wallet-signature': wallet.signBytes(visit) }),
      async () => post('/api/push', JSON.stringify({ to: wallet.address, title: 't', body: 'b' }), { authorization: `Bearer ${await app.token()}` }),
      async () => post('/api/push/broadcast', JSON.stringify({ title: 't', body: 'b' }), { authorization: `Bearer ${await app.token()}` }),
      async () => post('/api/push', JSON.stringify({ to: wallet.address, title: ' ', body: 'b' }), { authorization: `Bearer ${await app.token()}` }),
    ]);
    const access = (entry: { lines: LogLine[] }) => entry.lines.find((l) => l.msg === 'request');
    expect(access(visited!)).toMatchObject({ route: '/api/host/visits', operation: 'hostVisit', code: 'ok', status: 204 });
    expect(access(visited!)).not.toHaveProperty('app');
    expect(access(pushed!)).toMatchObject({ route: '/api/push', operation: 'notifyUser', app: app.origin, code: 'ok', status: 202 });
    expect(access(broadcast!)).toMatchObject({ route: '/api/push/broadcast', operation: 'notifyAudience', app: app.origin, code: 'ok', status: 202 });
    expect(access(refused!)).toMatchObject({ route: '/api/push', operation: 'notifyUser', app: app.origin, code: 'invalid_title', status: 400 });
  });
});

describe('what is never logged', () => {
  it('no token, key, payload, body, endpoint, subscription or signature appears in any line; every line of a request has its ID', async () => {
    const marker = `SECRET${randomBytes(6).toString('hex')}`;
    const token = await app.token();
    const wallet = new Wallet();
    const subscription = subscriptionJson();
    subscription.endpoint = `${subscription.endpoint}/${marker}endpoint`;
    const subscribeBody = JSON.stringify({ ...hostCommon(wallet), subscription });
    const subscribeSignature = wallet.signBytes(subscribeBody);
    const visitBody = JSON.stringify({ ...hostCommon(wallet), origin: app.origin });
    const badSignature = `${marker}sig`;
    const pair = parseSecretKey(app.secretKey)!;
    const now = Math.floor(Date.now() / 1000);
    const legacy = await new SignJWT({ iss: app.origin, aud: 'service-push', iat: now, exp: now + 60, sub: wallet.address, title: `${marker}legacy`, body: 'b' })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'service-push+jwt' })
      .sign(privateKeyObject(pair));
    const forged = `eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ4In0.${marker}`;
    const ticket = { id: `t-${randomUUID()}`, player: `${marker}player`, queue: { key: `${marker}queue`, size: 2 }, payload: { secret: `${marker}payload` } };
    const idempotencyKey = `${marker}idem`;

    const mm = (body: unknown, auth = token) => post('/api/matchmaking', JSON.stringify(body), { authorization: `Bearer ${auth}` });
    const requests: Array<() => Promise<Sent>> = [
      () => mm({ operation: 'createTicket', input: ticket }),
      () => mm({ operation: 'createTicket', input: { ...ticket, payload: { secret: `${marker}payload2` } } }),
      () => mm({ operation: 'createTicket', input: { ...ticket, [`${marker}member`]: 1 } }),
      () => mm({ operation: 'listTickets', input: { player: ticket.player } }),
      () => mm({ operation: 'listTickets' }, forged),
      () => post('/api/matchmaking', `{"operation":"createTicket","input":${JSON.stringify(ticket)}`, { authorization: `Bearer ${token}` }),
      () => post('/api/matchmaking', Buffer.alloc(70 * 1024, 'A'), { authorization: `Bearer ${token}`, 'x-note': marker }),
      () => post('/api/host/subscriptions', subscribeBody, { 'x-wallet-signature': subscribeSignature }),
      () => post('/api/host/subscriptions', subscribeBody, { 'x-wallet-signature': badSignature }),
      () => post('/api/host/visits', visitBody, { 'x-wallet-signature': wallet.signBytes(visitBody) }),
      () => post('/api/push', JSON.stringify({ to: wallet.address, title: `${marker}title`, body: `${marker}body`, path: `/${marker}path` }), { authorization: `Bearer ${token}`, 'idempotency-key': idempotencyKey }),
      () => post('/api/push', JSON.stringify({ to: wallet.address, title: `${marker}title`, body: `${marker}other` }), { authorization: `Bearer ${token}`, 'idempotency-key': idempotencyKey }),
      () => post('/api/push', JSON.stringify({ to: wallet.address, title: 'x'.repeat(121) + marker, body: 'b' }), { authorization: `Bearer ${token}` }),
      () => post('/api/push', JSON.stringify({ to: wallet.address, title: 't', body: 'b', [`${marker}extra`]: 1 }), { authorization: `Bearer ${token}` }),
      () => post('/api/push', legacy, { 'content-type': 'application/jwt' }),
      () => post('/api/push/broadcast', legacy, { 'content-type': 'application/jwt' }),
      () => post('/api/host/subscriptions/remove', JSON.stringify({ ...hostCommon(wallet), endpoint: subscription.endpoint }), { 'x-wallet-signature': badSignature }),
    ];
    const statuses: number[] = [];
    const mark = s.log.length;
    for (const entry of await linesOf(requests)) {
      statuses.push(entry.sent.status);
      expect(entry.lines.length, 'at least the access line').toBeGreaterThan(0);
      for (const line of entry.lines) expect(line['requestId'], JSON.stringify(line)).toBe(entry.sent.requestId);
    }
    // The requests reached the checks they were meant for (accepted, conflicts, refusals).
    expect(statuses).toEqual([200, 409, 400, 200, 401, 400, 413, 204, 401, 204, 202, 400, 400, 400, 202, 403, 401]);

    const secrets = [
      marker,
      token,
      token.split('.')[2]!,
      legacy,
      legacy.split('.')[2]!,
      forged,
      subscribeSignature,
      subscription.endpoint,
      subscription.keys.p256dh,
      subscription.keys.auth,
      app.secretKey,
      wallet.signBytes(visitBody),
      wallet.address,
    ];
    const written = s.log.slice(mark).map((line) => JSON.stringify(line));
    expect(written.length).toBeGreaterThanOrEqual(requests.length);
    for (const text of written) {
      for (const secret of secrets) expect(text.includes(secret), `log line leaks ${secret.slice(0, 24)}…: ${text}`).toBe(false);
      expect(text.toLowerCase()).not.toContain('authorization');
    }
  });
});

describe('HTTP metrics', () => {
  async function counts(): Promise<Map<string, number>> {
    const metric = register.getSingleMetric('versus_http_requests_total');
    const out = new Map<string, number>();
    for (const value of (await metric!.get()).values) {
      out.set(`${value.labels['route']} ${value.labels['operation']} ${value.labels['code']}`, value.value);
    }
    return out;
  }

  async function histogramCount(labels: string): Promise<number> {
    const metric = register.getSingleMetric('versus_http_request_duration_seconds');
    const value = (await metric!.get()).values.find(
      (v) => (v as { metricName?: string }).metricName === 'versus_http_request_duration_seconds_count' && `${v.labels['route']} ${v.labels['operation']} ${v.labels['code']}` === labels,
    );
    return value?.value ?? 0;
  }

  it('counts every request by route pattern, operation and code, with bounded label values', async () => {
    const input = { id: `t-${randomUUID()}`, player: 'p', queue: { key: 'q2', size: 2 }, payload: null };
    const created = '/api/matchmaking createTicket ok';
    const conflict = '/api/matchmaking createTicket ticket_conflict';
    const unknown = 'unmatched other not_found';
    const before = await counts();
    const beforeCreated = await histogramCount(created);
    const sent: Sent[] = [];
    sent.push(await post('/api/matchmaking', JSON.stringify({ operation: 'createTicket', input }), { authorization: `Bearer ${await app.token()}` }));
    sent.push(await post('/api/matchmaking', JSON.stringify({ operation: 'createTicket', input }), { authorization: `Bearer ${await app.token()}` }));
    sent.push(await post('/api/matchmaking', JSON.stringify({ operation: 'createTicket', input: { ...input, payload: 1 } }), { authorization: `Bearer ${await app.token()}` }));
    sent.push(await send(`/random/${randomUUID()}`));
    sent.push(await send(`/random/${randomUUID()}`));
    sent.push(await post('/api/matchmaking', JSON.stringify({ operation: `op-${randomUUID()}` }), { authorization: `Bearer ${await app.token()}` }));
    for (const request of sent) await accessLine(request.requestId);
    const after = await counts();
    const delta = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
    expect(delta(created)).toBe(2);
    expect(delta(conflict)).toBe(1);
    expect(delta(unknown)).toBe(2);
    expect(delta('/api/matchmaking other invalid_argument')).toBe(1);
    expect((await histogramCount(created)) - beforeCreated).toBe(2);

    // Label values come from fixed sets: route patterns, operation names, result codes.
    const { ROUTE_OPERATIONS, MATCHMAKING_OPERATIONS } = await import('../../src/http/observe.js');
    const routes = new Set([...Object.keys(ROUTE_OPERATIONS).map((key) => key.split(' ')[1]), '/api/matchmaking', 'unmatched']);
    const operations = new Set([...Object.values(ROUTE_OPERATIONS), ...MATCHMAKING_OPERATIONS, 'other']);
    for (const key of after.keys()) {
      const [route, operation, code] = key.split(' ');
      expect(routes.has(route!), key).toBe(true);
      expect(operations.has(operation!), key).toBe(true);
      expect(code, key).toMatch(/^[a-z_]+$/);
    }
  });
});
