import type { Request, Response } from 'express';
import { cancelSchema, envelopeSchema, ticketInputSchema, ticketQuerySchema } from '../matchmaking/validation.js';
import { hostMuteSchema, hostSubscribeSchema, hostUnsubscribeSchema, hostVisitSchema } from '../push/host.js';
import { legacyTokenSchema } from '../push/legacy.js';
import { idempotencyKeySchema, notifyAudienceSchema, notifyUserSchema } from '../push/validation.js';
import { LIMITS } from '../shared/matchmaking-types.js';
import { type ErrorCode, statusOf } from './errors.js';
import { MATCHMAKING_OPERATIONS, REQUEST_ID_HEADER, ROUTE_OPERATIONS, SAFE_REQUEST_ID } from './observe.js';

/**
 * The OpenAPI 3.1 document of every public endpoint, served at GET /openapi.json. Request
 * schemas are the objects the server validates with (ajv schemas of src/matchmaking/validation.ts;
 * the schemas exported beside the hand-written push and host checks); response schemas are
 * written here and test/http/openapi.test.ts checks real responses against them, so the server
 * and this document cannot drift apart unnoticed.
 */

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

const number = { type: 'number' } as const;
const nonEmpty = { type: 'string', minLength: 1 } as const;

/** Response bodies of matchmaking (interface.md section 2A): exactly the spec's members. */
const matchmakingSchemas: Record<string, Schema> = {
  TicketInput: {
    ...ticketInputSchema,
    description: `id and player: at most ${LIMITS.idBytes} UTF-8 bytes; queue.key at most ${LIMITS.queueKeyBytes}; payload at most ${LIMITS.payloadBytes} bytes of compact JSON, nested at most 256 levels; queue.rating.max at least initial; a rating needs a queue with a rating policy (checked after this schema: invalid_argument)`,
  },
  TicketQuery: { ...ticketQuerySchema, description: `player and id: at most ${LIMITS.idBytes} UTF-8 bytes; cursor: nextCursor of the previous page with the same filters` },
  CancelInput: { ...cancelSchema, description: `id: at most ${LIMITS.idBytes} UTF-8 bytes` },
  Admission: {
    type: 'object',
    required: ['input', 'createdAt', 'payload'],
    additionalProperties: false,
    properties: { input: ref('TicketInput'), createdAt: number, payload: { description: 'The accepted game conditions the player must use' } },
  },
  Match: {
    type: 'object',
    required: ['id', 'queue', 'matchedAt', 'payload', 'tickets'],
    additionalProperties: false,
    properties: {
      id: nonEmpty,
      queue: { type: 'string' },
      matchedAt: number,
      payload: {},
      tickets: { type: 'array', minItems: 2, maxItems: 2, items: ref('Admission'), description: '[waiting admission, joining admission]' },
    },
  },
  WaitingTicket: {
    type: 'object',
    required: ['id', 'state', 'admission'],
    additionalProperties: false,
    properties: { id: nonEmpty, state: { const: 'waiting' }, admission: ref('Admission') },
  },
  MatchedTicket: {
    type: 'object',
    required: ['id', 'state', 'admission', 'match'],
    additionalProperties: false,
    properties: { id: nonEmpty, state: { const: 'matched' }, admission: ref('Admission'), match: ref('Match') },
  },
  CancelledTicket: {
    type: 'object',
    required: ['id', 'state', 'admission', 'reason', 'cancelledAt'],
    additionalProperties: false,
    properties: {
      id: nonEmpty,
      state: { const: 'cancelled' },
      admission: { oneOf: [ref('Admission'), { type: 'null' }] },
      reason: { enum: ['requested', 'expired'] },
      cancelledAt: number,
    },
  },
  Ticket: { oneOf: [ref('WaitingTicket'), ref('MatchedTicket'), ref('CancelledTicket')] },
  FinalTicket: { oneOf: [ref('MatchedTicket'), ref('CancelledTicket')], description: 'cancelTicket never answers waiting' },
  TicketPage: {
    type: 'object',
    required: ['tickets', 'nextCursor'],
    additionalProperties: false,
    properties: {
      tickets: { type: 'array', maxItems: LIMITS.pageSize, items: ref('Ticket') },
      nextCursor: { oneOf: [{ type: 'string', minLength: 1 }, { type: 'null' }] },
    },
  },
  MatchmakingRequest: {
    allOf: [
      envelopeSchema,
      {
        oneOf: [
          { type: 'object', required: ['operation', 'input'], properties: { operation: { const: 'createTicket' }, input: ref('TicketInput') } },
          { type: 'object', required: ['operation'], properties: { operation: { const: 'listTickets' }, input: ref('TicketQuery') } },
          { type: 'object', required: ['operation', 'input'], properties: { operation: { const: 'cancelTicket' }, input: ref('CancelInput') } },
        ],
      },
    ],
  },
};

