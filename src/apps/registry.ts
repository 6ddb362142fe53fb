import type { RedisClient } from '../redis/connection.js';
import { appIdOf, Keys } from '../redis/keys.js';
import { type AppLimits, decodeLimit, encodeLimit } from './limits.js';

/** What the service knows of one app, stored when its manifest was verified. */
export interface AppRecord {
  origin: string;
  appId: string;
  name: string;
  /** base58 Ed25519 public key attested by the manifest; null: no matchmaking, no shared app JWT. */
  appKey: string | null;
  /** `capabilities.push`: false, true, or a legacy push public key (base58). */
  push: boolean | string;
  environment: 'production' | 'staging';
  /** false after a failed re-verification. */
  verified: boolean;
  /** The compact JWS the record was verified from. */
  manifest: string;
  verifiedAt: number;
  /** Operator mute of notifications (`versus apps mute`). */
  pushMuted: boolean;
  /** Broadcast audience window in days; null: broadcast not configured. */
  audienceDays: number | null;
  /** notifyUser window in days (default 90). */
  userDays: number;
  /**
   * Operator rate limits (`versus apps limits`, src/apps/limits.ts). Absent: no limits (the
   * default); a record read back has it only when at least one limit is set. `put` stores
   * what the record has, so a record rebuilt for an existing app must carry it over.
   */
  limits?: AppLimits;
}

export const DEFAULT_USER_DAYS = 90;

const CACHE_MS = 2000;

function encode(record: AppRecord): Record<string, string> {
  return {
    origin: record.origin,
    name: record.name,
    appKey: record.appKey ?? '',
    push: typeof record.push === 'string' ? `key:${record.push}` : record.push ? '1' : '0',
    environment: record.environment,
    verified: record.verified ? '1' : '0',
    manifest: record.manifest,
    verifiedAt: String(record.verifiedAt),
    pushMuted: record.pushMuted ? '1' : '0',
    audienceDays: record.audienceDays === null ? '' : String(record.audienceDays),
    userDays: String(record.userDays),
    admissionLimit: encodeLimit(record.limits?.admissions ?? null),
    notificationLimit: encodeLimit(record.limits?.notifications ?? null),
  };
}

function decode(fields: Record<string, string>): AppRecord | null {
  if (!fields['origin']) return null;
  const push = fields['push'] ?? '0';
  const limits: AppLimits = { admissions: decodeLimit(fields['admissionLimit']), notifications: decodeLimit(fields['notificationLimit']) };
  return {
    origin: fields['origin'],
    appId: appIdOf(fields['origin']),
    name: fields['name'] ?? '',
    appKey: fields['appKey'] ? fields['appKey'] : null,
    push: push.startsWith('key:') ? push.slice(4) : push === '1',
    environment: fields['environment'] === 'staging' ? 'staging' : 'production',
    verified: fields['verified'] === '1',
    manifest: fields['manifest'] ?? '',
    verifiedAt: Number(fields['verifiedAt'] ?? 0),
    pushMuted: fields['pushMuted'] === '1',
    audienceDays: fields['audienceDays'] ? Number(fields['audienceDays']) : null,
    userDays: fields['userDays'] ? Number(fields['userDays']) : DEFAULT_USER_DAYS,
    ...(limits.admissions !== null || limits.notifications !== null ? { limits } : {}),
  };
}

/**
 * App records in Redis with a short in-process cache: a request does not pay a round trip
 * for its app, and a change made with the CLI reaches every replica within CACHE_MS.
 */
export class AppRegistry {
  private readonly cache = new Map<string, { record: AppRecord | null; until: number }>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly cacheMs = CACHE_MS,
  ) {}

  async get(origin: string): Promise<AppRecord | null> {
    const now = Date.now();
    const hit = this.cache.get(origin);
    if (hit && hit.until > now) return hit.record;
    const record = decode(await this.redis.hgetall(this.keys.appRecord(origin)));
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(origin, { record, until: now + this.cacheMs });
    return record;
  }

  /** Reads Redis, bypassing the cache (operator tools). */
  async fetch(origin: string): Promise<AppRecord | null> {
    this.cache.delete(origin);
    return decode(await this.redis.hgetall(this.keys.appRecord(origin)));
  }

  async put(record: AppRecord): Promise<void> {
    await this.redis.hset(this.keys.appRecord(record.origin), encode(record));
    await this.redis.sadd(this.keys.appsIndex(), record.origin);
    this.cache.delete(record.origin);
  }

  /** Changes some fields of an existing record; false when the app is unknown. */
  async update(origin: string, change: Partial<Omit<AppRecord, 'origin' | 'appId'>>): Promise<boolean> {
    const current = await this.fetch(origin);
    if (!current) return false;
    await this.put({ ...current, ...change });
    return true;
  }

  async list(): Promise<AppRecord[]> {
    const origins = (await this.redis.smembers(this.keys.appsIndex())).sort();
    const records = await Promise.all(origins.map((origin) => this.fetch(origin)));
    return records.filter((r): r is AppRecord => r !== null);
  }
}
