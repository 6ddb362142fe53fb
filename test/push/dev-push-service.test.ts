import { Agent } from 'node:https';
import webpush from 'web-push';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeNotification, DevPushService, receiverKeys } from '../../src/push/dev-push-service.js';
import { testCertificate } from './support/push-service.js';

const SUBJECT = 'mailto:dev@versus.localhost';
const WALLET = '3eQB63U9CRjYtPUZdZZgN3SWrSe7CLVSDY6MLxnjLdgt';

describe('the loopback push service of versus dev', () => {
  const vapid = webpush.generateVAPIDKeys();
  const lines: string[] = [];
  let service: DevPushService;
  let agent: Agent;

  beforeAll(async () => {
    const certificate = testCertificate();
    service = await DevPushService.start({ certificate, vapid: { publicKey: vapid.publicKey, subject: SUBJECT }, print: (line) => lines.push(line) });
    agent = new Agent({ ca: certificate.cert });
  });
  afterAll(async () => {
    agent.destroy();
    await service.close();
  });

  /** Sends as the worker does (web-push, aes128gcm, VAPID); resolves with the status and the line printed for it. */
  async function send(subscription: { endpoint: string; keys: { p256dh: string; auth: string } }, payload: string, keys = vapid, subject = SUBJECT) {
    const printed = lines.length;
    const status = await webpush
      .sendNotification(subscription, payload, { vapidDetails: { subject, ...keys }, contentEncoding: 'aes128gcm', TTL: 60, agent })
      .then((res) => res.statusCode, (error: { statusCode?: number }) => error.statusCode ?? -1);
    expect(lines.length).toBe(printed + 1);
    return { status, line: lines[lines.length - 1]! };
  }

  it('verifies, decrypts and prints a notification for the wallet it subscribed, answering 201', async () => {
    const subscription = service.subscribe(WALLET);
    expect(subscription.endpoint).toMatch(new RegExp(`^${service.url}/push/[0-9a-f-]{36}$`));
    expect(service.hostEntry).toBe(`127.0.0.1:${service.port}`);
    const payload = JSON.stringify({ id: 'n1', title: 'Chess Club: Your move', body: 'Alice played e4', url: 'https://chess.example/games/42', origin: 'https://chess.example' });
    expect(await send(subscription, payload)).toEqual({
      status: 201,
      line: `to wallet ${WALLET}: "Chess Club: Your move" "Alice played e4" (opens https://chess.example/games/42)`,
    });
  });

  it('refuses another VAPID key or subject (401), another subscription\'s keys (400) and an unknown endpoint (404), saying why', async () => {
    const subscription = service.subscribe(WALLET);
    const other = webpush.generateVAPIDKeys();
    const path = new URL(subscription.endpoint).pathname;
    expect(await send(subscription, '{}', other)).toEqual({ status: 401, line: `refused POST ${path}: 401 VAPID: k is not the configured VAPID public key` });
    expect(await send(subscription, '{}', vapid, 'mailto:someone@else.example')).toMatchObject({ status: 401, line: expect.stringMatching(new RegExp(`^refused POST ${path}: 401 VAPID: .*sub`)) });
    const stranger = receiverKeys();
    expect(await send({ endpoint: subscription.endpoint, keys: stranger.keys }, '{}')).toMatchObject({ status: 400, line: expect.stringMatching(new RegExp(`^refused POST ${path}: 400 does not decrypt`)) });
    const unknown = `${service.url}/push/00000000-0000-4000-8000-000000000000`;
    expect(await send({ endpoint: unknown, keys: stranger.keys }, '{}')).toEqual({ status: 404, line: 'refused POST /push/00000000-0000-4000-8000-000000000000: 404 no such subscription' });
    // No printed line carries a key.
    for (const secret of [vapid.publicKey, vapid.privateKey, other.publicKey, subscription.keys.p256dh, subscription.keys.auth, stranger.keys.p256dh]) {
      expect(lines.join('\n')).not.toContain(secret);
    }
  });

  it('prints text as one safe line: quotes and control characters escaped; other payloads as quoted text', () => {
    const text = JSON.stringify({ id: 'n2', title: 'A "quote"\u001b[2J', body: 'two\nlines\u202e', url: 'https://x.example/a"b' });
    expect(describeNotification(WALLET, text)).toBe(`to wallet ${WALLET}: "A \\"quote\\"\\u001b[2J" "two\\nlines\\u202e" (opens https://x.example/a\\"b)`);
    expect(describeNotification(WALLET, 'plain\u0007')).toBe(`to wallet ${WALLET}: "plain\\u0007"`);
  });
});
