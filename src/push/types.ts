/**
 * Shapes and limits shared by the push API (src/push/routes.ts) and the worker
 * (src/push/worker.ts). A job carries everything the worker needs, so the worker never reads
 * app records: what was accepted is what is delivered.
 */

/** BullMQ queue name (keys live under Keys.bullPrefix()). */
export const PUSH_QUEUE = 'push';

/** Title and body limits in characters (code points) after trimming; path limit in UTF-8 bytes. */
export const TITLE_MAX_CHARS = 120;
export const BODY_MAX_CHARS = 1000;
export const PATH_MAX_BYTES = 2048;

/**
 * Largest plaintext of one Web Push message: push services take 4096 bytes of body, and an
 * aes128gcm body adds an 86-byte header, a padding delimiter and a 16-byte tag (RFC 8188/8291).
 */
export const MAX_PUSH_PAYLOAD_BYTES = 4096 - 86 - 1 - 16;

/** Windows are whole days; visits older than the longest window are pruned. */
export const MAX_WINDOW_DAYS = 365;
export const VISIT_RETENTION_MS = (MAX_WINDOW_DAYS + 1) * 86_400_000;

/** Subscriptions kept per wallet; registering one more drops the oldest. */
export const MAX_SUBSCRIPTIONS_PER_WALLET = 20;

/** Host request freshness and replay memory (DESIGN.md "Notifications"). */
export const HOST_AUD = 'service-host';
export const HOST_SIGNED_AT_SKEW_MS = 60_000;
export const HOST_NONCE_TTL_MS = 120_000;

/** Idempotency records are kept this long. */
export const IDEMPOTENCY_TTL_S = 24 * 3600;

/** What the worker delivers: the encrypted JSON payload and where it goes. */
interface JobBase {
  /** The notification id answered with 202; also the Web Push Topic. */
  id: string;
  appId: string;
  origin: string;
  /** The plaintext JSON `{"id","title","body","url","origin"}` encrypted for every subscription. */
  payload: string;
}

export interface UserJob extends JobBase {
  kind: 'user';
  wallet: string;
}

export interface BroadcastJob extends JobBase {
  kind: 'broadcast';
  /** Audience window in days, from the app record at acceptance. */
  days: number;
}

/** One slice of a broadcast's audience snapshot: ranks start..stop inclusive. */
export interface ChunkJob extends JobBase {
  kind: 'chunk';
  start: number;
  stop: number;
}

export type PushJob = UserJob | BroadcastJob | ChunkJob;

/** A browser PushSubscription as stored (keys base64url without padding). */
export interface StoredSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}
