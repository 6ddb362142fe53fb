import { randomUUID } from 'node:crypto';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { SignJWT } from 'jose';
import webpush from 'web-push';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/http/app.js';
import { type ApiError } from '../../src/http/errors.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { startServer, type RunningServer } from '../../src/http/server.js';
import { createWorkerApp } from '../../src/push/worker-app.js';
import { hostMuteSchema, hostSubscribeSchema, hostUnsubscribeSchema, hostVisitSchema } from '../../src/push/host.js';
import {
  checkPath,
  idempotencyKeySchema,
  isIdempotencyKey,
  isWalletAddress,
  notificationPathSchema,
  notifyAudienceSchema,
  notifyUserSchema,
  subscriptionSchema,
  validateFields,
  validateSubscription,
  walletAddressSchema,
} from '../../src/push/validation.js';
import { generateKeyPair, parseSecretKey, privateKeyObject } from '../../src/shared/ed25519.js';
import { Harness, signToken, testConfig, testPrefix, type TestApp } from '../helpers/harness.js';
import { Wallet } from '../push/support/wallet.js';
import { hostCommon, LoggedServer, PUSH_HOST, subscriptionJson } from '../security/support.js';

/**
 * GET /openapi.json (src/http/openapi.ts): a valid OpenAPI 3.1 document (checked with
 * @seriousme/openapi-schema-validator against the official 3.1 schema), naming every route the
 * express apps register, whose request schemas agree with the server's checks and whose every
 * documented response the real server produces, each body validated against its schema (ajv,
 * JSON Schema 2020-12 as OpenAPI 3.1 uses it).
 */

const doc = openApiDocument as any;

/** ajv for the document's schemas: 2020-12, with the document's extension keyword x-maxUtf8Bytes. */
function documentAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
  ajv.addKeyword({
    keyword: 'x-maxUtf8Bytes',
    type: 'string',
    schemaType: 'number',
    validate: (max: number, data: string) => Buffer.byteLength(data, 'utf8') <= max,
  });
  // The document's component schemas, addressable as https://versus.invalid/components#/$defs/<name>.
  ajv.addSchema(relocate({ $id: 'https://versus.invalid/components', $defs: doc.components.schemas }));
  return ajv;
}

/** A schema taken from the document, its `#/components/schemas/` references pointed at https://versus.invalid/components. */
function relocate(schema: unknown): any {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"https://versus.invalid/components#/$defs/'));
}

const ajv = documentAjv();
const compiled = new Map<string, ValidateFunction>();
function validatorOf(key: string, schema: unknown): ValidateFunction {
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(relocate(schema));
    compiled.set(key, validate);
  }
  return validate;
}

interface Reply {
  status: number;
  text: string;
  json: any;
  contentType: string;
  requestId: string | null;
}

async function exchange(base: string, method: string, path: string, options: { headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<Reply> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
    ...(options.body !== undefined ? { body: options.body } : {}),
    signal: AbortSignal.timeout(20_000), // a guard against a hang, not a speed assertion
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json, contentType: response.headers.get('content-type') ?? '', requestId: response.headers.get('x-request-id') };
}

/** Every (method path status [code]) the real server produced, checked against the document. */
const produced = new Set<string>();

/** Checks a reply against the document's response for its status and records it. */
function documented(method: string, path: string, reply: Reply): Reply {
  const operation = doc.paths[path]?.[method.toLowerCase()];
  expect(operation, `${method} ${path} is documented`).toBeDefined();
  const response = operation.responses[String(reply.status)];
  expect(response, `${method} ${path} answered ${reply.status} ${reply.text.slice(0, 200)}, which is not documented`).toBeDefined();
  expect(reply.requestId, 'X-Request-Id').toMatch(new RegExp(doc.components.headers.RequestId.schema.pattern));
  if (response.content) {
    const mediaType = Object.keys(response.content)[0]!;
    expect(reply.contentType.split(';')[0]).toBe(mediaType);
    const body = mediaType === 'application/json' ? reply.json : reply.text;
    expect(body, 'a body').toBeDefined();
    const validate = validatorOf(`${method} ${path} ${reply.status}`, response.content[mediaType].schema);
    expect(validate(body), `${method} ${path} ${reply.status}: ${ajv.errorsText(validate.errors)}: ${reply.text.slice(0, 300)}`).toBe(true);
  } else {
    expect(reply.text).toBe('');
  }
  produced.add(`${method} ${path} ${reply.status}${reply.json?.error ? ` ${reply.json.error}` : ''}`);
  return reply;
}

