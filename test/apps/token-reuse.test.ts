import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { Harness, signToken } from '../helpers/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await Harness.start();
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await h.stop();
});

const listWith = (token: string) => h.post('/api/matchmaking', JSON.stringify({ operation: 'listTickets' }), { authorization: `Bearer ${token}` });

/** Makes the server read the app record again now (its cache otherwise holds it 2 s). */
const refreshServerCache = (origin: string) => h.server.services.registry.fetch(origin);

describe('a verified token reused for its lifetime', () => {
  it('is accepted again', async () => {
    const app = await h.registerApp();
    const token = await app.token();
    expect((await listWith(token)).status).toBe(200);
    expect((await listWith(token)).status).toBe(200);
  });

  it('stops working at once when the app is no longer verified', async () => {
    const app = await h.registerApp();
    const token = await app.token();
    expect((await listWith(token)).status).toBe(200);
    await h.registry.update(app.origin, { verified: false });
    await refreshServerCache(app.origin);
    expect(await listWith(token)).toMatchObject({ status: 403, body: { error: 'app_not_verified' } });
  });

  it('stops working when the app key is rotated', async () => {
    const app = await h.registerApp();
    const token = await app.token();
    expect((await listWith(token)).status).toBe(200);
    await h.registry.update(app.origin, { appKey: generateKeyPair().publicKey });
    await refreshServerCache(app.origin);
    expect(await listWith(token)).toMatchObject({ status: 401, body: { error: 'unauthenticated' } });
  });

  it('stops working once it expires (30 s leeway)', async () => {
    const app = await h.registerApp();
    const now = Math.floor(Date.now() / 1000);
    const token = await signToken(app.secretKey, app.origin, { claims: { iat: now, exp: now + 5 } });
    expect((await listWith(token)).status).toBe(200);
    vi.useFakeTimers({ toFake: ['Date'], now: (now + 5 + 29) * 1000 });
    expect((await listWith(token)).status).toBe(200);
    vi.setSystemTime((now + 5 + 31) * 1000);
    expect(await listWith(token)).toMatchObject({ status: 401, body: { error: 'unauthenticated' } });
  });
});
