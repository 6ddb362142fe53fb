import { createHash } from 'node:crypto';

/**
 * Every Redis key Versus writes is built here (the Lua half of the layout is
 * lua/includes/keys.lua, which appends suffixes to an app's scope).
 *
 * One app's data share the hash tag `{<appId>}`, so one app lives in one cluster slot and
 * one script can touch all of it atomically, while apps spread over the cluster.
 */
export function appIdOf(origin: string): string {
  return createHash('sha256').update(origin).digest('base64url').slice(0, 16);
}

export class Keys {
  constructor(readonly prefix: string) {}

  /** Set of registered app origins. */
  appsIndex(): string {
    return `${this.prefix}:apps`;
  }

  /** Hash: one app's verified record. */
  appRecord(origin: string): string {
    return `${this.prefix}:app:{${appIdOf(origin)}}`;
  }

  /** Prefix of every matchmaking key of one app; KEYS[1] of the matchmaking scripts. */
  appScope(appId: string): string {
    return `${this.prefix}:{${appId}}:`;
  }

  /** Test-only frozen clock of one app (ms), read by the scripts when VERSUS_TEST_CLOCK=1. */
  testClock(appId: string): string {
    return `${this.appScope(appId)}clock`;
  }

  /** Hash of one ticket (used by tests and tools that inspect storage). */
  ticket(appId: string, ticketId: string): string {
    return `${this.appScope(appId)}t:${ticketId}`;
  }

  /** Pattern matching every key under this prefix (cleanup in tests and tools). */
  everything(): string {
    return `${this.prefix}:*`;
  }
}
