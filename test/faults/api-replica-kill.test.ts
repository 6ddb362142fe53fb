/**
 * Fault: one of two API replicas is killed with SIGKILL while both serve a concurrent load.
 * The other keeps answering, a client's identical retry of every request the dead replica
 * left unanswered succeeds on the survivor, and the final listing holds every ticket whose
 * creation was acknowledged, with the spec's invariants intact: a replica holds no state, and
 * a script that Redis ran is whole whatever happens to the process that sent it.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TicketInput } from '../../src/shared/matchmaking-types.js';
import { deleteKeys, testPrefix } from '../helpers/harness.js';
import { checkInvariants, formatViolations, type Observation } from '../helpers/invariants.js';
import { spawnApi, type SpawnedApi } from '../helpers/processes.js';
import { redisUrl } from '../setup/redis-url.js';
import { answered, listAll, operate, registerApp, type RegisteredApp, type Reply } from './support.js';

const WORKERS = 24;
/** Answers the victim gives before it is killed, and the survivor's successes required after. */
const BEFORE_KILL = 150;
const AFTER_KILL = 300;
/** A bound on the whole load, whatever happens. */
const MAX_REQUESTS = 4000;

describe('an API replica killed with SIGKILL in the middle of a load', () => {
  const prefix = testPrefix();
  let redis: Redis;
  let app: RegisteredApp;
  let apis: SpawnedApi[] = [];

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    app = await registerApp(redis, prefix, 'Replica Kill');
    const env = { REDIS_URL: redisUrl(), VERSUS_KEY_PREFIX: prefix, VERSUS_TEST_CLOCK: '1', LOG_LEVEL: 'silent' };
    const started = await Promise.allSettled([spawnApi(env), spawnApi(env)]);
    apis = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
  }, 60_000);

  afterAll(async () => {
    await Promise.all(apis.map((api) => api.stop()));
    if (redis) {
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
  }, 30_000);

  it('the other replica keeps serving; every acknowledged ticket is listed and the invariants hold', async () => {
    const token = await app.token();
    const [survivor, victim] = [apis[0]!, apis[1]!];
    const players = Array.from({ length: 30 }, (_, i) => `player-${i}`);
    const queues = [
      { key: 'duel-0', size: 2 as const },
      { key: 'duel-1', size: 2 as const },
      { key: 'ranked', size: 2 as const, rating: { initial: 50, widenPerSecond: 100, max: 400 } },
    ];

    interface Sent {
      server: 'survivor' | 'victim';
      operation: 'createTicket' | 'cancelTicket';
      input: TicketInput | { id: string };
      afterKill: boolean;
      reply: Reply;
    }
    const sent: Sent[] = [];
    const created: TicketInput[] = [];
    // `killed` turns true once the victim's exit was observed: a request sent after that cannot
    // have been answered by it. Requests sent between the signal and the exit may go either way.
    let killing = false;
    let killed = false;
    let counter = 0;
    const count = (predicate: (s: Sent) => boolean) => sent.filter(predicate).length;
    const done = () => sent.length >= MAX_REQUESTS || (killed && count((s) => s.server === 'survivor' && s.afterKill && answered(s.reply) && s.reply.status === 200) >= AFTER_KILL);

    async function request(server: 'survivor' | 'victim', operation: Sent['operation'], input: Sent['input']): Promise<Sent> {
      const afterKill = killed;
      const reply = await operate((server === 'survivor' ? survivor : victim).url, token, operation, input);
      const record = { server, operation, input, afterKill, reply };
      sent.push(record);
      return record;
    }

    async function worker(index: number): Promise<void> {
      for (let round = 0; !done(); round++) {
        // Like a load balancer that knows nothing of health: both replicas get requests throughout.
        const server = (index + round) % 2 === 0 ? 'survivor' : 'victim';
        const roll = Math.random();
        let operation: Sent['operation'] = 'createTicket';
        let input: Sent['input'];
        if (roll < 0.1 && created.length > 0) {
          input = created[Math.floor(Math.random() * created.length)]!; // an identical retry
        } else if (roll < 0.2 && created.length > 0) {
          operation = 'cancelTicket';
          input = { id: created[Math.floor(Math.random() * created.length)]!.id };
        } else {
          counter += 1;
          const queue = queues[counter % queues.length]!;
          const ticket: TicketInput = { id: `t-${counter}`, player: players[Math.floor(Math.random() * players.length)]!, queue, payload: { n: counter } };
          if (queue.rating) ticket.rating = 1000 + Math.floor(Math.random() * 600);
          created.push(ticket);
          input = ticket;
        }
        const record = await request(server, operation, input);
        if (!answered(record.reply)) {
          // No answer: the outcome is unknown. The client retries the identical request (spec:
          // never a new ID), on the replica that still answers.
          await request('survivor', operation, input);
        }
        if (!killing && count((s) => s.server === 'victim' && answered(s.reply)) >= BEFORE_KILL && count((s) => s.server === 'survivor') >= BEFORE_KILL) {
          killing = true;
          victim.process.once('exit', () => (killed = true));
          victim.process.kill('SIGKILL');
        }
      }
    }
    await Promise.all(Array.from({ length: WORKERS }, (_, i) => worker(i)));

    const exit = await victim.stop();
    expect(exit, 'the victim ended by a signal').toBeNull();
    expect(victim.process.signalCode).toBe('SIGKILL');
    expect(killed).toBe(true);

    // The survivor answered every request it got, before and after the kill, each with 200.
    const survivorReplies = sent.filter((s) => s.server === 'survivor');
    const survivorBad = survivorReplies.filter((s) => !answered(s.reply) || s.reply.status !== 200);
    expect(survivorBad.slice(0, 5), `survivor failures: ${survivorBad.length}`).toEqual([]);
    expect(survivorReplies.filter((s) => s.afterKill).length).toBeGreaterThanOrEqual(AFTER_KILL);
    // The victim answered until it died and nothing after its exit; the load went on across the kill.
    const victimReplies = sent.filter((s) => s.server === 'victim');
    expect(victimReplies.filter((s) => answered(s.reply)).length).toBeGreaterThanOrEqual(BEFORE_KILL);
    expect(victimReplies.filter((s) => s.afterKill && answered(s.reply))).toEqual([]);
    const unanswered = victimReplies.filter((s) => !answered(s.reply));
    expect(unanswered.length).toBeGreaterThan(0);
    expect(victimReplies.filter((s) => answered(s.reply) && s.reply.status !== 200)).toEqual([]);

    // Every acknowledged answer against the final state of the app.
    const listing = await listAll(survivor.url, token);
    const observations: Observation[] = sent.flatMap((s) =>
      answered(s.reply) ? [{ operation: s.operation, input: s.input, status: s.reply.status, body: s.reply.body, note: `${s.server}${s.afterKill ? ' after the kill' : ''}` }] : [],
    );
    const violations = checkInvariants(listing, observations);
    expect(violations, formatViolations(violations)).toEqual([]);

    const listed = new Set((listing as Array<{ id: string }>).map((t) => t.id));
    const acknowledged = sent.filter((s) => s.operation === 'createTicket' && answered(s.reply) && s.reply.status === 200).map((s) => s.input.id);
    expect(acknowledged.filter((id) => !listed.has(id))).toEqual([]);
    // Nothing is listed that no client sent.
    const everSent = new Set(sent.map((s) => s.input.id));
    expect([...listed].filter((id) => !everSent.has(id))).toEqual([]);
    const inFlight = unanswered.filter((s) => !s.afterKill).length;
    console.info(
      `replica kill: ${sent.length} requests (${survivorReplies.length} to the survivor, ${victimReplies.length} to the victim, ` +
        `${unanswered.length} unanswered by it and retried, ${inFlight} of them sent before its exit), ${listing.length} tickets listed`,
    );
  }, 60_000);
});