/** Everything the document promises: one entry per response, and per error code of a refusal. */
function promised(): Set<string> {
  const out = new Set<string>();
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        const codes: string[] | undefined = response.content?.['application/json']?.schema?.properties?.error?.enum;
        const key = `${method.toUpperCase()} ${path} ${status}`;
        if (codes) for (const code of codes) out.add(`${key} ${code}`);
        else out.add(key);
      }
    }
  }
  return out;
}

/** The Redis-less server's metrics token (the other servers leave /metrics open). */
const METRICS_TOKEN = `metrics-${randomUUID()}`;

let s: LoggedServer;
let down: RunningServer;
let plain: Harness;
let app: TestApp;

beforeAll(async () => {
  s = await LoggedServer.start();
  app = await s.registerApp({ name: 'Documented', audienceDays: 30 });
  const vapid = webpush.generateVAPIDKeys();
  down = await startServer(testConfig(testPrefix(), { REDIS_URL: 'redis://127.0.0.1:1', VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey, PUSH_ENDPOINT_HOSTS: PUSH_HOST, METRICS_TOKEN: METRICS_TOKEN }), { port: 0, host: '127.0.0.1' });
  plain = await Harness.start();
});
afterAll(async () => {
  await s?.stop();
  await down?.close();
  await plain?.stop();
});

