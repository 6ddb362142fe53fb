import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptMessage } from './support/push-service.js';
import { PushWorld, waitFor } from './support/env.js';

/** `versus serve --role all`: the API and the worker in one process (what `versus dev` runs). */
let world: PushWorld;

beforeAll(async () => {
  world = await PushWorld.start();
});
afterAll(async () => {
  await world?.stop();
});

describe('role all', () => {
  it('accepts and delivers in one process; /readyz covers the database and the queue', async () => {
    const both = await world.startWorker({}, 'all');
    const ready = await fetch(`${both.url}/readyz`);
    expect({ status: ready.status, body: await ready.json() }).toEqual({ status: 200, body: { status: 'ready' } });
    const app = await world.harness.registerApp({ name: 'Solo' });
    const { wallet, subscription } = await world.user(app);
    const response = await fetch(`${both.url}/api/push`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await app.token()}` },
      body: JSON.stringify({ to: wallet.address, title: 'all', body: 'in one' }),
    });
    expect(response.status).toBe(202);
    const { id } = (await response.json()) as { id: string };
    const message = await waitFor('the delivery', () => world.service.messagesFor(subscription.token)[0]);
    expect(JSON.parse(decryptMessage(message.body, subscription))).toMatchObject({ id, title: 'Solo: all', body: 'in one' });
  });
});
