import type { AppRecord, AppRegistry } from './registry.js';

/**
 * Per-app rate limits, set by the operator (`versus apps limits`) and kept in the app record.
 * They are enforced in Redis (lua/includes/ratelimit.lua, GCRA: a token bucket of `burst`
 * tokens that gains one token every `periodMs / count`), so every replica shares one bucket
 * per app and limit. No limit is the default.
 */

/** `count` requests per `periodMs`, at most `burst` at once. */
export interface RateLimit {
  count: number;
  periodMs: number;
  burst: number;
}

/** null: unlimited. */
export interface AppLimits {
  /** createTicket calls that admit a new ticket ID. */
  admissions: RateLimit | null;
  /** Accepted notifyUser and broadcast sends (not idempotent replays). */
  notifications: RateLimit | null;
}

export const NO_LIMITS: AppLimits = { admissions: null, notifications: null };

export const MAX_LIMIT_COUNT = 1_000_000;

const UNITS = { s: 1000, min: 60_000, h: 3_600_000 } as const;
type Unit = keyof typeof UNITS;

export class LimitError extends Error {}

/** `N/s`, `N/min` or `N/h` (N a whole number, 1 to 1,000,000), or `off` (null). */
export function parseRate(text: string, flag: string): { count: number; periodMs: number } | null {
  if (text === 'off') return null;
  const match = /^(\d{1,7})\/(s|min|h)$/.exec(text);
  const count = match ? Number(match[1]) : 0;
  if (!match || count < 1 || count > MAX_LIMIT_COUNT) {
    throw new LimitError(`${flag} must be N/s, N/min or N/h with N a whole number from 1 to ${MAX_LIMIT_COUNT}, or off`);
  }
  return { count, periodMs: UNITS[match[2] as Unit] };
}

export function parseBurst(text: string, flag: string): number {
  if (!/^\d{1,7}$/.test(text) || Number(text) < 1 || Number(text) > MAX_LIMIT_COUNT) {
    throw new LimitError(`${flag} must be a whole number from 1 to ${MAX_LIMIT_COUNT}`);
  }
  return Number(text);
}

/** `10/s`, `600/min`, …: the rate as the operator wrote it. */
export function formatRate(limit: RateLimit): string {
  const unit = (Object.keys(UNITS) as Unit[]).find((u) => UNITS[u] === limit.periodMs);
  return unit ? `${limit.count}/${unit}` : `${limit.count}/${limit.periodMs}ms`;
}

/** One line per limit kind: `10/s (burst 20)` or `off`. */
export function describeLimit(limit: RateLimit | null): string {
  return limit === null ? 'off' : `${formatRate(limit)} (burst ${limit.burst})`;
}

/** The limits as `versus apps show` prints them. */
export function shownLimits(limits: AppLimits): Record<keyof AppLimits, { rate: string; burst: number } | null> {
  const one = (limit: RateLimit | null) => (limit === null ? null : { rate: formatRate(limit), burst: limit.burst });
  return { admissions: one(limits.admissions), notifications: one(limits.notifications) };
}

/**
 * A limit change as the CLI flags give it. `rate`: undefined leaves the limit's rate as it is,
 * null removes the limit. `burst`: with a new rate it defaults to the rate's count (one
 * period's worth); given alone it changes the burst of the current limit.
 */
export interface LimitChange {
  rate?: { count: number; periodMs: number } | null;
  burst?: number;
}

/** The change one kind's flags ask for (`--admissions`, `--admission-burst`); undefined: none. */
export function changeOf(rate: string | undefined, burst: string | undefined, what: string): LimitChange | undefined {
  if (rate === undefined && burst === undefined) return undefined;
  const change: LimitChange = {};
  if (rate !== undefined) change.rate = parseRate(rate, `--${what}s`);
  if (burst !== undefined) change.burst = parseBurst(burst, `--${what}-burst`);
  return change;
}

/** Applies one change; `what` names the limit in messages (`admission`, `notification`). */
export function changeLimit(current: RateLimit | null, change: LimitChange, what: string): RateLimit | null {
  if (change.rate === null) {
    if (change.burst !== undefined) throw new LimitError(`--${what}-burst cannot be set with --${what}s off`);
    return null;
  }
  if (change.rate !== undefined) return { ...change.rate, burst: change.burst ?? change.rate.count };
  if (change.burst === undefined) return current;
  if (current === null) throw new LimitError(`no ${what} limit to change the burst of: set --${what}s N/s too`);
  return { ...current, burst: change.burst };
}

/** Arguments of the Redis half (ratelimit.lua): µs between tokens (at least 1) and the burst. */
export function bucketArgs(limit: RateLimit): [string, string] {
  return [String(Math.max(1, Math.round((limit.periodMs * 1000) / limit.count))), String(limit.burst)];
}

/** A limit as stored in the app record's hash: JSON, or "" for none. */
export function encodeLimit(limit: RateLimit | null): string {
  return limit === null ? '' : JSON.stringify({ count: limit.count, periodMs: limit.periodMs, burst: limit.burst });
}

/** A stored limit; "" (or a value this version cannot read) is no limit. */
export function decodeLimit(text: string | undefined): RateLimit | null {
  if (!text) return null;
  try {
    const { count, periodMs, burst } = JSON.parse(text) as Record<string, unknown>;
    const positive = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 1;
    return positive(count) && positive(periodMs) && positive(burst) ? { count, periodMs, burst } : null;
  } catch {
    return null;
  }
}

/**
 * `versus apps limits O ...`: changes the app's limits (each kind only when its flags are
 * given). Every replica applies them within its registry cache time (2 s).
 */
export async function setLimits(
  registry: AppRegistry,
  origin: string,
  change: { admissions?: LimitChange; notifications?: LimitChange },
): Promise<AppRecord> {
  const current = await registry.fetch(origin);
  if (!current) throw new LimitError(`no app ${origin}`);
  if (!change.admissions && !change.notifications) return current;
  const limits = current.limits ?? NO_LIMITS;
  const next: AppLimits = {
    admissions: change.admissions ? changeLimit(limits.admissions, change.admissions, 'admission') : limits.admissions,
    notifications: change.notifications ? changeLimit(limits.notifications, change.notifications, 'notification') : limits.notifications,
  };
  if (!(await registry.update(origin, { limits: next }))) throw new LimitError(`no app ${origin}`);
  return (await registry.fetch(origin))!;
}
