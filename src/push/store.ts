import { createHash } from 'node:crypto';
import { bucketArgs, type RateLimit } from '../apps/limits.js';
import type { RedisClient } from '../redis/connection.js';
import type { Keys } from '../redis/keys.js';
import { ScriptRunner } from '../redis/scripts.js';
import { HOST_NONCE_TTL_MS, IDEMPOTENCY_TTL_S, MAX_SUBSCRIPTIONS_PER_WALLET, type PushJob, type StoredSubscription, VISIT_RETENTION_MS } from './types.js';

const DAY_MS = 86_400_000;

/** The push scripts in lua/ (each headed by its KEYS and ARGV), run by the shared ScriptRunner. */
const PUSH_SCRIPTS = [
  'pushVisit',
  'pushVisitedWithin',
  'pushAddSubscription',
  'pushRemoveSubscription',
  'pushDeleteIf',
  'pushAddWithTtl',
  'pushSnapshotStep',
  'pushChunkDone',
  'pushAccept',
] as const;
/** Lifetime of per-notification state (snapshot, delivered set) while a delivery may still run. */
const DELIVERY_STATE_TTL_S = 24 * 3600;
/** Kept this long after a notification finished, for late duplicates of its jobs. */
const FINISHED_GRACE_S = 300;

/** Short stable hash (base64url) used in key names and delivered sets. */
export function shortHash(text: string, chars = 22): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, chars);
}

/** The stored first answer of an idempotent send. */
export interface IdempotencyRecord {
  id: string;
  /** Fingerprint of the request (route and content): a reused key with other content is refused. */
  fp: string;
  /** `reserved` until the job is known to be enqueued; then the job is dropped from the record. */
  state: 'reserved' | 'queued';
  job?: PushJob;
}

/**
 * The push data in Redis: wallets (subscriptions, known marker, nonces: one hash tag per
 * wallet), an app's visitors and mutes, idempotency records and per-notification delivery
 * state (one hash tag per app). Every key name comes from Keys.
 */
export class PushStore {
  private readonly scripts = new ScriptRunner(PUSH_SCRIPTS);

  constructor(
    readonly redis: RedisClient,
    readonly keys: Keys,
    private readonly testClock: boolean,
  ) {}

  private get clockFlag(): string {
    return this.testClock ? '1' : '0';
  }

  // ---- wallets

  async markKnown(wallet: string): Promise<void> {
    await this.redis.set(this.keys.walletKnown(wallet), String(Date.now()), 'NX');
  }

