import express, { type NextFunction, type Request, type Response, Router } from 'express';
import { authenticateApp } from '../apps/auth.js';
import type { AppRecord } from '../apps/registry.js';
import { hasMediaType, MAX_BODY_BYTES, parseJsonBody } from '../http/body.js';
import { ApiError, RateLimited } from '../http/errors.js';
import type { Services } from '../http/app.js';
import { noteApp } from '../http/observe.js';
import { Keys } from '../redis/keys.js';
import { canonicalJson } from '../shared/json.js';
import { canonicalOrigin } from '../shared/origin.js';
import { readHostRequest } from './host.js';
import { LEGACY_REGISTERED_CLAIMS, verifyLegacyToken } from './legacy.js';
import { newNotificationId, type PushProducer } from './queue.js';
import { type IdempotencyRecord, PushStore, shortHash } from './store.js';
import { MAX_PUSH_PAYLOAD_BYTES, type PushJob } from './types.js';
import { isIdempotencyKey, type NotificationFields, validateFields, validateSubscription } from './validation.js';

/** Nesting accepted in push and host bodies (they are flat; deeper is invalid_request). */
const MAX_BODY_DEPTH = 8;

/** Reads the body as bytes (parsed strictly later); over 64 KiB: 413 `invalid_request`. */
function rawBody() {
  const parse = express.raw({ type: () => true, limit: MAX_BODY_BYTES });
  return (req: Request, res: Response, next: NextFunction) => {
    parse(req, res, (error?: unknown) => {
      if (error === undefined || error === null) return next();
      const type = (error as { type?: string }).type;
      if (type === 'entity.too.large') return next(new ApiError('invalid_request', 'body too large', 413));
      return next(new ApiError('invalid_request', `unreadable body (${type ?? 'unknown'})`));
    });
  };
}

/** The body as parsed JSON, or the refusal to answer at the fields step. */
type Parsed = { ok: true; value: unknown } | { ok: false; error: ApiError };

function tryParse(req: Request): Parsed {
  try {
    if (!hasMediaType(req, 'application/json')) throw new ApiError('invalid_request', 'Content-Type must be application/json');
    return { ok: true, value: parseJsonBody(req, 'invalid_request', MAX_BODY_DEPTH) };
  } catch (error) {
    if (error instanceof ApiError) return { ok: false, error };
    throw error;
  }
}

/** An authenticated send: who, what (still unchecked), and the key that makes a retry idempotent. */
interface SendRequest {
  app: AppRecord;
  /** Checks the content (fields step); throws the refusal. */
  fields(): NotificationFields;
  /** Hash of the Idempotency-Key (JSON mode) or the token (legacy mode); null: not idempotent. */
  idempotencyKey: string | null;
  /** Fingerprint of route and content: the same key with other content is refused. */
  fingerprint: string;
}

/**
 * Authenticates a send in either mode. `application/jwt`: the legacy signed-body token, which
 * is also the idempotency key. Otherwise the shared app JWT (`Authorization: Bearer`) with a
 * JSON body and an optional `Idempotency-Key`.
 */
async function authenticateSend(req: Request, services: Services, broadcast: boolean): Promise<SendRequest> {
  const route = broadcast ? 'broadcast' : 'user';
  if (hasMediaType(req, 'application/jwt')) {
    const raw = req.body as Buffer;
    const token = Buffer.isBuffer(raw) ? raw.toString('latin1').trim() : '';
    const { app, claims } = await verifyLegacyToken(token, services.registry, services.config.environment, broadcast);
    const content: Record<string, unknown> = { ...claims };
    if (!broadcast) {
      content['to'] = content['sub'];
      delete content['sub'];
    }
    const registered: string[] = LEGACY_REGISTERED_CLAIMS.filter((claim) => claim !== 'sub');
    return {
      app,
      fields: () => validateFields(content, !broadcast, registered),
      idempotencyKey: shortHash(`jwt:${token}`),
      fingerprint: route,
    };
  }
  const app = await authenticateApp(req.headers.authorization, services.registry, services.config.environment);
  const parsed = tryParse(req);
  const header = req.headers['idempotency-key'];
  const keyValid = header === undefined || isIdempotencyKey(header);
  return {
    app,
    fields: () => {
      if (!parsed.ok) throw parsed.error;
      if (!keyValid) throw new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters');
      return validateFields(parsed.value, !broadcast);
    },
    idempotencyKey: typeof header === 'string' && keyValid ? shortHash(`key:${header}`) : null,
    fingerprint: shortHash(`${route}\n${parsed.ok ? canonicalJson(parsed.value) : `raw:${Buffer.isBuffer(req.body) ? req.body.toString('base64') : ''}`}`),
  };
}

