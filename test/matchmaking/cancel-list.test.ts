import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Harness, type TestApp } from '../helpers/harness.js';
import { ticket } from '../helpers/tickets.js';

let h: Harness;
let app: TestApp;
const T0 = 1_700_000_000_000;

beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.stop();
});
beforeEach(async () => {
  app = await h.registerApp();
  await h.setClock(app, T0);
});

const create = (input: unknown, as = app) => h.call(as, 'createTicket', input);
const cancel = (id: string, as = app) => h.call(as, 'cancelTicket', { id });
const list = (input?: unknown, as = app) => h.call(as, 'listTickets', input);

async function listAll(query: Record<string, unknown> = {}, as = app): Promise<any[]> {
  const tickets: any[] = [];
  let cursor: string | null | undefined;
  do {
    const res = await list(cursor ? { ...query, cursor } : query, as);
    expect(res.status).toBe(200);
    expect(res.body.tickets.length).toBeLessThanOrEqual(25);
    tickets.push(...res.body.tickets);
    cursor = res.body.nextCursor;
  } while (cursor);
  return tickets;
}

describe('cancelTicket', () => {
  it('cancels a waiting ticket (reason requested) and retries return the same outcome', async () => {
    const a = ticket();
    await create(a);
    await h.setClock(app, T0 + 7);
    const res = await cancel(a.id);
    expect(res.body).toEqual({ id: a.id, state: 'cancelled', admission: { input: a, createdAt: T0, payload: a.payload }, reason: 'requested', cancelledAt: T0 + 7 });
    await h.setClock(app, T0 + 99);
    expect((await cancel(a.id)).body).toEqual(res.body);
    expect((await create(a)).body).toEqual(res.body);
  });

  it('a cancelled ticket leaves the pool', async () => {
    const a = ticket();
    await create(a);
    await cancel(a.id);
    expect((await create(ticket())).body.state).toBe('waiting');
  });

  it('returns the matched ticket when pairing won, never waiting', async () => {
    const a = ticket();
    await create(a);
    const b = await create(ticket());
    const res = await cancel(a.id);
    expect(res.body.state).toBe('matched');
    expect(res.body.match).toEqual(b.body.match);
  });

  it('cancels with reason expired when the cutoff has passed', async () => {
    const a = ticket({ expiresAt: T0 + 10 });
    await create(a);
    await h.setClock(app, T0 + 10);
    expect((await cancel(a.id)).body).toMatchObject({ state: 'cancelled', reason: 'expired', cancelledAt: T0 + 10 });
  });

  it('records a permanent tombstone for an unknown ID', async () => {
    const res = await cancel('never-seen');
    expect(res.body).toEqual({ id: 'never-seen', state: 'cancelled', admission: null, reason: 'requested', cancelledAt: T0 });
    await h.setClock(app, T0 + 1);
    expect((await cancel('never-seen')).body).toEqual(res.body);
  });
});

