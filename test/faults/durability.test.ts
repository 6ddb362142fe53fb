/**
 * Fault: Redis is killed with SIGKILL in the middle of a load of admissions and cancels, and
 * started again on the same data directory. With `appendonly yes` and `appendfsync always`,
 * Redis writes and fsyncs the AOF before it replies, so every admission and cancellation the
 * API acknowledged (200) must be there afterwards, in the state the client was told (a
 * ticket answered matched is matched to the same partner, cancelled stays cancelled). The API
 * itself is not restarted.
 *
 * With `appendfsync everysec` (Redis's default, and docker-compose.yml's) this test would not
 * hold: see the README, "Reliability".
 */
import { describe, expect, it } from 'vitest';
import type { TicketInput } from '../../src/shared/matchmaking-types.js';
import { checkInvariants, formatViolations, type Observation } from '../helpers/invariants.js';
import { answered, listAll, operate, ownRedisSuite, send, waitUntil, type Reply } from './support.js';

const WORKERS = 16;
/** Acknowledged admissions before the kill. */
const BEFORE_KILL = 300;

describe('Redis killed with SIGKILL and restarted on its AOF (appendfsync always)', () => {
  const own = ownRedisSuite('Durable', ['--appendonly', 'yes', '--appendfsync', 'always']);

  it('keeps every acknowledged admission and cancellation, in the state it was acknowledged in', async () => {
    const token = await own.app.token();
    const queues = [
      { key: 'duel-0', size: 2 as const },
      { key: 'duel-1', size: 2 as const },
      { key: 'ranked', size: 2 as const, rating: { initial: 100, widenPerSecond: 50 } },
    ];
    const sent: Array<{ operation: 'createTicket' | 'cancelTicket'; input: { id: string }; reply: Reply }> = [];
    const created: TicketInput[] = [];
    let counter = 0;
    let killing: Promise<void> | null = null;
    const acknowledgedAdmissions = () => sent.filter((s) => s.operation === 'createTicket' && answered(s.reply) && s.reply.status === 200).length;

    // Each worker sends until it gets an answer other than 200: the kill ends the load.
    async function worker(): Promise<void> {
      for (;;) {
        let operation: 'createTicket' | 'cancelTicket' = 'createTicket';
        let input: { id: string };
        if (Math.random() < 0.15 && created.length > 0) {
          operation = 'cancelTicket';
          input = { id: created[Math.floor(Math.random() * created.length)]!.id };
        } else {
          counter += 1;
          const queue = queues[counter % queues.length]!;
          const ticket: TicketInput = { id: `t-${counter}`, player: `player-${Math.floor(Math.random() * 25)}`, queue, payload: { n: counter } };
          if (queue.rating) ticket.rating = 1000 + Math.floor(Math.random() * 400);
          created.push(ticket);
          input = ticket;
        }
        const reply = await operate(own.api.url, token, operation, input);
        sent.push({ operation, input, reply });
        if (!answered(reply) || reply.status !== 200) return;
        if (killing === null && acknowledgedAdmissions() >= BEFORE_KILL) killing = own.server.signal('SIGKILL');
      }
    }
    await Promise.all(Array.from({ length: WORKERS }, () => worker()));
    await killing;

    // Every request was answered: 200, or 503 unavailable once Redis was gone.
    const others = sent.filter((s) => !answered(s.reply) || (s.reply.status !== 200 && !(s.reply.status === 503 && JSON.stringify(s.reply.body) === '{"error":"unavailable"}')));
    expect(others.slice(0, 5)).toEqual([]);
    expect(sent.filter((s) => answered(s.reply) && s.reply.status === 503).length).toBeGreaterThan(0);

    // The same directory, the same port; the API reconnects by itself.
    await own.server.restart();
    await waitUntil('/readyz to answer 200 after the restart', async () => {
      const reply = await send(own.api.url, '/readyz', { method: 'GET' });
      return answered(reply) && reply.status === 200;
    });
    const listing = await listAll(own.api.url, token);

    // Every acknowledged answer is in the listing and agrees with it.
    const observations: Observation[] = sent.flatMap((s) =>
      answered(s.reply) && s.reply.status === 200 ? [{ operation: s.operation, input: s.input, status: 200, body: s.reply.body }] : [],
    );
    const violations = checkInvariants(listing, observations);
    expect(violations, formatViolations(violations)).toEqual([]);
    const listed = new Set((listing as Array<{ id: string }>).map((t) => t.id));
    const acknowledged = observations.map((o) => (o.input as { id: string }).id);
    expect(acknowledged.filter((id) => !listed.has(id))).toEqual([]);
    expect(acknowledgedAdmissions()).toBeGreaterThanOrEqual(BEFORE_KILL);

    // And it serves again: a new admission is accepted.
    const after = await operate(own.api.url, token, 'createTicket', { id: 'after-restart', player: 'late', queue: queues[0], payload: null });
    expect(answered(after) && after.status).toBe(200);
    console.info(
      `durability: ${acknowledgedAdmissions()} admissions and ${observations.length - acknowledgedAdmissions()} cancels acknowledged before the kill, ` +
        `${sent.length - observations.length} answered 503; ${listing.length} tickets after the restart`,
    );
  }, 60_000);
});
