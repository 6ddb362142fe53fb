import type { Json } from './json.js';

/** The spec's matchmaking resources (interface.md section 2A), shared by server and client. */
export type { Json };

export interface RatingPolicy {
  initial: number;
  widenPerSecond: number;
  max?: number;
}

export interface Queue {
  key: string;
  size: 2;
  rating?: RatingPolicy;
}

export interface TicketInput<P extends Json = Json> {
  id: string;
  player: string;
  queue: Queue;
  payload: P;
  rating?: number;
  expiresAt?: number;
}

export interface Admission<P extends Json = Json> {
  input: TicketInput<P>;
  createdAt: number;
  payload: P;
}

export interface Match<P extends Json = Json> {
  id: string;
  queue: string;
  matchedAt: number;
  payload: P;
  tickets: [Admission<P>, Admission<P>];
}

export type Ticket<P extends Json = Json> =
  | { id: string; state: 'waiting'; admission: Admission<P> }
  | { id: string; state: 'matched'; admission: Admission<P>; match: Match<P> }
  | { id: string; state: 'cancelled'; admission: Admission<P> | null; reason: 'requested' | 'expired'; cancelledAt: number };

export interface TicketQuery {
  player?: string;
  id?: string;
  cursor?: string;
}

export interface TicketPage<P extends Json = Json> {
  tickets: Array<Ticket<P>>;
  nextCursor: string | null;
}

export type MatchmakingOperation = 'createTicket' | 'listTickets' | 'cancelTicket';

export const MATCHMAKING_ERROR_CODES = [
  'invalid_argument',
  'unauthenticated',
  'app_not_verified',
  'ticket_conflict',
  'queue_conflict',
  'unavailable',
] as const;
export type MatchmakingApiErrorCode = (typeof MATCHMAKING_ERROR_CODES)[number];

/** Limits of spec section 8, in UTF-8 bytes. */
export const LIMITS = {
  idBytes: 256,
  playerBytes: 256,
  queueKeyBytes: 512,
  payloadBytes: 16 * 1024,
  pageSize: 25,
  cursorChars: 512,
} as const;
