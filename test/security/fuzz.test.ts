import { randomBytes } from 'node:crypto';
import type { Request } from 'express';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJsonBody } from '../../src/http/body.js';
import { ApiError } from '../../src/http/errors.js';
import { signToken, type TestApp } from '../helpers/harness.js';
import { Wallet } from '../push/support/wallet.js';
import { hostCommon, LoggedServer, type Reply, STACK_OR_PATH, subscriptionJson } from './support.js';

/**
 * Fuzzing the real server (in process, real Redis) with random requests: valid-shaped bodies
 * with random mutations (members replaced by random JSON or hostile strings, removed, added),
 * text-level damage (truncation, duplicate members, 1e400, invalid UTF-8, lone surrogates,
 * deep wrapping) and random headers (content types, encodings, tokens, idempotency keys).
 * Properties: never 5xx; a refusal is exactly `{"error": code}` with a code the spec lists for
 * that endpoint, a success has the endpoint's success shape; no body carries a stack line or a
 * source path; and the server logs nothing at warn or above, and no stack, for any of them.
 * 450 requests in all, with a fixed seed per property so that a failure replays.
 */
let s: LoggedServer;
let app: TestApp;
let other: TestApp;
let user: Wallet;

beforeAll(async () => {
  s = await LoggedServer.start();
  app = await s.registerApp({ audienceDays: 30 });
  other = await s.registerApp({ audienceDays: null });
  user = new Wallet();
  for (const members of [{ subscription: subscriptionJson() }, { origin: app.origin }]) {
    const path = 'subscription' in members ? '/api/host/subscriptions' : '/api/host/visits';
    const reply = await s.host(path, user, JSON.stringify({ ...hostCommon(user), ...members }));
    if (reply.status !== 204) throw new Error(`setup: ${reply.text}`);
  }
});
afterAll(async () => {
  await s?.stop();
});

/** Error codes each area may answer (spec section 7, DESIGN.md "HTTP"). */
const MATCHMAKING_CODES = ['invalid_argument', 'unauthenticated', 'app_not_verified', 'ticket_conflict', 'queue_conflict'];
const PUSH_CODES = [
  'unauthenticated', 'unauthorized', 'app_not_verified', 'push_not_declared', 'push_muted', 'unknown_user', 'not_your_user',
  'broadcast_not_configured', 'invalid_request', 'invalid_title', 'invalid_body', 'invalid_path',
];
const HOST_CODES = ['invalid_request', 'unauthenticated', 'unknown_app'];

// ---- random values

/** Strings a careless or hostile client sends: unicode, controls, lone surrogates, huge, look-alikes. */
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' ', '\u0000', '\ud800', 'a\udc00b', '\ud83d', '😀', '\u202e', 'é', '/', '//evil.example', '/a#b', '\\', '"', ':', '__proto__', 'constructor', 'x'.repeat(300), 'é'.repeat(129), '1e400', 'null', 'https://evil.example', 'service-host', 'service-api'),
);

