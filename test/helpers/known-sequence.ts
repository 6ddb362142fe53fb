import { expect } from 'vitest';
import type { Harness, TestApp } from './harness.js';
import { ratedQueue, ticket } from './tickets.js';

export const T0 = 1_700_000_000_000;

/** What `playKnownSequence` leaves behind, counted by hand. */
export const KNOWN = {
  events: { admissions: 11, matches: 1, cancellations: 1, expirations: 5, tombstones: 1 },
  tickets: { waiting: 3, matched: 2, cancelled: 6, requested: 1, expired: 5, tombstones: 1 },
  /** Queues with waiting tickets, most waiting first then by name; at the final clock. */
  queues: [
    { queue: 'arena', waiting: 1, pastCutoff: 0 },
    { queue: 'duel', waiting: 1, pastCutoff: 1 },
    { queue: 'ranked', waiting: 1, pastCutoff: 0 },
  ],
  queuesKnown: 6,
  ticketsStored: 12,
} as const;

/**
 * A known sequence through the API, with every kind of event, each checked as it happens:
 *  - duel: a1 waits (cutoff T0+1000), a2 matches it;
 *  - blitz: a3 waits and is cancelled at the client's request;
 *  - arena: a4 and a5 (one player, cutoff T0+500) wait; at T0+600, a6's admission retires both
 *    (2 expirations) and a6 waits;
 *  - late: a7 is admitted past its cutoff (an expiration);
 *  - a cancel of an unknown ID (a tombstone);
 *  - solo: a8 (cutoff T0+700) waits; at T0+800 a listing finds it expired;
 *  - ranked (rated): a9 (cutoff T0+900) waits; at T0+1000 its cancel finds it expired; a10 waits;
 *  - duel: a11 (cutoff T0+5000) waits; the clock ends at T0+6000 with nothing reaching it, so it
 *    is still waiting, past its cutoff.
 * Refusals (ticket_conflict, queue_conflict) and an identical retry along the way count nothing.
 */
export async function playKnownSequence(h: Harness, app: TestApp): Promise<void> {
  const create = async (input: unknown, state: string) => {
    const res = await h.call(app, 'createTicket', input);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.state).toBe(state);
    return res.body;
  };
  const cancel = async (id: string, reason: string) => {
    const res = await h.call(app, 'cancelTicket', { id });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: 'cancelled', reason });
  };
  const duel = { key: 'duel', size: 2 as const };

  await h.setClock(app, T0);
  const a1 = ticket({ player: 'p1', queue: duel, expiresAt: T0 + 1000 });
  await create(a1, 'waiting');
  await create(ticket({ player: 'p2', queue: duel }), 'matched');
  await create(a1, 'matched');
  expect((await h.call(app, 'createTicket', { ...a1, payload: { other: true } })).body).toEqual({ error: 'ticket_conflict' });
  expect((await h.call(app, 'createTicket', ticket({ queue: ratedQueue('duel', { initial: 1, widenPerSecond: 1 }) }))).body).toEqual({ error: 'queue_conflict' });

  const a3 = ticket({ player: 'p3', queue: { key: 'blitz', size: 2 } });
  await create(a3, 'waiting');
  await cancel(a3.id, 'requested');

  const arena = { key: 'arena', size: 2 as const };
  await create(ticket({ player: 'p4', queue: arena, expiresAt: T0 + 500 }), 'waiting');
  await create(ticket({ player: 'p4', queue: arena, expiresAt: T0 + 500 }), 'waiting');
  await h.setClock(app, T0 + 600);
  await create(ticket({ player: 'p6', queue: arena }), 'waiting');

  await create(ticket({ player: 'p7', queue: { key: 'late', size: 2 }, expiresAt: T0 + 100 }), 'cancelled');
  await cancel('never-admitted', 'requested');

  const a8 = ticket({ player: 'p8', queue: { key: 'solo', size: 2 }, expiresAt: T0 + 700 });
  await create(a8, 'waiting');
  await h.setClock(app, T0 + 800);
  const page = await h.call(app, 'listTickets');
  expect(page.body.tickets.find((t: { id: string }) => t.id === a8.id)).toMatchObject({ state: 'cancelled', reason: 'expired' });

  const ranked = ratedQueue('ranked', { initial: 10, widenPerSecond: 1 });
  const a9 = ticket({ player: 'p9', queue: ranked, rating: 1500, expiresAt: T0 + 900 });
  await create(a9, 'waiting');
  await h.setClock(app, T0 + 1000);
  await cancel(a9.id, 'expired');
  await create(ticket({ player: 'p10', queue: ranked, rating: 1500 }), 'waiting');

  await create(ticket({ player: 'p11', queue: duel, expiresAt: T0 + 5000 }), 'waiting');
  await h.setClock(app, T0 + 6000);
}
