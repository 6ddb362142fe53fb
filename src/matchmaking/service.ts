import { LIMITS } from '../shared/matchmaking-types.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { MatchmakingStore } from './store.js';
import type { ValidRequest } from './validation.js';

/** A matchmaking answer: JSON text of the Ticket or TicketPage, or a conflict code. */
export type MatchmakingResult = { body: string } | { error: 'ticket_conflict' | 'queue_conflict' };

/** Runs one validated matchmaking operation for one app. */
export async function runOperation(store: MatchmakingStore, appId: string, request: ValidRequest): Promise<MatchmakingResult> {
  switch (request.operation) {
    case 'createTicket': {
      const outcome = await store.createTicket(appId, request.ticket);
      return 'ticket' in outcome ? { body: outcome.ticket } : { error: outcome.conflict };
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