  async isKnown(wallet: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.walletKnown(wallet))) === 1;
  }

  /** Remembers a host request's nonce for 120 s; false when it was seen already (a replay). */
  async claimNonce(wallet: string, nonce: string): Promise<boolean> {
    return (await this.redis.set(this.keys.walletNonce(wallet, nonce), '1', 'PX', HOST_NONCE_TTL_MS, 'NX')) === 'OK';
  }

  /**
   * Registers a subscription for a wallet. One subscription per endpoint: an endpoint registered
   * again replaces the earlier one, also when another wallet had registered it.
   */
  async addSubscription(wallet: string, subscription: StoredSubscription): Promise<void> {
    await this.markKnown(wallet);
    const json = JSON.stringify(subscription);
    const dropped = (await this.scripts.run(this.redis, 'pushAddSubscription',
      [this.keys.walletSubscriptions(wallet), this.keys.walletSubscriptionOrder(wallet)],
      [subscription.endpoint, json, Date.now(), MAX_SUBSCRIPTIONS_PER_WALLET],
    )) as string[];
    const previous = await this.redis.set(this.keys.endpointOwner(subscription.endpoint), wallet, 'GET');
    if (previous !== null && previous !== wallet) {
      await this.scripts.run(this.redis, 'pushRemoveSubscription', [this.keys.walletSubscriptions(previous), this.keys.walletSubscriptionOrder(previous)], [subscription.endpoint]);
    }
    for (const endpoint of dropped) await this.scripts.run(this.redis, 'pushDeleteIf', [this.keys.endpointOwner(endpoint)], [wallet]);
  }

  /** Removes a wallet's subscription of an endpoint (nothing when it has none). */
  async removeSubscription(wallet: string, endpoint: string): Promise<void> {
    await this.scripts.run(this.redis, 'pushRemoveSubscription', [this.keys.walletSubscriptions(wallet), this.keys.walletSubscriptionOrder(wallet)], [endpoint]);
    await this.scripts.run(this.redis, 'pushDeleteIf', [this.keys.endpointOwner(endpoint)], [wallet]);
  }

  /** Drops a subscription a push service answered 404/410 for, unless it was registered anew since. */
  async dropGoneSubscription(wallet: string, subscription: StoredSubscription): Promise<void> {
    const removed = await this.scripts.run(this.redis, 'pushRemoveSubscription',
      [this.keys.walletSubscriptions(wallet), this.keys.walletSubscriptionOrder(wallet)],
      [subscription.endpoint, JSON.stringify(subscription)],
    );
    if (removed === 1) await this.scripts.run(this.redis, 'pushDeleteIf', [this.keys.endpointOwner(subscription.endpoint)], [wallet]);
  }

  async subscriptions(wallet: string): Promise<StoredSubscription[]> {
    const all = await this.redis.hgetall(this.keys.walletSubscriptions(wallet));
    const result: StoredSubscription[] = [];
    for (const json of Object.values(all)) {
      try {
        result.push(JSON.parse(json) as StoredSubscription);
      } catch {
        // A record this version did not write: skipped.
      }
    }
    return result;
  }

  // ---- an app's users

  /** The wallet opened the app now (the app's clock). */
  async recordVisit(appId: string, wallet: string): Promise<void> {
    await this.markKnown(wallet);
    await this.scripts.run(this.redis, 'pushVisit', [this.keys.pushVisitors(appId), this.keys.testClock(appId)], [wallet, this.clockFlag, VISIT_RETENTION_MS]);
  }

  async visitedWithin(appId: string, wallet: string, days: number): Promise<boolean> {
    const within = await this.scripts.run(this.redis, 'pushVisitedWithin', [this.keys.pushVisitors(appId), this.keys.testClock(appId)], [wallet, days * DAY_MS, this.clockFlag]);
    return within === 1;
  }

  async setMuted(appId: string, wallet: string, muted: boolean): Promise<void> {
    if (muted) await this.redis.sadd(this.keys.pushMutes(appId), wallet);
    else await this.redis.srem(this.keys.pushMutes(appId), wallet);
  }

  /** For each wallet, whether it muted the app. */
  async mutedFlags(appId: string, wallets: string[]): Promise<boolean[]> {
    if (wallets.length === 0) return [];
    const flags = (await this.redis.smismember(this.keys.pushMutes(appId), ...wallets)) as number[];
    return flags.map((f) => f === 1);
  }

  // ---- idempotency

  async idempotencyRecord(appId: string, keyHash: string): Promise<IdempotencyRecord | null> {
    const text = await this.redis.get(this.keys.pushIdempotency(appId, keyHash));
    return text === null ? null : (JSON.parse(text) as IdempotencyRecord);
  }

  /** Stores the first answer before enqueueing; null when it was stored, else the record that won. */
  async reserveIdempotency(appId: string, keyHash: string, record: IdempotencyRecord): Promise<IdempotencyRecord | null> {
    const key = this.keys.pushIdempotency(appId, keyHash);
    const set = await this.redis.set(key, JSON.stringify(record), 'EX', IDEMPOTENCY_TTL_S, 'NX');
    if (set === 'OK') return null;
    return (await this.idempotencyRecord(appId, keyHash)) ?? record;
  }

  /**
   * For an app with a notification limit: takes a token and, for an idempotent send, stores its
   * first answer (`idempotency`), in one script. `answered`: the key already has an answer (no
   * token taken); `rateLimitedMs`: refused, nothing written.
   */
  async acceptLimited(
    appId: string,
    limit: RateLimit,
    idempotency: { keyHash: string; record: IdempotencyRecord } | null,
  ): Promise<{ accepted: true } | { answered: IdempotencyRecord } | { rateLimitedMs: number }> {
    const keys = [this.keys.notificationLimit(appId), this.keys.testClock(appId)];
    const args: Array<string | number> = [...bucketArgs(limit), this.clockFlag];
    if (idempotency) {
      keys.push(this.keys.pushIdempotency(appId, idempotency.keyHash));
      args.push(JSON.stringify(idempotency.record), IDEMPOTENCY_TTL_S);
    }
    const reply = (await this.scripts.run(this.redis, 'pushAccept', keys, args)) as [string, (string | number)?];
    if (reply[0] === 'answered') return { answered: JSON.parse(reply[1] as string) as IdempotencyRecord };
    if (reply[0] === 'rate_limited') return { rateLimitedMs: reply[1] as number };
    return { accepted: true };
  }

  /**
   * The job is enqueued: the record keeps only the answer. True when this call turned it from
   * reserved to queued (in one SET ... GET), which happens once per record however many
   * requests enqueued its job.
   */
  async markIdempotencyQueued(appId: string, keyHash: string, record: IdempotencyRecord): Promise<boolean> {
    const queued: IdempotencyRecord = { id: record.id, fp: record.fp, state: 'queued' };
    const before = (await this.redis.call('SET', this.keys.pushIdempotency(appId, keyHash), JSON.stringify(queued), 'XX', 'GET', 'KEEPTTL')) as string | null;
    return before !== null && (JSON.parse(before) as IdempotencyRecord).state === 'reserved';
  }

  // ---- delivery state (worker)

  /** For each endpoint hash, whether this notification was already settled for it. */
  async settledFlags(appId: string, notificationId: string, hashes: string[]): Promise<boolean[]> {
    if (hashes.length === 0) return [];
    const flags = (await this.redis.smismember(this.keys.pushSettled(appId, notificationId), ...hashes)) as number[];
    return flags.map((f) => f === 1);
  }

  /** Records, right after the push service answered, that this notification is settled for an endpoint. */
  async markSettled(appId: string, notificationId: string, hash: string): Promise<void> {
    await this.scripts.run(this.redis, 'pushAddWithTtl', [this.keys.pushSettled(appId, notificationId)], [hash, DELIVERY_STATE_TTL_S]);
  }

  /** A one-user notification is finished: its delivered set only needs to outlive late duplicates. */
  async finishUser(appId: string, notificationId: string): Promise<void> {
    await this.redis.expire(this.keys.pushSettled(appId, notificationId), FINISHED_GRACE_S);
  }

  /** One bounded step of a broadcast's audience snapshot; see SNAPSHOT_STEP. */
  async snapshotStep(appId: string, notificationId: string, days: number, pageSize: number): Promise<{ done: boolean; count: number }> {
    const [done, count] = (await this.scripts.run(this.redis, 'pushSnapshotStep',
      [this.keys.pushVisitors(appId), this.keys.pushAudience(appId, notificationId), this.keys.pushFanout(appId, notificationId), this.keys.testClock(appId)],
      [days * DAY_MS, pageSize, this.clockFlag, DELIVERY_STATE_TTL_S],
    )) as [number, number];
    return { done: done === 1, count };
  }

  /** Fan-out progress flags: chunks created (`added`), all chunks finished (`finished`). */
  async fanoutState(appId: string, notificationId: string): Promise<{ added: boolean; finished: boolean }> {
    const [added, finished] = await this.redis.hmget(this.keys.pushFanout(appId, notificationId), 'added', 'finished');
    return { added: added === '1', finished: finished === '1' };
  }

  async setChunksLeft(appId: string, notificationId: string, chunks: number): Promise<void> {
    await this.redis.hsetnx(this.keys.pushFanout(appId, notificationId), 'left', chunks);
  }

  async markChunksAdded(appId: string, notificationId: string): Promise<void> {
    await this.redis.hset(this.keys.pushFanout(appId, notificationId), 'added', '1');
  }

  async markFanoutFinished(appId: string, notificationId: string): Promise<void> {
    await this.redis.hset(this.keys.pushFanout(appId, notificationId), 'added', '1', 'finished', '1');
  }

  /** Wallets at ranks start..stop of a broadcast's snapshot. */
  async audienceSlice(appId: string, notificationId: string, start: number, stop: number): Promise<string[]> {
    return this.redis.zrange(this.keys.pushAudience(appId, notificationId), start, stop);
  }

  async chunkDone(appId: string, notificationId: string): Promise<number> {
    return (await this.scripts.run(this.redis, 'pushChunkDone',
      [this.keys.pushFanout(appId, notificationId), this.keys.pushAudience(appId, notificationId), this.keys.pushSettled(appId, notificationId)],
      [FINISHED_GRACE_S],
    )) as number;
  }
}
