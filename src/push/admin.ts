import type { AppRecord, AppRegistry } from '../apps/registry.js';
import { MAX_WINDOW_DAYS } from './types.js';

/** Operator policies of notifications (`versus apps mute`, `versus apps audience`). */

export class AdminError extends Error {}

/** A window in whole days, 1 to 365. */
export function parseDays(text: string | undefined, flag: string): number {
  if (text === undefined || !/^\d{1,4}$/.test(text) || Number(text) < 1 || Number(text) > MAX_WINDOW_DAYS) {
    throw new AdminError(`${flag} must be a whole number of days from 1 to ${MAX_WINDOW_DAYS}`);
  }
  return Number(text);
}

/** `apps mute O [--off]`: the API answers push_muted (403) for the app's sends while muted. */
export async function setPushMuted(registry: AppRegistry, origin: string, muted: boolean): Promise<AppRecord> {
  if (!(await registry.update(origin, { pushMuted: muted }))) throw new AdminError(`no app ${origin}`);
  return (await registry.fetch(origin))!;
}

/**
 * `apps audience O --recent-days N [--user-days N]`: the broadcast audience is the wallets that
 * opened the app within N days and did not mute it; `--user-days` is notifyUser's window
 * (default 90; unchanged when omitted).
 */
export async function setAudience(registry: AppRegistry, origin: string, recentDays: number, userDays?: number): Promise<AppRecord> {
  const change: Partial<AppRecord> = { audienceDays: recentDays };
  if (userDays !== undefined) change.userDays = userDays;
  if (!(await registry.update(origin, change))) throw new AdminError(`no app ${origin}`);
  return (await registry.fetch(origin))!;
}