const otherSchemas: Record<string, Schema> = {
  NotifyUser: notifyUserSchema,
  NotifyAudience: notifyAudienceSchema,
  LegacyToken: legacyTokenSchema,
  Accepted: {
    type: 'object',
    required: ['id'],
    additionalProperties: false,
    properties: { id: { type: 'string', minLength: 1, description: 'The notification id (also the Web Push Topic)' } },
  },
  HostSubscribe: hostSubscribeSchema,
  HostUnsubscribe: hostUnsubscribeSchema,
  HostVisit: hostVisitSchema,
  HostMute: hostMuteSchema,
  VapidPublicKey: {
    type: 'object',
    required: ['publicKey'],
    additionalProperties: false,
    properties: { publicKey: { type: 'string', pattern: '^[A-Za-z0-9_-]{87}$', description: 'applicationServerKey for pushManager.subscribe' } },
  },
  Health: { type: 'object', required: ['status'], additionalProperties: false, properties: { status: { const: 'ok' } } },
  Ready: {
    type: 'object',
    required: ['status'],
    additionalProperties: false,
    properties: { status: { const: 'ready' }, queue: { const: 'ready', description: 'Only on a worker (`versus serve --role worker`)' } },
  },
};

const requestIdHeader = { $ref: '#/components/headers/RequestId' };

function errorBody(codes: readonly ErrorCode[]): Schema {
  return {
    type: 'object',
    required: ['error'],
    additionalProperties: false,
    properties: { error: { enum: [...codes] } },
  };
}

/** The documented refusals of one operation: status -> error codes (statuses from errors.ts, 413 and 429 added by name). */
type Refusals = Partial<Record<number, readonly ErrorCode[]>>;

function refusals(...codes: ErrorCode[]): Refusals {
  const byStatus: Record<number, ErrorCode[]> = {};
  for (const code of codes) (byStatus[statusOf(code)] ??= []).push(code);
  return byStatus;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Invalid request',
  401: 'Not authenticated',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Conflict',
  413: 'Body over 64 KiB (counted after decompression)',
  429: "The app's operator rate limit (`versus apps limits`); Retry-After says when to try again",
  500: 'Internal error',
  503: 'Unavailable: Redis unreachable (answered within about 2 s), or not configured',
};

function responses(success: Record<string, unknown>, refused: Refusals): Record<string, unknown> {
  const out: Record<string, unknown> = { ...success };
  for (const [status, codes] of Object.entries(refused)) {
    const headers: Record<string, unknown> = { [REQUEST_ID_HEADER]: requestIdHeader };
    if (status === '429') headers['Retry-After'] = { description: 'Whole seconds until the app may send again', schema: { type: 'integer', minimum: 1 } };
    out[status] = { description: STATUS_TEXT[Number(status)], headers, content: { 'application/json': { schema: errorBody(codes!) } } };
  }
  return out;
}