/** Any JSON-ish value: random JSON, hostile strings, big and odd numbers, deep nesting. */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3, stringUnit: 'grapheme' }) },
  { weight: 3, arbitrary: hostileString },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(0, -1, 2, 1.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, 5e-324, true, false, null, [], {}, [[[]]], { a: null }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 300 }).map((depth) => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`) as unknown) },
);

type Mutation = { kind: 'set' | 'delete' | 'add'; node: number; member: number; key: string; value: unknown };
const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('set', 'set', 'delete', 'add'),
  node: fc.nat(),
  member: fc.nat(),
  key: fc.oneof(hostileString, fc.constantFrom('id', 'player', 'queue', 'payload', 'rating', 'expiresAt', 'to', 'title', 'body', 'path', 'wallet', 'nonce', 'extra')),
  value: anyValue,
});

/** Damage done to the serialized body. */
type TextDamage =
  | { kind: 'none' }
  | { kind: 'truncate'; at: number }
  | { kind: 'duplicate' }
  | { kind: 'infinity' }
  | { kind: 'bytes'; at: number; bytes: readonly number[] }
  | { kind: 'surrogate' }
  | { kind: 'wrap'; depth: number }
  | { kind: 'empty' };
const textDamage: fc.Arbitrary<TextDamage> = fc.oneof(
  { weight: 24, arbitrary: fc.constant({ kind: 'none' as const }) },
  { weight: 1, arbitrary: fc.nat().map((at) => ({ kind: 'truncate' as const, at })) },
  { weight: 2, arbitrary: fc.constant({ kind: 'duplicate' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'infinity' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bytes' as const), at: fc.nat(), bytes: fc.constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0x80]) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'surrogate' as const }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 20_000 }).map((depth) => ({ kind: 'wrap' as const, depth })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'empty' as const }) },
);

/** Header choices: which token, which content type and encoding, and any idempotency key. */
const headerPlan = fc.record({
  auth: fc.oneof({ weight: 12, arbitrary: fc.constant('valid') }, { weight: 1, arbitrary: fc.constantFrom('none', 'garbage', 'wrongTyp', 'otherKey', 'otherApp') }),
  contentType: fc.oneof(
    { weight: 24, arbitrary: fc.constant('application/json') },
    { weight: 3, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'APPLICATION/JSON', 'text/plain', 'application/jwt', '', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json;;;') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 30 }).map((t) => t.replace(/[^\x20-\x7e]/g, '')) },
  ),
  encoding: fc.oneof({ weight: 19, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-unknown') }),
  idempotencyKey: fc.oneof(
    { weight: 3, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.oneof(fc.string({ unit: 'binary-ascii', maxLength: 300 }).map((t) => t.replace(/[^\x20-\x7e]/g, '')), fc.uuid()) },
  ),
});

// ---- building a request

/** Every object inside `root` (root first), for picking where a mutation lands. */
function objectsIn(root: unknown): Array<Record<string, unknown> | unknown[]> {
  const found: Array<Record<string, unknown> | unknown[]> = [];
  const stack = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== 'object') continue;
    found.push(value as Record<string, unknown>);
    stack.push(...Object.values(value));
  }
  return found;
}

function mutate(root: unknown, mutations: Mutation[]): unknown {
  for (const m of mutations) {
    const nodes = objectsIn(root);
    if (nodes.length === 0) return m.value;
    const node = nodes[m.node % nodes.length]!;
    const keys = Object.keys(node);
    const key = m.kind === 'add' || keys.length === 0 ? m.key : keys[m.member % keys.length]!;
    if (m.kind === 'delete') {
      if (Array.isArray(node)) node.splice(Number(key), 1);
      else delete node[key];
    } else if (Array.isArray(node)) {
      node[m.member % (node.length + 1)] = m.value;
    } else {
      // defineProperty: a key "__proto__" becomes a member, as JSON.parse would make it.
      Object.defineProperty(node, key, { value: m.value, enumerable: true, writable: true, configurable: true });
    }
  }
  return root;
}

function damage(text: string, d: TextDamage): string | Buffer {
  switch (d.kind) {
    case 'none':
      return text;
    case 'truncate':
      return text.slice(0, d.at % (text.length + 1));
    case 'duplicate': {
      // Repeat the first member of the first object right after its brace.
      const match = /\{("(?:[^"\\]|\\.)*":(?:"(?:[^"\\]|\\.)*"|-?[\d.eE+-]+|true|false|null))/.exec(text);
      return match ? `${text.slice(0, match.index + 1)}${match[1]},${text.slice(match.index + 1)}` : `{"a":1,"a":2,"x":${text || 'null'}}`;
    }
    case 'infinity':
      return /\d/.test(text) ? text.replace(/-?\d+(\.\d+)?([eE][+-]?\d+)?/, '1e400') : `[1e400,${text || 'null'}]`;
    case 'bytes': {
      const bytes = Buffer.from(text);
      const at = d.at % (bytes.length + 1);
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(d.bytes), bytes.subarray(at)]);
    }
    case 'surrogate': {
      const at = text.indexOf('"');
      return at < 0 ? `["\\ud800",${text || 'null'}]` : `${text.slice(0, at + 1)}\\udbff${text.slice(at + 1)}`;
    }
    case 'wrap':
      return `${'['.repeat(d.depth)}${text}${']'.repeat(d.depth)}`;
    case 'empty':
      return '';
  }
}

async function authorization(plan: string): Promise<string | undefined> {
  switch (plan) {
    case 'valid':
      return `Bearer ${await app.token()}`;
    case 'garbage':
      return `Bearer ${randomBytes(24).toString('base64url')}.${randomBytes(40).toString('base64url')}.${randomBytes(64).toString('base64url')}`;
    case 'wrongTyp':
      return `Bearer ${await signToken(app.secretKey, app.origin, { header: { typ: 'service-push+jwt' } })}`;
    case 'otherKey':
      return `Bearer ${await signToken(other.secretKey, app.origin)}`;
    case 'otherApp':
      return `Bearer ${await other.token()}`;
    default:
      return undefined;
  }
}

interface Plan {
  mutations: Mutation[];
  damage: TextDamage;
  headers: { auth: string; contentType: string; encoding: string | null; idempotencyKey: string | null };
}

const planArb: fc.Arbitrary<Plan> = fc.record({
  mutations: fc.oneof({ weight: 2, arbitrary: fc.constant<Mutation[]>([]) }, { weight: 3, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }) }),
  damage: textDamage,
  headers: headerPlan,
});

async function send(path: string, base: unknown, plan: Plan, extraHeaders: Record<string, string> = {}): Promise<Reply> {
  const body = damage(JSON.stringify(mutate(base, plan.mutations)) ?? '', plan.damage);
  const headers: Record<string, string> = { 'content-type': plan.headers.contentType, ...extraHeaders };
  const auth = await authorization(plan.headers.auth);
  if (auth !== undefined) headers['authorization'] = auth;
  if (plan.headers.encoding !== null) headers['content-encoding'] = plan.headers.encoding;
  if (plan.headers.idempotencyKey !== null) headers['idempotency-key'] = plan.headers.idempotencyKey;
  return s.post(path, body, headers);
}

/** The common property: no 5xx, a listed code or the success shape, no stack or path, a clean log. */
function check(reply: Reply, codes: readonly string[], success: (reply: Reply) => void, logMark: number): void {
  const label = `${reply.status} ${reply.text.slice(0, 200)}`;
  expect(reply.status, label).toBeLessThan(500);
  expect(reply.text, label).not.toMatch(STACK_OR_PATH);
  if (reply.status < 300) {
    success(reply);
  } else {
    expect(reply.contentType, label).toMatch(/^application\/json/);
    expect(Object.keys(reply.body ?? {}), label).toEqual(['error']);
    expect(codes, label).toContain(reply.body.error);
  }
  expect(s.logProblems(logMark), label).toEqual([]);
}

const seed = (n: number) => ({ seed: n, endOnFailure: true });

describe('fuzzing the real server', () => {
  it('POST /api/matchmaking: 150 random requests', async () => {
    const operations = ['createTicket', 'createTicket', 'createTicket', 'listTickets', 'cancelTicket', 'deleteTicket'];
    const matchmakingSuccess = (reply: Reply) => {
      expect(reply.status).toBe(200);
      const body = reply.body as Record<string, unknown>;
      if ('tickets' in body) {
        expect(Object.keys(body).sort()).toEqual(['nextCursor', 'tickets']);
      } else {
        expect(typeof body['id']).toBe('string');
        expect(['waiting', 'matched', 'cancelled']).toContain(body['state']);
      }
    };
    await fc.assert(
      fc.asyncProperty(planArb, fc.nat(operations.length - 1), fc.nat(20), fc.boolean(), async (plan, op, n, rated) => {
        const operation = operations[op]!;
        const id = `fz-${n}`;
        const queue = rated ? { key: 'rq', size: 2, rating: { initial: 10, widenPerSecond: 1 } } : { key: 'q', size: 2 };
        const input =
          operation === 'listTickets'
            ? { player: `p${n % 3}` }
            : operation === 'cancelTicket'
              ? { id }
              : { id, player: `p${n % 3}`, queue, payload: { seed: n, tags: ['a', 'b'] }, ...(rated ? { rating: n * 10 } : {}) };
        const mark = s.log.length;
        const reply = await send('/api/matchmaking', { operation, input }, plan);
        if (reply.status === 413) expect(reply.body).toEqual({ error: 'invalid_argument' });
        check(reply, MATCHMAKING_CODES, matchmakingSuccess, mark);
      }),
      { numRuns: 150, ...seed(601) },
    );
  });

  it('POST /api/push and /api/push/broadcast: 150 random requests', async () => {
    const pushSuccess = (reply: Reply) => {
      expect(reply.status).toBe(202);
      expect(Object.keys(reply.body)).toEqual(['id']);
      expect(reply.body.id).toMatch(/^n[A-Za-z0-9_-]{22}$/);
    };
    await fc.assert(
      fc.asyncProperty(planArb, fc.boolean(), fc.boolean(), async (plan, broadcast, withPath) => {
        const base: Record<string, unknown> = broadcast ? { title: 'All hands', body: 'Now' } : { to: user.address, title: 'Round 3', body: 'Join now' };
        if (withPath) base['path'] = '/rooms/7?seat=2';
        const mark = s.log.length;
        const reply = await send(broadcast ? '/api/push/broadcast' : '/api/push', base, plan);
        if (reply.status === 413) expect(reply.body).toEqual({ error: 'invalid_request' });
        check(reply, PUSH_CODES, pushSuccess, mark);
      }),
      { numRuns: 150, ...seed(602) },
    );
  });

  it('wallet-signed host endpoints: 150 random requests, signed over the final bytes (or not)', async () => {
    const paths = ['/api/host/subscriptions', '/api/host/subscriptions/remove', '/api/host/visits', '/api/host/mutes'] as const;
    const hostSuccess = (reply: Reply) => {
      expect(reply.status).toBe(204);
      expect(reply.text).toBe('');
    };
    await fc.assert(
      fc.asyncProperty(planArb, fc.nat(paths.length - 1), fc.oneof({ weight: 12, arbitrary: fc.constant('signed') }, { weight: 1, arbitrary: fc.constantFrom('unsigned', 'otherWallet', 'garbage') }), async (plan, p, signing) => {
        const path = paths[p]!;
        const wallet = new Wallet();
        const members =
          path === '/api/host/subscriptions'
            ? { subscription: subscriptionJson() }
            : path === '/api/host/subscriptions/remove'
              ? { endpoint: subscriptionJson().endpoint }
              : path === '/api/host/visits'
                ? { origin: app.origin }
                : { origin: app.origin, muted: true };
        const body = damage(JSON.stringify(mutate({ ...hostCommon(wallet), ...members }, plan.mutations)) ?? '', plan.damage);
        const headers: Record<string, string> = { 'content-type': plan.headers.contentType };
        if (plan.headers.encoding !== null) headers['content-encoding'] = plan.headers.encoding;
        if (signing === 'signed') headers['x-wallet-signature'] = wallet.signBytes(body as string);
        if (signing === 'otherWallet') headers['x-wallet-signature'] = new Wallet().signBytes(body as string);
        if (signing === 'garbage') headers['x-wallet-signature'] = randomBytes(20).toString('hex');
        const mark = s.log.length;
        const reply = await s.post(path, body, headers);
        if (reply.status === 413) expect(reply.body).toEqual({ error: 'invalid_request' });
        check(reply, HOST_CODES, hostSuccess, mark);
      }),
      { numRuns: 150, ...seed(603) },
    );
  });
});

// ---- the duplicate-member check itself, against a reference

type Node = { t: 'leaf'; v: null | boolean | number | string } | { t: 'arr'; items: Node[] } | { t: 'obj'; entries: Array<[string, boolean, Node]> };

/** JSON whose objects may repeat names; `escape` spells a name entirely in \u escapes (one per UTF-16 unit). */
function serialize(node: Node): string {
  if (node.t === 'leaf') return JSON.stringify(node.v);
  if (node.t === 'arr') return `[${node.items.map(serialize).join(',')}]`;
  const name = (key: string, escape: boolean) =>
    escape ? `"${key.split('').map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(key);
  return `{${node.entries.map(([key, escape, value]) => `${name(key, escape)}:${serialize(value)}`).join(',')}}`;
}

