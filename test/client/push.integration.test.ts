import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notifyAudience, notifyUser, PushError } from '../../src/client/index.js';
import type { TestApp } from '../helpers/harness.js';
import { PushWorld, waitFor } from '../push/support/env.js';
import { decryptMessage } from '../push/support/push-service.js';
import { Wallet } from '../push/support/wallet.js';
import { isolateClientEnv } from './support.js';

/** The notification client against the real API, Redis, a worker and a loopback push service. */
let world: PushWorld;
let app: TestApp;

beforeAll(async () => {
  world = await PushWorld.start();
  app = await world.harness.registerApp({ name: 'Client Club' });
  await world.startWorker();
});
afterAll(async () => {
  await world?.stop();
});
isolateClientEnv();

const apiUrl = () => world.harness.url;

async function refusal(promise: Promise<unknown>): Promise<{ code: string; status: number | null }> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PushError);
  return { code: (error as PushError).code, status: (error as PushError).status };
}

describe('notification client against the real service', () => {
  it('notifyUser with SERVICE_APP_KEY: accepted, delivered encrypted with the app name on the title', async () => {
    process.env['SERVICE_APP_KEY'] = app.secretKey;
    const { wallet, subscription } = await world.user(app);
    const receipt = await notifyUser({ origin: app.origin, apiUrl: apiUrl(), to: wallet.address, title: ' Your turn ', body: 'Bob moved', path: '/play' });
    expect(Object.keys(receipt)).toEqual(['id']);
    const [message] = await waitFor('delivery', () => {
      const messages = world.service.messagesFor(subscription.token);
      return messages.length > 0 ? messages : false;
    });
    expect(JSON.parse(decryptMessage(message!.body, subscription))).toEqual({
      id: receipt.id,
      title: 'Client Club: Your turn',
      body: 'Bob moved',
      url: `${app.origin}/play`,
      origin: app.origin,
    });
  });

  it('legacy mode with only SERVICE_PUSH_KEY: accepted for one user and for the audience', async () => {
    process.env['SERVICE_PUSH_KEY'] = app.secretKey;
    const { wallet } = await world.user(app);
    expect((await notifyUser({ origin: app.origin, apiUrl: apiUrl(), to: wallet.address, title: 'Legacy', body: 'works' })).id).toEqual(expect.any(String));
    await world.harness.registry.update(app.origin, { audienceDays: 30 });
    await world.harness.server.services.registry.fetch(app.origin);
    expect((await notifyAudience({ origin: app.origin, apiUrl: apiUrl(), title: 'Everyone', body: 'new season' })).id).toEqual(expect.any(String));
    await world.harness.registry.update(app.origin, { audienceDays: null });
    await world.harness.server.services.registry.fetch(app.origin);
  });

  it('an idempotency key makes a retry answer the first id', async () => {
    process.env['SERVICE_APP_KEY'] = app.secretKey;
    const { wallet } = await world.user(app);
    const send = () => notifyUser({ origin: app.origin, apiUrl: apiUrl(), to: wallet.address, title: 'Once', body: 'only', idempotencyKey: 'retry-1' });
    expect((await send()).id).toBe((await send()).id);
  });

  it('surfaces every service refusal with its code and status', async () => {
    process.env['SERVICE_APP_KEY'] = app.secretKey;
    const stranger = new Wallet();
    expect(await refusal(notifyUser({ origin: app.origin, apiUrl: apiUrl(), to: stranger.address, title: 'x', body: 'y' }))).toEqual({ code: 'unknown_user', status: 404 });
    const { wallet: elsewhere } = await world.user(null);
    expect(await refusal(notifyUser({ origin: app.origin, apiUrl: apiUrl(), to: elsewhere.address, title: 'x', body: 'y' }))).toEqual({ code: 'not_your_user', status: 403 });
    expect(await refusal(notifyAudience({ origin: app.origin, apiUrl: apiUrl(), title: 'x', body: 'y' }))).toEqual({ code: 'broadcast_not_configured', status: 409 });

    const silent = await world.harness.registerApp({ push: false });
    process.env['SERVICE_APP_KEY'] = silent.secretKey;
    expect(await refusal(notifyAudience({ origin: silent.origin, apiUrl: apiUrl(), title: 'x', body: 'y' }))).toEqual({ code: 'push_not_declared', status: 403 });

    const muted = await world.harness.registerApp({ pushMuted: true });
    process.env['SERVICE_APP_KEY'] = muted.secretKey;
    expect(await refusal(notifyAudience({ origin: muted.origin, apiUrl: apiUrl(), title: 'x', body: 'y' }))).toEqual({ code: 'push_muted', status: 403 });

    const unverified = await world.harness.registerApp({ verified: false });
    process.env['SERVICE_APP_KEY'] = unverified.secretKey;
    expect(await refusal(notifyAudience({ origin: unverified.origin, apiUrl: apiUrl(), title: 'x', body: 'y' }))).toEqual({ code: 'app_not_verified', status: 403 });

    process.env['SERVICE_APP_KEY'] = muted.secretKey; // a key that is not this app's
    expect(await refusal(notifyAudience({ origin: app.origin, apiUrl: apiUrl(), title: 'x', body: 'y' }))).toEqual({ code: 'unauthenticated', status: 401 });
  });
});