function ok(status: number, description: string, schema: Schema | null, mediaType = 'application/json'): Record<string, unknown> {
  const response: Record<string, unknown> = { description, headers: { [REQUEST_ID_HEADER]: requestIdHeader } };
  if (schema !== null) response['content'] = { [mediaType]: { schema } };
  return { [String(status)]: response };
}

function jsonBody(schema: Schema, description?: string): Record<string, unknown> {
  return { required: true, ...(description ? { description } : {}), content: { 'application/json': { schema } } };
}

const operationId = (method: string, path: string): string => {
  const id = ROUTE_OPERATIONS[`${method.toUpperCase()} ${path}`];
  if (id === undefined) throw new Error(`no operation name for ${method} ${path}`);
  return id;
};

/** Refusals common to the notification sends (DESIGN.md "Notifications": checked in this order). */
const sendRefusals = ['invalid_request', 'invalid_title', 'invalid_body', 'invalid_path', 'unauthenticated', 'unauthorized', 'app_not_verified', 'push_not_declared', 'push_muted'] as const;

function pushSend(path: string, summary: string, body: string, audience: ErrorCode[]): Record<string, unknown> {
  return {
    post: {
      operationId: operationId('post', path),
      summary,
      description:
        'Either the shared app JWT (Authorization: Bearer) with a JSON body, or (legacy) the signed token itself as an application/jwt body without Authorization. 202 means accepted for delivery, nothing more.',
      security: [{ appJwt: [] }, {}],
      parameters: [{ name: 'Idempotency-Key', in: 'header', required: false, schema: idempotencyKeySchema, description: 'JSON mode: a retry with the same key answers the first id; the same key with other content is invalid_request' }],
      requestBody: { required: true, content: { 'application/json': { schema: ref(body) }, 'application/jwt': { schema: ref('LegacyToken') } } },
      responses: responses(ok(202, 'Accepted for delivery', ref('Accepted')), {
        ...refusals(...sendRefusals, ...audience, 'unavailable', 'push_not_enabled', 'internal'),
        413: ['invalid_request'],
        429: ['unavailable'],
      }),
    },
  };
}

function hostEndpoint(path: string, summary: string, body: string, extra: ErrorCode[] = []): Record<string, unknown> {
  return {
    post: {
      operationId: operationId('post', path),
      summary,
      security: [{ walletSignature: [] }],
      requestBody: jsonBody(ref(body)),
      responses: responses(ok(204, 'Done', null), {
        ...refusals('invalid_request', 'unauthenticated', ...extra, 'unavailable', 'internal'),
        413: ['invalid_request'],
      }),
    },
  };
}

