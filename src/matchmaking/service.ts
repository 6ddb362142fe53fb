import type { RateLimit } from '../apps/limits.js';
import { LIMITS } from '../shared/matchmaking-types.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { MatchmakingStore } from './store.js';
import type { ValidRequest } from './validation.js';

/** A matchmaking answer: JSON text of the Ticket or TicketPage, a conflict code, or the app's admission limit's refusal. */
export type MatchmakingResult = { body: string } | { error: 'ticket_conflict' | 'queue_conflict' } | { rateLimitedMs: number };

/**
 * Runs one validated matchmaking operation for one app. `admissionLimit` (the app's, null for
 * none) is taken only by a createTicket that admits a new ID, never by a retry, list or cancel.
 */
export async function runOperation(store: MatchmakingStore, appId: string, request: ValidRequest, admissionLimit: RateLimit | null = null): Promise<MatchmakingResult> {
  switch (request.operation) {
    case 'createTicket': {
      const outcome = await store.createTicket(appId, request.ticket, admissionLimit);
      if ('ticket' in outcome) return { body: outcome.ticket };
      return outcome.conflict === 'rate_limited' ? { rateLimitedMs: outcome.retryAfterMs } : { error: outcome.conflict };
    }
    case 'cancelTicket':
      return { body: await store.cancelTicket(appId, request.id) };
    case 'listTickets': {
      const { player, id, cursor } = request.query;
      const scope = { appId, player, id };
      const position = cursor === undefined ? { snapshot: '', after: '0' } : decodeCursor(scope, cursor);
      const page = await store.listTickets(appId, { player, id, ...position }, LIMITS.pageSize);
      const nextCursor = page.nextAfter === null ? 'null' : JSON.stringify(encodeCursor(scope, { snapshot: page.snapshot, after: page.nextAfter }));
      return { body: `{"tickets":[${page.tickets.join(',')}],"nextCursor":${nextCursor}}` };
    }
  }
}
