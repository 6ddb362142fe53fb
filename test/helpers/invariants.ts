/**
 * Checks the matchmaking rules of interface.md (sections 2A, 3A, 4A) against a final,
 * settled app-wide listing and the responses recorded while the load ran.
 *
 * The listing and the responses are untrusted: malformed shapes are reported as violations,
 * never thrown, so the checker always returns a full report.
 */
import { isDeepStrictEqual } from 'node:util';

export type Rule =
  | 'status' // a recorded response was not HTTP 200
  | 'shape' // a ticket or response lacks the fields its state requires
  | 'duplicate-listing' // one ticket ID listed twice
  | 'missing' // a ticket seen in a response is absent from the listing
  | 'match-size' // a match without exactly 2 distinct tickets
  | 'one-match' // a ticket claimed by two matches, or a match ID shared by other tickets
  | 'match-identical' // the two tickets of a match return different match objects
  | 'match-membership' // a matched ticket is not one of its match's tickets, or its partner is not matched back
  | 'self-match' // both tickets of a match belong to one player
  | 'match-queue' // a match pairs tickets of other queues than match.queue
  | 'match-payload' // match or admission payloads differ from the waiting ticket's proposal
  | 'match-order' // the waiting (first) ticket is not the older one
  | 'admission' // a ticket's admission disagrees with its input or with its match entry
  | 'waiting-pair' // two compatible tickets of different players both left waiting
  | 'create-response' // a createTicket answer disagrees with the final state
  | 'cancel-response'; // a cancelTicket answer is 'waiting' or disagrees with the final state

export interface Violation {
  rule: Rule;
  message: string;
}

/** One request as sent and answered (body parsed from JSON, undefined when it was not JSON). */
export interface Observation {
  operation: 'createTicket' | 'cancelTicket' | 'listTickets' | string;
  input?: unknown;
  status: number;
  body: unknown;
  /** Free text to locate the request in a report (server, phase…). */
  note?: string;
}

export interface CheckOptions {
  /**
   * Check that no two tickets of different players are left waiting in one queue. Only
   * unrated tickets without `expiresAt` take part (for those, a later admission always pairs
   * with an earlier waiting one). Default true.
   */
  waitingPairs?: boolean;
  /** Report responses whose ticket is absent from the listing. Default true. */
  requireListed?: boolean;
}

type Loose = Record<string, any>;

const isObject = (value: unknown): value is Loose => typeof value === 'object' && value !== null && !Array.isArray(value);
const show = (value: unknown) => JSON.stringify(value);

function admissionOk(value: unknown): value is Loose {
  return (
    isObject(value) &&
    isObject(value['input']) &&
    typeof value['input']['id'] === 'string' &&
    typeof value['input']['player'] === 'string' &&
    isObject(value['input']['queue']) &&
    typeof value['input']['queue']['key'] === 'string' &&
    typeof value['createdAt'] === 'number' &&
    'payload' in value
  );
}

function ticketShape(ticket: unknown): string | null {
  if (!isObject(ticket) || typeof ticket['id'] !== 'string') return 'not an object with a string id';
  switch (ticket['state']) {
    case 'waiting':
      return admissionOk(ticket['admission']) ? null : 'waiting without a valid admission';
    case 'matched': {
      if (!admissionOk(ticket['admission'])) return 'matched without a valid admission';
      const match = ticket['match'];
      if (!isObject(match) || typeof match['id'] !== 'string' || !Array.isArray(match['tickets'])) return 'matched without a valid match';
      if (!match['tickets'].every(admissionOk)) return 'match holds an invalid admission';
      return null;
    }
    case 'cancelled':
      if (ticket['admission'] !== null && !admissionOk(ticket['admission'])) return 'cancelled with an invalid admission';
      if (ticket['reason'] !== 'requested' && ticket['reason'] !== 'expired') return `cancelled with reason ${show(ticket['reason'])}`;
      if (typeof ticket['cancelledAt'] !== 'number') return 'cancelled without cancelledAt';
      return null;
    default:
      return `unknown state ${show(ticket['state'])}`;
  }
}

function eligibleForWaitingPairs(admission: Loose): boolean {
  const input = admission['input'] as Loose;
  return input['rating'] === undefined && input['expiresAt'] === undefined && input['queue']['rating'] === undefined;
}

/**
 * Returns every violation found (an empty array when the rules hold).
 *
 * @param listing every ticket of the app, from a traversal of listTickets pages read after
 *   all recorded requests were answered
 * @param observations the recorded createTicket / cancelTicket / listTickets requests
 */