describe('listTickets', () => {
  it('lists every ticket of the app, with no filter, matched and cancelled included, in creation order', async () => {
    const a = ticket({ player: 'p1' });
    const b = ticket({ player: 'p2' });
    const c = ticket({ player: 'p3', queue: { key: 'other', size: 2 } });
    await create(a);
    await create(b);
    await create(c);
    await cancel(c.id);
    await cancel('tomb');
    const all = await listAll();
    expect(all.map((t) => [t.id, t.state])).toEqual([
      [a.id, 'matched'],
      [b.id, 'matched'],
      [c.id, 'cancelled'],
      ['tomb', 'cancelled'],
    ]);
    // An absent input and an empty one are the same query.
    const absent = await list();
    expect(absent.body).toEqual((await list({})).body);
  });

  it('pages 25 at a time with cursors until nextCursor is null', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const t = ticket({ player: 'same-player' });
      ids.push(t.id);
      await create(t);
    }
    const first = await list();
    expect(first.body.tickets).toHaveLength(25);
    expect(typeof first.body.nextCursor).toBe('string');
    const all = await listAll();
    expect(all.map((t) => t.id)).toEqual(ids);
  });

  it('a page of exactly 25 remaining tickets ends with nextCursor null', async () => {
    for (let i = 0; i < 25; i++) await create(ticket({ player: 'p' }));
    const page = await list();
    expect(page.body.tickets).toHaveLength(25);
    expect(page.body.nextCursor).toBeNull();
  });

  it('filters by player and by id, combined, keeping filters across pages', async () => {
    const mine: string[] = [];
    for (let i = 0; i < 30; i++) {
      const t = ticket({ player: i % 2 === 0 ? 'alice' : 'bob', queue: { key: `q${i}`, size: 2 } });
      if (i % 2 === 0) mine.push(t.id);
      await create(t);
    }
    expect((await listAll({ player: 'alice' })).map((t) => t.id)).toEqual(mine);
    expect((await listAll({ player: 'alice', id: mine[3] })).map((t) => t.id)).toEqual([mine[3]]);
    const bobs = await listAll({ player: 'bob' });
    expect((await listAll({ player: 'alice', id: bobs[0].id }))).toEqual([]);
    expect((await listAll({ id: bobs[0].id })).map((t) => t.id)).toEqual([bobs[0].id]);
  });

  it('an unknown ID yields an empty page, not a cancellation', async () => {
    expect((await list({ id: 'nobody' })).body).toEqual({ tickets: [], nextCursor: null });
    expect((await list({ id: 'nobody' })).body).toEqual({ tickets: [], nextCursor: null });
    expect(await listAll()).toEqual([]);
  });

  it('a tombstone is found by ID and app-wide, never by a player filter', async () => {
    await cancel('tomb');
    expect((await list({ id: 'tomb' })).body.tickets).toHaveLength(1);
    expect((await listAll()).map((t) => t.id)).toEqual(['tomb']);
    // Even a later createTicket that names a player does not give it one.
    await create(ticket({ id: 'tomb', player: 'carol' }));
    expect((await list({ player: 'carol' })).body.tickets).toEqual([]);
    expect((await list({ player: 'carol', id: 'tomb' })).body.tickets).toEqual([]);
  });

  it('a traversal covers the tickets present at its first page; states are current when each page is read', async () => {
    const early: string[] = [];
    for (let i = 0; i < 30; i++) {
      const t = ticket({ player: 'p', expiresAt: T0 + 1000 });
      early.push(t.id);
      await create(t);
    }
    const first = await list();
    expect(first.body.tickets.every((t: any) => t.state === 'waiting')).toBe(true);
    await create(ticket({ player: 'late' })); // pairs with early[0]; is not part of this traversal
    await h.setClock(app, T0 + 1000); // the rest expire
    const second = await list({ cursor: first.body.nextCursor });
    expect(second.body.nextCursor).toBeNull();
    expect(second.body.tickets.map((t: any) => t.id)).toEqual(early.slice(25));
    expect(second.body.tickets.every((t: any) => t.state === 'cancelled' && t.reason === 'expired' && t.cancelledAt === T0 + 1000)).toBe(true);
    // A new traversal sees the late ticket and the pairing.
    const fresh = await listAll();
    expect(fresh).toHaveLength(31);
    expect(fresh[0].state).toBe('matched');
  });

  it('refuses a malformed, altered or truncated cursor, and one reused with other filters', async () => {
    for (let i = 0; i < 30; i++) await create(ticket({ player: 'p' }));
    const cursor: string = (await list({ player: 'p' })).body.nextCursor;
    for (const bad of ['x', cursor.slice(0, -2), `${cursor}A`, Buffer.from('1.2.abc').toString('base64url')]) {
      expect((await list({ player: 'p', cursor: bad })).body, bad).toEqual({ error: 'invalid_argument' });
    }
    expect((await list({ cursor })).status).toBe(400);
    expect((await list({ player: 'q', cursor })).status).toBe(400);
    expect((await list({ player: 'p', cursor })).status).toBe(200);
  });
});

describe('tenant isolation', () => {
  it('keeps tickets, IDs, queues and cursors of two apps apart', async () => {
    const other = await h.registerApp();
    await h.setClock(other, T0);
    const a = ticket({ id: 'shared-id', player: 'p1' });
    await create(a);
    // Same ID and queue key in another app: independent, and no cross-app pairing.
    const b = await create({ ...a, player: 'p2', payload: 'other app' }, other);
    expect(b.body.state).toBe('waiting');
    expect((await listAll({}, other)).map((t) => t.admission.input.payload)).toEqual(['other app']);
    expect((await listAll()).map((t) => t.admission.input.player)).toEqual(['p1']);
    await cancel('only-in-other', other);
    expect(await listAll({ id: 'only-in-other' })).toEqual([]);
    for (let i = 0; i < 30; i++) await create(ticket({ player: 'p' }));
    const cursor = (await list()).body.nextCursor;
    expect((await list({ cursor }, other)).body).toEqual({ error: 'invalid_argument' });
  });
});