describe('the document', () => {
  it('is served at /openapi.json and is a valid OpenAPI 3.1 document', async () => {
    const reply = documented('GET', '/openapi.json', await exchange(s.url, 'GET', '/openapi.json'));
    expect(reply.json).toEqual(JSON.parse(JSON.stringify(openApiDocument)));
    const validator = new Validator();
    const result = await validator.validate(structuredClone(reply.json));
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    // The checker is not a rubber stamp: a document with a response missing its description fails.
    const broken = structuredClone(reply.json);
    delete broken.paths['/healthz'].get.responses['200'].description;
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it('names every route the API and worker apps register, and no other', () => {
    const routesOf = (router: any): string[] => {
      const out: string[] = [];
      for (const layer of router.stack) {
        if (layer.route) for (const method of Object.keys(layer.route.methods)) out.push(`${method.toUpperCase()} ${layer.route.path}`);
        else if (layer.handle?.stack) out.push(...routesOf(layer.handle));
      }
      return out;
    };
    const api = routesOf((createApp(s.server.services) as any).router);
    const worker = routesOf((createWorkerApp(s.server.services) as any).router);
    const inDocument = Object.entries<any>(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
    expect(api.length).toBeGreaterThan(5);
    for (const route of [...api, ...worker]) expect(inDocument, `${route} is registered but not documented`).toContain(route);
    for (const route of inDocument) expect(api, `${route} is documented but not served`).toContain(route);
  });

  it('publishes the schemas the server validates with', async () => {
    const { envelopeSchema, ticketInputSchema, ticketQuerySchema, cancelSchema } = await import('../../src/matchmaking/validation.js');
    expect(doc.components.schemas.MatchmakingRequest.allOf[0]).toBe(envelopeSchema);
    expect(doc.components.schemas.TicketInput).toMatchObject(ticketInputSchema);
    expect(doc.components.schemas.TicketQuery).toMatchObject(ticketQuerySchema);
    expect(doc.components.schemas.CancelInput).toMatchObject(cancelSchema);
    expect(doc.components.schemas.NotifyUser).toBe(notifyUserSchema);
    expect(doc.components.schemas.HostSubscribe).toBe(hostSubscribeSchema);
  });
});

/** Whether a check accepts a value (ApiError: refused). */
function accepts(check: () => unknown): boolean {
  try {
    check();
    return true;
  } catch (error) {
    if ((error as ApiError).code === undefined) throw error;
    return false;
  }
}

describe('hand-written checks and their published schemas agree', () => {
  const wallet = new Wallet().address;
  const schemaOf = (schema: unknown) => validatorOf(`schema ${JSON.stringify(schema)}`, schema);

  /** `both`: values both accept or both refuse; `checkOnly`: refused by the check beyond what the schema can say. */
  function agree(name: string, schema: unknown, check: (value: unknown) => boolean, both: unknown[], checkOnly: unknown[] = []) {
    const validate = schemaOf(schema);
    let accepted = 0;
    let refused = 0;
    for (const value of both) {
      const verdict = check(value);
      verdict ? accepted++ : refused++;
      expect(validate(value), `${name}: schema and check disagree on ${JSON.stringify(value)?.slice(0, 120)}`).toBe(verdict);
    }
    for (const value of checkOnly) {
      expect(check(value), `${name}: check refuses ${JSON.stringify(value)}`).toBe(false);
      expect(validate(value), `${name}: schema accepts ${JSON.stringify(value)}`).toBe(true);
    }
    // Each list exercises both answers.
    expect(accepted, `${name}: accepted examples`).toBeGreaterThan(0);
    expect(refused, `${name}: refused examples`).toBeGreaterThan(0);
  }

  it('wallet addresses, paths and Idempotency-Key', () => {
    const short = '1'.repeat(32); // base58 of 32 zero bytes is 32 "1"s
    agree('wallet', walletAddressSchema, isWalletAddress, [wallet, short, '', 'abc', `${wallet}0`, 'O'.repeat(40), 'x'.repeat(45), 42, null], ['z'.repeat(44), `1${'2'.repeat(31)}`]);
    agree('path', notificationPathSchema, (v) => accepts(() => checkPath(v)), [
      '/', '/a/b?c=d&e', '/caf\u00e9', `/${'a'.repeat(2047)}`, `/${'a'.repeat(2048)}`, `/${'\u00e9'.repeat(1023)}`, `/${'\u00e9'.repeat(1024)}`,
      '//evil', 'rel', '', '/a#b', '/a\\b', '/a\nb', '/\u0085', '/\u007f', 5,
    ]);
    agree('Idempotency-Key', idempotencyKeySchema, isIdempotencyKey, ['k', '~!', 'x'.repeat(255), '', 'x'.repeat(256), 'a b', 'caf\u00e9', 'tab\t']);
  });

  it('notification bodies (validateFields)', () => {
    const ok = { to: wallet, title: 'Hi', body: 'There' };
    const examples = [
      ok,
      { ...ok, path: '/r/1' },
      { ...ok, title: '  padded \n' },
      { ...ok, title: 'x'.repeat(120) },
      { ...ok, title: ` ${'x'.repeat(120)}\t` },
      { ...ok, title: '\u{1F600}'.repeat(120) },
      { ...ok, title: '\u{1F600}'.repeat(121) },
      { ...ok, title: 'x'.repeat(121) },
      { ...ok, title: '   ' },
      { ...ok, title: '\u00a0\u2028' },
      { ...ok, title: 7 },
      { ...ok, body: 'y'.repeat(1000) },
      { ...ok, body: 'y'.repeat(1001) },
      { ...ok, body: '' },
      { ...ok, path: '//x' },
      { ...ok, extra: 1 },
      { title: 'Hi', body: 'There' },
      { ...ok, to: 'nobody' },
      [ok],
      'text',
      null,
    ];
    agree('notifyUser', notifyUserSchema, (v) => accepts(() => validateFields(v, true)), examples, [{ ...ok, to: 'z'.repeat(44) }]);
    const audience = examples.map((e) => (e && typeof e === 'object' && !Array.isArray(e) && 'to' in e ? (({ to: _to, ...rest }) => rest)(e as Record<string, unknown>) : e));
    agree('notifyAudience', notifyAudienceSchema, (v) => accepts(() => validateFields(v, false)), [...audience, { ...ok }]);
  });

  it('push subscriptions (validateSubscription)', () => {
    const good = subscriptionJson();
    const examples = [
      good,
      { ...good, expirationTime: null },
      { ...good, expirationTime: 1700000000000 },
      { ...good, keys: { ...good.keys, p256dh: `${good.keys.p256dh}=` } },
      { ...good, expirationTime: 'soon' },
      { ...good, extra: true },
      { endpoint: good.endpoint },
      { ...good, endpoint: good.endpoint.replace('https:', 'http:') },
      { ...good, endpoint: '' },
      { ...good, keys: { ...good.keys, auth: good.keys.auth.slice(1) } },
      { ...good, keys: { ...good.keys, p256dh: good.keys.p256dh.slice(1) } },
      { ...good, keys: { ...good.keys, p256dh: `A${good.keys.p256dh.slice(1)}` } },
      { ...good, keys: { ...good.keys, more: 'x' } },
      { ...good, keys: { p256dh: good.keys.p256dh } },
      'https://x',
      null,
    ];
    const check = (v: unknown) => accepts(() => validateSubscription(v, [PUSH_HOST]));
    const offCurve = `B${'A'.repeat(86)}`;
    agree('subscription', subscriptionSchema, check, examples, [
      { ...good, endpoint: 'https://elsewhere.example/push' },
      { ...good, endpoint: `https://user:pw@${PUSH_HOST}/x` },
      { ...good, keys: { ...good.keys, p256dh: offCurve } },
    ]);
  });

  it('host bodies, sent signed to the real server: the schema accepts exactly what is not refused with 400 or 401', async () => {
    const unknownOrigin = `https://nobody-${randomUUID().slice(0, 8)}.example`;
    const cases: Array<{ path: string; schema: unknown; members: Array<Record<string, unknown>>; checkOnly?: Array<Record<string, unknown>> }> = [
      {
        path: '/api/host/visits',
        schema: hostVisitSchema,
        members: [{ origin: app.origin }, { origin: unknownOrigin }, { origin: `${app.origin}/` }, { origin: 'ftp://x.example' }, { origin: 'https://UPPER.example' }, { origin: 5 }, {}, { origin: app.origin, extra: 1 }],
        checkOnly: [{ origin: 'https://a.example:443' }, { origin: 'https://exa mple.com' }],
      },
      { path: '/api/host/mutes', schema: hostMuteSchema, members: [{ origin: app.origin, muted: true }, { origin: app.origin, muted: 'yes' }, { origin: app.origin }] },
      {
        path: '/api/host/subscriptions/remove',
        schema: hostUnsubscribeSchema,
        members: [{ endpoint: `https://${PUSH_HOST}/gone` }, { endpoint: '' }, { endpoint: 'x'.repeat(2049) }, { endpoint: 3 }],
      },
      {
        path: '/api/host/subscriptions',
        schema: hostSubscribeSchema,
        members: [{ subscription: subscriptionJson() }, { subscription: { endpoint: 'https://x' } }, { subscription: 'x' }],
        checkOnly: [{ subscription: { ...subscriptionJson(), endpoint: 'https://not-allowed.example/p' } }],
      },
    ];
    const wallet = new Wallet();
    const common: Array<(body: Record<string, unknown>) => Record<string, unknown>> = [
      (b) => b,
      (b) => ({ ...b, aud: 'someone-else' }),
      (b) => ({ ...b, nonce: 'short' }),
      (b) => ({ ...b, signedAt: `${b['signedAt']}` }),
      (b) => ({ ...b, signedAt: (b['signedAt'] as number) + 0.5 }),
      (b) => ({ ...b, wallet: 'not-a-wallet' }),
      (b) => (({ nonce: _n, ...rest }) => rest)(b),
    ];
    for (const { path, schema, members, checkOnly = [] } of cases) {
      const validate = validatorOf(`host ${path}`, schema);
      const variants = [...members.map((m) => ({ ...hostCommon(wallet), ...m })), ...common.map((change) => change({ ...hostCommon(wallet), ...members[0]! }))];
      for (const body of variants) {
        const text = JSON.stringify(body);
        const reply = await exchange(s.url, 'POST', path, { body: text, headers: { 'x-wallet-signature': wallet.signBytes(text) } });
        const served = reply.status !== 400 && reply.status !== 401;
        expect(validate(body), `${path}: server answered ${reply.status} ${reply.text} to ${text.slice(0, 200)}`).toBe(served);
      }
      for (const m of checkOnly) {
        const body = { ...hostCommon(wallet), ...m };
        const text = JSON.stringify(body);
        const reply = await exchange(s.url, 'POST', path, { body: text, headers: { 'x-wallet-signature': wallet.signBytes(text) } });
        expect(reply.status, text).toBe(400);
        expect(validate(body), text).toBe(true);
      }
    }
  });
});

describe('the real server produces every documented response, each matching its schema', () => {
  const mm = (base: string, token: string | null, body: string | Buffer) =>
    exchange(base, 'POST', '/api/matchmaking', { body, headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const send = (base: string, path: string, token: string | null, body: unknown, headers: Record<string, string> = {}) =>
    exchange(base, 'POST', path, { body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body), headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers } });
  const big = Buffer.alloc(70 * 1024, 0x20);

  async function legacy(origin: string, secretKey: string, typ: string, claims: Record<string, unknown>): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: origin, aud: 'service-push', iat: now, exp: now + 60, ...claims })
      .setProtectedHeader({ alg: 'EdDSA', typ })
      .sign(privateKeyObject(parseSecretKey(secretKey)!));
  }

  it('matchmaking: each operation, each refusal', async () => {
    const M = (reply: Reply) => documented('POST', '/api/matchmaking', reply);
    const token = await app.token();
    const queueKey = `q-${randomUUID()}`;
    const input = (id: string, player: string, extra: Record<string, unknown> = {}) => ({ id, player, queue: { key: queueKey, size: 2 }, payload: { seed: 1 }, ...extra });
    const results = doc.paths['/api/matchmaking'].post['x-operation-results'] as Record<string, string>;
    const asResult = (operation: string, reply: Reply) => {
      const validate = validatorOf(`result ${operation}`, { $ref: results[operation] });
      expect(validate(reply.json), `${operation}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    };
    const a = `a-${randomUUID()}`;
    const b = `b-${randomUUID()}`;
    const waiting = M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket', input: input(a, 'alice') })));
    expect(waiting.json.state).toBe('waiting');
    asResult('createTicket', waiting);
    const matched = M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket', input: input(b, 'bob') })));
    expect(matched.json.state).toBe('matched');
    asResult('createTicket', matched);
    const expired = M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket', input: input(`c-${randomUUID()}`, 'carol', { expiresAt: 1 }) })));
    expect(expired.json.state).toBe('cancelled');
    const page = M(await mm(s.url, token, JSON.stringify({ operation: 'listTickets' })));
    expect(page.json.tickets.length).toBeGreaterThan(2);
    asResult('listTickets', page);
    const rated = `r-${randomUUID()}`;
    M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket', input: { ...input(rated, 'dave'), queue: { key: `rq-${rated}`, size: 2, rating: { initial: 10, widenPerSecond: 1, max: 50 } }, rating: 1500 } })));
    const cancelled = M(await mm(s.url, token, JSON.stringify({ operation: 'cancelTicket', input: { id: rated } })));
    expect(cancelled.json.state).toBe('cancelled');
    asResult('cancelTicket', cancelled);
    const cancelMatched = M(await mm(s.url, token, JSON.stringify({ operation: 'cancelTicket', input: { id: a } })));
    expect(cancelMatched.json.state).toBe('matched');
    asResult('cancelTicket', cancelMatched);
    const tombstone = M(await mm(s.url, token, JSON.stringify({ operation: 'cancelTicket', input: { id: `never-${randomUUID()}` } })));
    expect(tombstone.json.admission).toBeNull();
    asResult('cancelTicket', tombstone);

    M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket' })));
    M(await mm(s.url, null, '{"operation":"listTickets"}'));
    const stranger = generateKeyPair();
    M(await mm(s.url, await signToken(stranger.secretKey, 'https://stranger.example'), '{"operation":"listTickets"}'));
    M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket', input: input(a, 'alice', { payload: 2 }) })));
    M(await mm(s.url, token, JSON.stringify({ operation: 'createTicket', input: { ...input(`q-${randomUUID()}`, 'erin'), queue: { key: `rq-${rated}`, size: 2 } } })));
    M(await mm(s.url, token, big));
    const limited = await s.registerApp({ limits: { admissions: { count: 1, periodMs: 3_600_000, burst: 1 }, notifications: null } });
    const limitedToken = await limited.token();
    expect(M(await mm(s.url, limitedToken, JSON.stringify({ operation: 'createTicket', input: input(`l-${randomUUID()}`, 'p') }))).status).toBe(200);
    expect(M(await mm(s.url, limitedToken, JSON.stringify({ operation: 'createTicket', input: input(`l-${randomUUID()}`, 'p') }))).status).toBe(429);
    M(await mm(down.url, token, '{"operation":"listTickets"}'));
  });

  it('notifications: accepted, and each refusal', async () => {
    const token = await app.token();
    const U = (reply: Reply) => documented('POST', '/api/push', reply);
    const B = (reply: Reply) => documented('POST', '/api/push/broadcast', reply);
    const visitor = new Wallet();
    const visit = JSON.stringify({ ...hostCommon(visitor), origin: app.origin });
    expect((await exchange(s.url, 'POST', '/api/host/visits', { body: visit, headers: { 'x-wallet-signature': visitor.signBytes(visit) } })).status).toBe(204);
    const content = { title: 'Hi', body: 'There' };
    const to = visitor.address;

    for (const [X, path, fields] of [[U, '/api/push', { to, ...content }], [B, '/api/push/broadcast', content]] as const) {
      expect(X(await send(s.url, path, token, fields)).status).toBe(202);
      X(await send(s.url, path, token, { ...fields, extra: 1 }));
      X(await send(s.url, path, token, { ...fields, title: ' ' }));
      X(await send(s.url, path, token, { ...fields, body: '' }));
      X(await send(s.url, path, token, { ...fields, path: 'x' }));
      X(await send(s.url, path, null, fields));
      const stranger = generateKeyPair();
      X(await send(s.url, path, await signToken(stranger.secretKey, 'https://stranger.example'), fields));
      const silent = await s.registerApp({ push: false, audienceDays: 30 });
      X(await send(s.url, path, await silent.token(), fields));
      const muted = await s.registerApp({ pushMuted: true, audienceDays: 30 });
      X(await send(s.url, path, await muted.token(), fields));
      X(await send(s.url, path, token, big));
      X(await send(down.url, path, token, fields));
      X(await send(plain.url, path, await (await plain.registerApp({ audienceDays: 30 })).token(), fields));
    }
    // Legacy mode: a one-user token at /api/push is accepted; a broadcast token there is unauthorized.
    expect(U(await send(s.url, '/api/push', null, await legacy(app.origin, app.secretKey, 'service-push+jwt', { sub: to, ...content }), { 'content-type': 'application/jwt' })).status).toBe(202);
    U(await send(s.url, '/api/push', null, await legacy(app.origin, app.secretKey, 'service-push-broadcast+jwt', content), { 'content-type': 'application/jwt' }));
    B(await send(s.url, '/api/push/broadcast', null, await legacy(app.origin, app.secretKey, 'service-push+jwt', { sub: to, ...content }), { 'content-type': 'application/jwt' }));
    // Audience refusals.
    U(await send(s.url, '/api/push', token, { ...content, to: new Wallet().address }));
    const elsewhere = await s.registerApp();
    U(await send(s.url, '/api/push', await elsewhere.token(), { ...content, to }));
    B(await send(s.url, '/api/push/broadcast', await elsewhere.token(), content));
    // The app's notification limit: one accepted, then 429 for either kind.
    const limited = await s.registerApp({ audienceDays: 30, limits: { admissions: null, notifications: { count: 1, periodMs: 3_600_000, burst: 1 } } });
    expect(B(await send(s.url, '/api/push/broadcast', await limited.token(), content)).status).toBe(202);
    expect(B(await send(s.url, '/api/push/broadcast', await limited.token(), content)).status).toBe(429);
    expect(U(await send(s.url, '/api/push', await limited.token(), { ...content, to: new Wallet().address })).status).toBe(404);
    const limitedVisit = JSON.stringify({ ...hostCommon(visitor), origin: limited.origin });
    await exchange(s.url, 'POST', '/api/host/visits', { body: limitedVisit, headers: { 'x-wallet-signature': visitor.signBytes(limitedVisit) } });
    expect(U(await send(s.url, '/api/push', await limited.token(), { ...content, to })).status).toBe(429);
  });

  it('host endpoints, health, readiness, metrics', async () => {
    const wallet = new Wallet();
    const signed = async (base: string, path: string, members: Record<string, unknown>, signature?: string) => {
      const body = JSON.stringify({ ...hostCommon(wallet), ...members });
      return documented('POST', path, await exchange(base, 'POST', path, { body, headers: { 'x-wallet-signature': signature ?? wallet.signBytes(body) } }));
    };
    const subscription = subscriptionJson();
    const cases: Array<[string, Record<string, unknown>]> = [
      ['/api/host/subscriptions', { subscription }],
      ['/api/host/visits', { origin: app.origin }],
      ['/api/host/mutes', { origin: app.origin, muted: true }],
      ['/api/host/subscriptions/remove', { endpoint: subscription.endpoint }],
    ];
    for (const [path, members] of cases) {
      expect((await signed(s.url, path, members)).status).toBe(204);
      expect((await signed(s.url, path, { ...members, extra: 1 })).status).toBe(400);
      expect((await signed(s.url, path, members, wallet.signBytes('other bytes'))).status).toBe(401);
      expect(documented('POST', path, await exchange(s.url, 'POST', path, { body: big })).status).toBe(413);
      expect((await signed(down.url, path, members)).status).toBe(503);
    }
    expect((await signed(s.url, '/api/host/visits', { origin: 'https://nobody.example' })).status).toBe(404);
    expect((await signed(s.url, '/api/host/mutes', { origin: 'https://nobody.example', muted: false })).status).toBe(404);

    expect(documented('GET', '/api/host/vapid-public-key', await exchange(s.url, 'GET', '/api/host/vapid-public-key')).json.publicKey).toBe(s.config.vapid!.publicKey);
    expect(documented('GET', '/api/host/vapid-public-key', await exchange(plain.url, 'GET', '/api/host/vapid-public-key')).status).toBe(503);
    documented('GET', '/healthz', await exchange(s.url, 'GET', '/healthz'));
    expect(documented('GET', '/readyz', await exchange(s.url, 'GET', '/readyz')).status).toBe(200);
    expect(documented('GET', '/readyz', await exchange(down.url, 'GET', '/readyz')).status).toBe(503);
    const metrics = documented('GET', '/metrics', await exchange(s.url, 'GET', '/metrics'));
    expect(metrics.text).toContain('versus_http_requests_total');
    expect(metrics.text).toContain('versus_http_request_duration_seconds_bucket');
    expect(documented('GET', '/metrics', await exchange(down.url, 'GET', '/metrics')).status).toBe(401);
    expect(documented('GET', '/metrics', await exchange(down.url, 'GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(200);
    // The worker face's readiness body is the documented Ready schema too.
    const worker = await startServer(testConfig(testPrefix()), { port: 0, host: '127.0.0.1', role: 'worker' });
    try {
      expect(documented('GET', '/readyz', await exchange(worker.url, 'GET', '/readyz')).json).toEqual({ status: 'ready', queue: 'ready' });
      documented('GET', '/healthz', await exchange(worker.url, 'GET', '/healthz'));
    } finally {
      await worker.close();
    }
  });

  it('every documented response was produced, except 500 internal', () => {
    const excused = [...promised()].filter((key) => key.endsWith(' 500 internal'));
    expect(excused.length).toBeGreaterThan(0);
    const missing = [...promised()].filter((key) => !produced.has(key) && !excused.includes(key));
    expect(missing).toEqual([]);
    const unpromised = [...produced].filter((key) => !promised().has(key));
    expect(unpromised).toEqual([]);
  });
});