function buildDocument(): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Versus',
      version: '0.1.0',
      description:
        'Head-to-head matchmaking and app notifications. Every refusal is JSON {"error": code}; an unknown route or method is 404 {"error":"not_found"}. ' +
        `Every response carries ${REQUEST_ID_HEADER}. Headers over 16 KiB are refused by HTTP itself (431), and slow requests are closed (408), without a JSON body.`,
    },
    paths: {
      '/api/matchmaking': {
        post: {
          operationId: 'matchmaking',
          summary: 'createTicket, listTickets or cancelTicket',
          description:
            'The body is an envelope {operation, input}. 200 answers the Ticket (createTicket), the TicketPage (listTickets) or the matched or cancelled Ticket (cancelTicket): see x-operation-results. Authentication is checked before the body is read.',
          security: [{ appJwt: [] }],
          requestBody: jsonBody(ref('MatchmakingRequest')),
          'x-operation-results': Object.fromEntries(
            MATCHMAKING_OPERATIONS.map((operation) => [operation, `#/components/schemas/${{ createTicket: 'Ticket', listTickets: 'TicketPage', cancelTicket: 'FinalTicket' }[operation]}`]),
          ),
          responses: responses(ok(200, 'The operation result', { oneOf: [ref('Ticket'), ref('TicketPage')] }), {
            ...refusals('invalid_argument', 'unauthenticated', 'app_not_verified', 'ticket_conflict', 'queue_conflict', 'unavailable', 'internal'),
            413: ['invalid_argument'],
            429: ['unavailable'],
          }),
        },
      },
      '/api/push': pushSend('/api/push', 'notifyUser: one user, by wallet address', 'NotifyUser', ['unknown_user', 'not_your_user']),
      '/api/push/broadcast': pushSend('/api/push/broadcast', "notifyAudience: the app's recent-user audience", 'NotifyAudience', ['broadcast_not_configured']),
      '/api/host/subscriptions': hostEndpoint('/api/host/subscriptions', "Register the wallet's browser push subscription", 'HostSubscribe'),
      '/api/host/subscriptions/remove': hostEndpoint('/api/host/subscriptions/remove', 'Remove a subscription', 'HostUnsubscribe'),
      '/api/host/visits': hostEndpoint('/api/host/visits', 'The wallet opened an app', 'HostVisit', ['unknown_app']),
      '/api/host/mutes': hostEndpoint('/api/host/mutes', "Mute or unmute an app's notifications for the wallet", 'HostMute', ['unknown_app']),
      '/api/host/vapid-public-key': {
        get: {
          operationId: operationId('get', '/api/host/vapid-public-key'),
          summary: 'The VAPID public key (applicationServerKey)',
          responses: responses(ok(200, 'The key', ref('VapidPublicKey')), refusals('push_not_enabled')),
        },
      },
      '/healthz': {
        get: { operationId: operationId('get', '/healthz'), summary: 'The process runs', responses: ok(200, 'Running', ref('Health')) },
      },
      '/readyz': {
        get: {
          operationId: operationId('get', '/readyz'),
          summary: 'Redis answers, scripts are loaded, the push queue (and on a worker, the worker) is ready',
          responses: responses(ok(200, 'Ready', ref('Ready')), refusals('unavailable')),
        },
      },
      '/metrics': {
        get: {
          operationId: operationId('get', '/metrics'),
          summary: "Prometheus metrics (prom-client's default registry), including versus_http_requests_total and versus_http_request_duration_seconds by route, operation and code",
          description: 'With METRICS_TOKEN set, only with Authorization: Bearer <METRICS_TOKEN>; unset, open.',
          security: [{ metricsToken: [] }, {}],
          responses: responses(ok(200, 'Prometheus text exposition format', { type: 'string' }, 'text/plain'), refusals('unauthenticated', 'internal')),
        },
      },
      '/openapi.json': {
        get: { operationId: operationId('get', '/openapi.json'), summary: 'This document', responses: ok(200, 'OpenAPI 3.1 document', { type: 'object' }) },
      },
    },
    components: {
      schemas: { ...matchmakingSchemas, ...otherSchemas },
      headers: {
        RequestId: {
          description: 'The request ID: the caller\'s X-Request-Id when it is 1 to 128 of A-Za-z0-9._:-, else a new UUID. Every log line of the request carries it.',
          schema: { type: 'string', pattern: SAFE_REQUEST_ID.source },
        },
      },
      securitySchemes: {
        appJwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Shared app JWT: EdDSA, typ and aud fixed, iss the app origin, at most 300 s lifetime, signed by the app key' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, when the deployment sets one' },
        walletSignature: { type: 'apiKey', in: 'header', name: 'X-Wallet-Signature', description: 'base58 Ed25519 signature of the exact body bytes by the wallet in the body' },
      },
    },
  };
}

/** The document (built once; it does not depend on configuration). */
export const openApiDocument: Readonly<Record<string, unknown>> = buildDocument();
const documentText = JSON.stringify(openApiDocument);

/** GET /openapi.json */
export function serveOpenApi(_req: Request, res: Response): void {
  res.type('application/json').send(documentText);
}
