import { Agent } from 'node:https';
import webpush from 'web-push';
import type { Config } from '../config.js';
import type { StoredSubscription } from './types.js';

/**
 * What a push service's answer means for one (notification, subscription):
 *  - `sent`: 2xx, the push service accepted it;
 *  - `gone`: 404 or 410, the subscription no longer exists and is deleted;
 *  - `retry`: 429, 5xx, a time-out or a network failure: sent again by the job's retry;
 *  - `rejected`: any other answer (400, 401, 403, 413, ...): not sent again.
 */
export type SendOutcome = 'sent' | 'gone' | 'retry' | 'rejected';

/** Messages are kept by the push service for a day when the device is offline. */
const TTL_SECONDS = 24 * 3600;

/**
 * A VAPID JWT (RFC 8292) is valid for any message to one push service until it expires, and
 * signing one costs more than encrypting a message: one per push service origin is signed with
 * a 12-hour expiry and reused for an hour.
 */
const VAPID_EXPIRY_S = 12 * 3600;
const VAPID_REUSE_MS = 3600_000;

/**
 * Sends one encrypted Web Push message (RFC 8030, aes128gcm RFC 8291, VAPID RFC 8292) with
 * the `web-push` library. The Topic is the notification id: a push service replaces a
 * still-queued copy with the same topic, so a resend after a lost answer does not show twice.
 */
export class PushSender {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 256 });
  private readonly vapidHeaders = new Map<string, { authorization: string; until: number }>();

  constructor(
    private readonly vapid: NonNullable<Config['vapid']>,
    private readonly timeoutMs: number,
  ) {}

  async send(subscription: StoredSubscription, payload: string, notificationId: string): Promise<{ outcome: SendOutcome; status: number | null; detail?: string }> {
    try {
      const response = await webpush.sendNotification(subscription, payload, {
        headers: { Authorization: this.authorizationFor(subscription.endpoint) },
        TTL: TTL_SECONDS,
        topic: notificationId.slice(0, 32),
        urgency: 'normal',
        contentEncoding: 'aes128gcm',
        timeout: this.timeoutMs,
        agent: this.agent,
      });
      return { outcome: 'sent', status: response.statusCode };
    } catch (error) {
      const status = (error as { statusCode?: unknown }).statusCode;
      if (typeof status === 'number') {
        if (status === 404 || status === 410) return { outcome: 'gone', status };
        if (status === 429 || status >= 500) return { outcome: 'retry', status };
        return { outcome: 'rejected', status, detail: String((error as { body?: unknown }).body ?? '').slice(0, 200) };
      }
      const message = error instanceof Error ? error.message : String(error);
      // Encryption refused the subscription's keys: sending again cannot help.
      if (/p256dh|auth|public key|Payload/i.test(message)) return { outcome: 'rejected', status: null, detail: message };
      return { outcome: 'retry', status: null, detail: message };
    }
  }

  /** `vapid t=<JWT>, k=<public key>` for the endpoint's push service (audience: its origin). */
  private authorizationFor(endpoint: string): string {
    const audience = new URL(endpoint).origin;
    const now = Date.now();
    const cached = this.vapidHeaders.get(audience);
    if (cached && cached.until > now) return cached.authorization;
    const { subject, publicKey, privateKey } = this.vapid;
    const headers = webpush.getVapidHeaders(audience, subject, publicKey, privateKey, 'aes128gcm', Math.floor(now / 1000) + VAPID_EXPIRY_S);
    if (this.vapidHeaders.size >= 1000) this.vapidHeaders.clear();
    this.vapidHeaders.set(audience, { authorization: headers.Authorization, until: now + VAPID_REUSE_MS });
    return headers.Authorization;
  }

  close(): void {
    this.agent.destroy();
  }
}