/** The plaintext every subscription receives (DESIGN.md): the app's name on the title, the tap URL on its origin. */
function payloadOf(id: string, app: AppRecord, fields: NotificationFields): string {
  return JSON.stringify({ id, title: `${app.name}: ${fields.title}`, body: fields.body, url: `${app.origin}${fields.path}`, origin: app.origin });
}

/**
 * Mounted by createApp: the notification API (`POST /api/push`, `POST /api/push/broadcast`)
 * and the wallet-signed host endpoints (`/api/host/...`). The API validates, applies policy and
 * enqueues; delivery is the worker's (src/push/worker.ts).
 */
export function createPushRouter(services: Services): Router {
  const { config, registry } = services;
  const store = new PushStore(services.redis, new Keys(config.keyPrefix), config.testClock);
  const router = Router();

  const producer = (): PushProducer => {
    const p = services.push?.producer;
    if (!p) throw new ApiError('push_not_enabled', 'this process does not accept notifications');
    return p;
  };

  /**
   * Enqueues an accepted notification and counts it once. An idempotent send counts when its
   * record turns from reserved to queued; a retry that re-adds the job of a reserved record
   * (its first request may have stopped before enqueueing) may be the one, so concurrent twins
   * count one. A record left reserved (the mark failed) is counted by the retry that marks it.
   */
  const enqueueAccepted = async (appId: string, job: PushJob, idempotency: { keyHash: string; record: IdempotencyRecord } | null): Promise<void> => {
    const queue = producer();
    await queue.enqueue(job);
    if (idempotency === null) return queue.countAccepted(job);
    if (await store.markIdempotencyQueued(appId, idempotency.keyHash, idempotency.record).catch(() => false)) queue.countAccepted(job);
  };

  /** A retry of an accepted send: the first answer; the job is re-added if the first request may not have enqueued it. */
  const answerAgain = async (res: Response, appId: string, keyHash: string, record: IdempotencyRecord, fingerprint: string): Promise<void> => {
    if (record.fp !== fingerprint) throw new ApiError('invalid_request', 'Idempotency-Key reused for a different notification');
    if (record.state === 'reserved' && record.job) await enqueueAccepted(appId, record.job, { keyHash, record });
    res.status(202).type('application/json').send(JSON.stringify({ id: record.id }));
  };

  const send = (broadcast: boolean) => async (req: Request, res: Response) => {
    const request = await authenticateSend(req, services, broadcast);
    const { app, idempotencyKey, fingerprint } = request;
    noteApp(res, app.origin);
    if (idempotencyKey !== null) {
      const first = await store.idempotencyRecord(app.appId, idempotencyKey);
      if (first) return answerAgain(res, app.appId, idempotencyKey, first, fingerprint);
    }
    if (app.push === false) throw new ApiError('push_not_declared', 'the manifest does not declare capabilities.push');
    if (app.pushMuted) throw new ApiError('push_muted', 'the operator muted this app');
    if (!config.vapid) throw new ApiError('push_not_enabled', 'no VAPID keys configured');
    const fields = request.fields();

    const id = newNotificationId();
    const payload = payloadOf(id, app, fields);
    if (Buffer.byteLength(payload) > MAX_PUSH_PAYLOAD_BYTES) throw new ApiError('invalid_body', 'too long for one push message');

    let job: PushJob;
    if (broadcast) {
      if (app.audienceDays === null) throw new ApiError('broadcast_not_configured', 'no broadcast audience configured');
      job = { kind: 'broadcast', id, appId: app.appId, origin: app.origin, payload, days: app.audienceDays };
    } else {
      const to = fields.to!;
      if (!(await store.isKnown(to))) throw new ApiError('unknown_user', 'wallet never registered a subscription or a visit');
      if (!(await store.visitedWithin(app.appId, to, app.userDays))) throw new ApiError('not_your_user', 'wallet has not opened this app within its user window');
      job = { kind: 'user', id, appId: app.appId, origin: app.origin, payload, wallet: to };
    }

    producer(); // a process without a queue refuses before a token is taken or a key reserved
    const record: IdempotencyRecord = { id, fp: fingerprint, state: 'reserved', job };
    const limit = app.limits?.notifications ?? null;
    if (limit !== null) {
      // The last check: only a send that is accepted takes a token (an idempotent replay never
      // does), and a refusal enqueues and stores nothing.
      const taken = await store.acceptLimited(app.appId, limit, idempotencyKey === null ? null : { keyHash: idempotencyKey, record });
      if ('answered' in taken) return answerAgain(res, app.appId, idempotencyKey!, taken.answered, fingerprint);
      if ('rateLimitedMs' in taken) throw new RateLimited('notification limit', taken.rateLimitedMs);
    }
    if (idempotencyKey !== null && limit === null) {
      const winner = await store.reserveIdempotency(app.appId, idempotencyKey, record);
      if (winner) return answerAgain(res, app.appId, idempotencyKey, winner, fingerprint);
    }
    await enqueueAccepted(app.appId, job, idempotencyKey === null ? null : { keyHash: idempotencyKey, record });
    res.status(202).type('application/json').send(JSON.stringify({ id }));
  };

  router.post('/api/push', rawBody(), send(false));
  router.post('/api/push/broadcast', rawBody(), send(true));

  // ---- host endpoints (wallet-signed)

  const noContent = (res: Response) => {
    res.status(204).end();
  };

  router.post('/api/host/subscriptions', rawBody(), async (req, res) => {
    const { wallet, value } = await readHostRequest(req, ['subscription'], (body) => validateSubscription(body['subscription'], config.pushEndpointHosts), store);
    await store.addSubscription(wallet, value);
    noContent(res);
  });

  router.post('/api/host/subscriptions/remove', rawBody(), async (req, res) => {
    const { wallet, value } = await readHostRequest(
      req,
      ['endpoint'],
      (body) => {
        const endpoint = body['endpoint'];
        if (typeof endpoint !== 'string' || endpoint === '' || endpoint.length > 2048) throw new ApiError('invalid_request', 'endpoint is not a string');
        return endpoint;
      },
      store,
    );
    await store.removeSubscription(wallet, value);
    noContent(res);
  });

  const originOf = (body: Record<string, unknown>): string => {
    const origin = body['origin'];
    if (typeof origin !== 'string' || canonicalOrigin(origin, { allowLoopbackHttp: true }) === null) {
      throw new ApiError('invalid_request', 'origin is not a canonical origin');
    }
    return origin;
  };

  const knownApp = async (origin: string): Promise<AppRecord> => {
    const app = await registry.get(origin);
    if (!app) throw new ApiError('unknown_app', 'no registered app has this origin');
    return app;
  };

  router.post('/api/host/visits', rawBody(), async (req, res) => {
    const { wallet, value: origin } = await readHostRequest(req, ['origin'], originOf, store);
    const app = await knownApp(origin);
    await store.recordVisit(app.appId, wallet);
    noContent(res);
  });

  router.post('/api/host/mutes', rawBody(), async (req, res) => {
    const { wallet, value } = await readHostRequest(
      req,
      ['origin', 'muted'],
      (body) => {
        if (typeof body['muted'] !== 'boolean') throw new ApiError('invalid_request', 'muted is not a boolean');
        return { origin: originOf(body), muted: body['muted'] };
      },
      store,
    );
    const app = await knownApp(value.origin);
    await store.setMuted(app.appId, wallet, value.muted);
    noContent(res);
  });

  /** The VAPID public key a host passes to pushManager.subscribe as applicationServerKey. */
  router.get('/api/host/vapid-public-key', (_req, res) => {
    if (!config.vapid) throw new ApiError('push_not_enabled', 'no VAPID keys configured');
    res.type('application/json').send(JSON.stringify({ publicKey: config.vapid.publicKey }));
  });

  return router;
}