export function checkInvariants(listing: readonly unknown[], observations: readonly Observation[] = [], options: CheckOptions = {}): Violation[] {
  const violations: Violation[] = [];
  const report = (rule: Rule, message: string) => violations.push({ rule, message });

  // --- statuses -------------------------------------------------------------------------
  for (const o of observations) {
    if (o.status !== 200) {
      report('status', `${o.operation} ${show(o.input)} answered ${o.status} ${show(o.body)}${o.note ? ` (${o.note})` : ''}`);
    }
  }

  // --- the listing ----------------------------------------------------------------------
  const byId = new Map<string, Loose>();
  const position = new Map<string, number>();
  listing.forEach((ticket, index) => {
    const problem = ticketShape(ticket);
    if (problem !== null) {
      report('shape', `listed ticket #${index} ${show(ticket)}: ${problem}`);
      return;
    }
    const t = ticket as Loose;
    if (byId.has(t['id'])) {
      report('duplicate-listing', `ticket ${t['id']} is listed more than once`);
      return;
    }
    byId.set(t['id'], t);
    position.set(t['id'], index);
    if (t['admission'] !== null && t['admission']['input']['id'] !== t['id']) {
      report('admission', `ticket ${t['id']} carries the admission of ${show(t['admission']['input']['id'])}`);
    }
    if (t['state'] === 'waiting' && !isDeepStrictEqual(t['admission']['payload'], t['admission']['input']['payload'])) {
      report('admission', `waiting ticket ${t['id']} accepted payload ${show(t['admission']['payload'])} differs from its proposal`);
    }
  });

  // --- matches --------------------------------------------------------------------------
  // ticket ID -> match IDs claiming it (from every match object seen in the listing)
  const claims = new Map<string, Set<string>>();
  // match ID -> listed tickets carrying it
  const holders = new Map<string, Loose[]>();
  for (const t of byId.values()) {
    if (t['state'] !== 'matched') continue;
    const match = t['match'] as Loose;
    const list = holders.get(match['id']) ?? [];
    list.push(t);
    holders.set(match['id'], list);
    for (const admission of match['tickets'] as Loose[]) {
      const id = admission['input']['id'] as string;
      const set = claims.get(id) ?? new Set<string>();
      set.add(match['id']);
      claims.set(id, set);
    }
  }
  for (const [ticketId, matchIds] of claims) {
    if (matchIds.size > 1) report('one-match', `ticket ${ticketId} is claimed by matches ${[...matchIds].join(', ')}`);
    const listed = byId.get(ticketId);
    if (listed === undefined) {
      report('match-membership', `ticket ${ticketId} is in match ${[...matchIds].join(', ')} but is not listed`);
    } else if (listed['state'] !== 'matched') {
      report('match-membership', `ticket ${ticketId} is in match ${[...matchIds].join(', ')} but is ${listed['state']}`);
    }
  }

  for (const [matchId, tickets] of holders) {
    const first = tickets[0]!;
    const match = first['match'] as Loose;
    const entries = match['tickets'] as Loose[];
    const entryIds = entries.map((a) => a['input']['id'] as string);

    if (entries.length !== 2 || new Set(entryIds).size !== 2) {
      report('match-size', `match ${matchId} holds ${show(entryIds)}; expected 2 distinct tickets`);
    }
    if (tickets.length > 2) {
      report('one-match', `match ID ${matchId} is carried by ${tickets.length} tickets: ${tickets.map((t) => t['id']).join(', ')}`);
    }
    for (const t of tickets.slice(1)) {
      if (!isDeepStrictEqual(t['match'], match)) {
        report('match-identical', `tickets ${first['id']} and ${t['id']} return different objects for match ${matchId}: ${show(match)} vs ${show(t['match'])}`);
      }
    }
    for (const t of tickets) {
      const entry = entries.find((a) => a['input']['id'] === t['id']);
      if (entry === undefined) {
        report('match-membership', `ticket ${t['id']} carries match ${matchId}, which does not contain it (${show(entryIds)})`);
      } else if (!isDeepStrictEqual(entry, t['admission'])) {
        report('admission', `ticket ${t['id']}'s admission differs from its entry in match ${matchId}`);
      }
    }
    for (const id of entryIds) {
      if (!tickets.some((t) => t['id'] === id) && byId.get(id)?.['state'] === 'matched') {
        report('match-membership', `match ${matchId} contains ${id}, whose own match is ${show(byId.get(id)!['match']['id'])}`);
      }
    }
    if (entries.length !== 2) continue;

    const [waiting, joining] = entries as [Loose, Loose];
    if (waiting['input']['player'] === joining['input']['player']) {
      report('self-match', `match ${matchId} pairs player ${show(waiting['input']['player'])} with itself (${entryIds.join(', ')})`);
    }
    for (const a of entries) {
      if (a['input']['queue']['key'] !== match['queue']) {
        report('match-queue', `match ${matchId} in queue ${show(match['queue'])} holds ${a['input']['id']} of queue ${show(a['input']['queue']['key'])}`);
      }
    }
    if (!isDeepStrictEqual(match['payload'], waiting['input']['payload'])) {
      report('match-payload', `match ${matchId} payload ${show(match['payload'])} is not the waiting ticket's proposal ${show(waiting['input']['payload'])}`);
    }
    for (const a of entries) {
      if (!isDeepStrictEqual(a['payload'], match['payload'])) {
        report('match-payload', `in match ${matchId}, ${a['input']['id']} accepted ${show(a['payload'])} instead of ${show(match['payload'])}`);
      }
    }
    const wPos = position.get(waiting['input']['id']);
    const jPos = position.get(joining['input']['id']);
    if (waiting['createdAt'] > joining['createdAt'] || (wPos !== undefined && jPos !== undefined && wPos > jPos)) {
      report('match-order', `match ${matchId}: waiting ${waiting['input']['id']} is younger than joining ${joining['input']['id']}`);
    }
    if (typeof match['matchedAt'] !== 'number' || match['matchedAt'] < joining['createdAt']) {
      report('match-order', `match ${matchId}: matchedAt ${show(match['matchedAt'])} precedes the joining admission`);
    }
  }

  // --- waiting pairs --------------------------------------------------------------------
  if (options.waitingPairs ?? true) {
    const waitingByQueue = new Map<string, Map<string, string>>(); // queue -> player -> a ticket ID
    for (const t of byId.values()) {
      if (t['state'] !== 'waiting' || !eligibleForWaitingPairs(t['admission'])) continue;
      const queue = t['admission']['input']['queue']['key'] as string;
      const players = waitingByQueue.get(queue) ?? new Map<string, string>();
      players.set(t['admission']['input']['player'], t['id']);
      waitingByQueue.set(queue, players);
    }
    for (const [queue, players] of waitingByQueue) {
      if (players.size > 1) {
        report('waiting-pair', `queue ${show(queue)} has compatible waiting tickets of different players: ${[...players.values()].join(', ')}`);
      }
    }
  }

  // --- responses against the final state ------------------------------------------------
  const requireListed = options.requireListed ?? true;
  for (const o of observations) {
    if (o.status !== 200 || (o.operation !== 'createTicket' && o.operation !== 'cancelTicket')) continue;
    const rule: Rule = o.operation === 'createTicket' ? 'create-response' : 'cancel-response';
    const where = `${o.operation} ${show(o.input)}${o.note ? ` (${o.note})` : ''}`;
    const problem = ticketShape(o.body);
    if (problem !== null) {
      report('shape', `${where} answered ${show(o.body)}: ${problem}`);
      continue;
    }
    const body = o.body as Loose;
    const sentId = isObject(o.input) ? o.input['id'] : undefined;
    if (body['id'] !== sentId) {
      report(rule, `${where} answered ticket ${show(body['id'])}`);
      continue;
    }
    if (o.operation === 'cancelTicket' && body['state'] === 'waiting') {
      report('cancel-response', `${where} answered 'waiting'`);
    }
    if (o.operation === 'createTicket' && body['admission'] !== null && !isDeepStrictEqual(body['admission']['input'], o.input)) {
      report('create-response', `${where} admitted a different input ${show(body['admission']['input'])}`);
    }
    const final = byId.get(body['id']);
    if (final === undefined) {
      if (requireListed) report('missing', `${where}: ticket ${body['id']} is not in the listing`);
      continue;
    }
    if (!isDeepStrictEqual(body['admission'], final['admission'])) {
      report(rule, `${where}: answered admission ${show(body['admission'])} differs from the final ${show(final['admission'])}`);
    }
    switch (body['state']) {
      case 'matched':
        if (final['state'] !== 'matched') {
          report(rule, `${where} answered matched (${body['match']['id']}) but the ticket is finally ${final['state']}`);
        } else if (!isDeepStrictEqual(body['match'], final['match'])) {
          report(rule, `${where} answered match ${body['match']['id']} but the final match is ${final['match']['id']} (or differs)`);
        }
        break;
      case 'cancelled':
        if (final['state'] !== 'cancelled') {
          report(rule, `${where} answered cancelled but the ticket is finally ${final['state']}`);
        } else if (body['reason'] !== final['reason'] || body['cancelledAt'] !== final['cancelledAt']) {
          report(rule, `${where} answered cancelled ${body['reason']}@${body['cancelledAt']} but finally ${final['reason']}@${final['cancelledAt']}`);
        }
        break;
      case 'waiting':
        // Fine for createTicket: it may have matched or been cancelled since.
        break;
    }
  }

  return violations;
}

/** Formats violations for an assertion message. */
export function formatViolations(violations: readonly Violation[], limit = 40): string {
  const lines = violations.slice(0, limit).map((v) => `[${v.rule}] ${v.message}`);
  if (violations.length > limit) lines.push(`… and ${violations.length - limit} more`);
  return lines.join('\n');
}