function hasDuplicate(node: Node): boolean {
  if (node.t === 'leaf') return false;
  if (node.t === 'arr') return node.items.some(hasDuplicate);
  const names = node.entries.map(([key]) => key);
  return new Set(names).size !== names.length || node.entries.some(([, , value]) => hasDuplicate(value));
}

describe('duplicate member detection (src/http/body.ts) against a reference', () => {
  /** Names and strings full of what could fool a scanner: colons, quotes, backslashes, braces. */
  const tricky = fc.string({ unit: fc.constantFrom('a', 'b', ':', '"', '\\', '{', '}', ',', 'é', '😀', '\u0000', '\n'), maxLength: 6 });
  const { node } = fc.letrec<{ node: Node; leaf: Node; arr: Node; obj: Node }>((tie) => ({
    node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, tie('leaf'), tie('arr'), tie('obj')),
    leaf: fc.oneof(
      fc.constant(null),
      fc.boolean(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      tricky,
    ).map((v) => ({ t: 'leaf' as const, v })),
    arr: fc.array(tie('node'), { maxLength: 4 }).map((items) => ({ t: 'arr' as const, items })),
    obj: fc.array(fc.tuple(fc.oneof(tricky, fc.constantFrom('__proto__', 'constructor', 'a')), fc.boolean(), tie('node')), { maxLength: 5 }).map((entries) => ({ t: 'obj' as const, entries })),
  }));

  it('refuses exactly the bodies with a repeated name in some object, whatever the spelling; parses the rest like JSON.parse', () => {
    let duplicates = 0;
    fc.assert(
      fc.property(node, (tree) => {
        const text = serialize(tree);
        const request = { body: Buffer.from(text) } as Request;
        if (hasDuplicate(tree)) {
          duplicates += 1;
          expect(() => parseJsonBody(request, 'invalid_argument', 1000)).toThrow(ApiError);
        } else {
          expect(parseJsonBody(request, 'invalid_argument', 1000)).toEqual(JSON.parse(text));
        }
      }),
      { numRuns: 2000, seed: 604 },
    );
    // The generator does produce both kinds (the check is not vacuous).
    expect(duplicates).toBeGreaterThan(100);
  });
});
