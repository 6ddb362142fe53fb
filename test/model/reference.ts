/**
 * A pure reference model of spec section A (matchmaking), written from the spec and DESIGN.md
 * "Matchmaking details the spec leaves open", for one app. It shares no logic with src/: it
 * keeps every ticket in a plain array and answers each operation the obvious way, so that a
 * disagreement with the server points at the server (or at this file, which is short enough
 * to check by reading).
 *
 * Observation points of expiry (DESIGN.md: `cancelledAt` is the time of the read, pairing
 * attempt or cancel that observed the cutoff): a createTicket retry observes that ticket; a
 * new admission that is not itself past its cutoff observes every waiting ticket of its queue;
 * a listTickets page observes the tickets on it; a cancel observes its ticket.
 */
import type { Json, Queue, TicketInput } from '../../src/shared/matchmaking-types.js';

export const PAGE_SIZE = 25;

/** Key-order-free JSON: equal values give equal text (spec: key order does not matter). */
export function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${sortedJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

interface ModelMatch {
  id: string;
  queue: string;
  matchedAt: number;
  waiting: ModelTicket;
  joining: ModelTicket;
}

interface ModelTicket {
  id: string;
  seq: number;
  /** null for a tombstone: a cancellation of an unknown ID. */
  input: TicketInput | null;
  createdAt: number;
  state: 'waiting' | 'matched' | 'cancelled';
  match?: ModelMatch;
  reason?: 'requested' | 'expired';
  cancelledAt?: number;
}

export type ModelReply = { status: 200; body: Json } | { status: 409; body: { error: 'ticket_conflict' | 'queue_conflict' } };

/** Where a traversal of listTickets stands: its snapshot and the last sequence returned. */
export interface Traversal {
  player?: string;
  id?: string;
  snapshot: number;
  after: number;
}

export interface ModelPage {
  tickets: Json[];
  next: Traversal | null;
}

function policyOf(queue: Queue): string {
  return sortedJson(queue.rating === undefined ? { size: queue.size } : { size: queue.size, rating: queue.rating });
}

export class ReferenceApp {
  private readonly tickets: ModelTicket[] = [];
  private readonly policies = new Map<string, string>();
  private seq = 0;
  private matches = 0;

  private find(id: string): ModelTicket | undefined {
    return this.tickets.find((t) => t.id === id);
  }

  /** IDs the model knows, with whether each is a tombstone. */
  known(): Array<{ id: string; input: TicketInput | null }> {
    return this.tickets.map((t) => ({ id: t.id, input: t.input }));
  }

  private expire(t: ModelTicket, now: number): void {
    const cutoff = t.input?.expiresAt;
    if (t.state === 'waiting' && cutoff !== undefined && cutoff <= now) {
      t.state = 'cancelled';
      t.reason = 'expired';
      t.cancelledAt = now;
    }
  }

  private compatible(waiting: ModelTicket, joining: TicketInput, now: number): boolean {
    const w = waiting.input!;
    if (waiting.state !== 'waiting' || w.queue.key !== joining.queue.key || w.player === joining.player) return false;
    if (w.expiresAt !== undefined && now >= w.expiresAt) return false;
    if ((w.rating === undefined) !== (joining.rating === undefined)) return false;
    if (w.rating === undefined || joining.rating === undefined) return true;
    const policy = w.queue.rating!;
    let tolerance = policy.initial + policy.widenPerSecond * ((now - waiting.createdAt) / 1000);
    if (policy.max !== undefined) tolerance = Math.min(policy.max, tolerance);
    return Math.abs(joining.rating - w.rating) <= tolerance;
  }

  createTicket(input: TicketInput, now: number): ModelReply {
    const existing = this.find(input.id);
    if (existing) {
      if (existing.input === null) return this.ok(existing);
      if (sortedJson(existing.input) !== sortedJson(input)) return { status: 409, body: { error: 'ticket_conflict' } };
      this.expire(existing, now);
      return this.ok(existing);
    }
    const policy = policyOf(input.queue);
    const fixed = this.policies.get(input.queue.key);
    if (fixed !== undefined && fixed !== policy) return { status: 409, body: { error: 'queue_conflict' } };
    this.policies.set(input.queue.key, policy);

    const ticket: ModelTicket = { id: input.id, seq: ++this.seq, input, createdAt: now, state: 'waiting' };
    this.tickets.push(ticket);
    if (input.expiresAt !== undefined && input.expiresAt <= now) {
      ticket.state = 'cancelled';
      ticket.reason = 'expired';
      ticket.cancelledAt = now;
      return this.ok(ticket);
    }
    for (const t of this.tickets) if (t.input?.queue.key === input.queue.key) this.expire(t, now);
    // The oldest compatible waiting ticket wins (the array is in admission order).
    const partner = this.tickets.find((t) => t !== ticket && t.input !== null && this.compatible(t, input, now));
    if (partner) {
      const match: ModelMatch = { id: `model-match-${++this.matches}`, queue: input.queue.key, matchedAt: now, waiting: partner, joining: ticket };
      partner.state = ticket.state = 'matched';
      partner.match = ticket.match = match;
    }
    return this.ok(ticket);
  }

  cancelTicket(id: string, now: number): ModelReply {
    let ticket = this.find(id);
    if (!ticket) {
      ticket = { id, seq: ++this.seq, input: null, createdAt: now, state: 'cancelled', reason: 'requested', cancelledAt: now };
      this.tickets.push(ticket);
      return this.ok(ticket);
    }
    this.expire(ticket, now);
    if (ticket.state === 'waiting') {
      ticket.state = 'cancelled';
      ticket.reason = 'requested';
      ticket.cancelledAt = now;
    }
    return this.ok(ticket);
  }

  /** A first page (`from` absent) or the next page of a traversal. */
  listTickets(filter: { player?: string; id?: string }, now: number, from?: Traversal): ModelPage {
    const snapshot = from ? from.snapshot : this.seq;
    const after = from ? from.after : 0;
    const matching = this.tickets.filter(
      (t) =>
        t.seq > after &&
        t.seq <= snapshot &&
        (filter.id === undefined || t.id === filter.id) &&
        // A tombstone has no player: a player filter never finds it.
        (filter.player === undefined || t.input?.player === filter.player),
    );
    const page = matching.slice(0, PAGE_SIZE);
    for (const t of page) this.expire(t, now);
    const next = matching.length > PAGE_SIZE ? { ...filter, snapshot, after: page[page.length - 1]!.seq } : null;
    return { tickets: page.map((t) => this.render(t)), next };
  }

  private ok(t: ModelTicket): ModelReply {
    return { status: 200, body: this.render(t) };
  }

  private admission(t: ModelTicket): Json {
    const input = t.input as unknown as Json;
    // The joining side of a match plays with the waiting ticket's conditions.
    const accepted = t.match && t.match.joining === t ? t.match.waiting.input!.payload : t.input!.payload;
    return { input, createdAt: t.createdAt, payload: accepted };
  }

  render(t: ModelTicket): Json {
    if (t.state === 'waiting') return { id: t.id, state: 'waiting', admission: this.admission(t) };
    if (t.state === 'matched') {
      const m = t.match!;
      return {
        id: t.id,
        state: 'matched',
        admission: this.admission(t),
        match: { id: m.id, queue: m.queue, matchedAt: m.matchedAt, payload: m.waiting.input!.payload, tickets: [this.admission(m.waiting), this.admission(m.joining)] },
      };
    }
    return { id: t.id, state: 'cancelled', admission: t.input === null ? null : this.admission(t), reason: t.reason!, cancelledAt: t.cancelledAt! };
  }
}
