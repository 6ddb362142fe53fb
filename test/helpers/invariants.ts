/**
 * Checks the matchmaking rules of interface.md (sections 2A, 3A, 4A) against a final,
 * settled app-wide listing of ONE app and the responses recorded while the load ran.
 *
 * The listing and the responses are untrusted: malformed shapes are reported as violations,
 * never thrown, so the checker always returns a full report.
 *
 * Time: every rule that depends on time reads the times the service itself recorded
 * (createdAt, matchedAt, cancelledAt) and assumes only that the app's clock never goes
 * backwards (Redis TIME, or a test clock moved forward only). A script that ran later never
 * records an earlier time, so "recorded at a later time" proves "ran later"; equal times prove
 * nothing and are never held against the service.
 */
import { isDeepStrictEqual } from 'node:util';

export type Rule =
  | 'status' // a recorded response was neither HTTP 200 nor a createTicket conflict (409)
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
  | 'waiting-pair' // an admission found no partner although a compatible ticket was provably waiting
  | 'not-oldest' // an admission paired with a ticket while an older compatible one was provably waiting
  | 'cutoff' // matched at or after a cutoff, expired before it, or listed waiting past it
  | 'tolerance' // a rated match outside the waiting ticket's band at matchedAt
  | 'rated-unrated' // a rated ticket paired with an unrated one
  | 'queue-policy' // tickets of one queue key admitted under different policies
  | 'create-response' // a createTicket answer disagrees with the final state
  | 'cancel-response' // a cancelTicket answer is 'waiting' or disagrees with the final state
  | 'conflict-response'; // a 409 ticket_conflict / queue_conflict answer the final state does not justify

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
   * Check that every admission paired with the oldest compatible ticket that was provably
   * waiting when it was admitted, or found none ('waiting-pair', 'not-oldest'). Default true.
   */
  waitingPairs?: boolean;
  /** Report responses whose ticket is absent from the listing. Default true. */
  requireListed?: boolean;
  /**
   * The app's clock when the listing was read (a frozen test clock): a ticket listed as
   * waiting must not be at or past its cutoff then, since reads evaluate expiry.
   */
  listedAt?: number;
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

const isRated = (input: Loose) => input['rating'] !== undefined;
const cutoffOf = (input: Loose): number | undefined => (typeof input['expiresAt'] === 'number' ? input['expiresAt'] : undefined);

/** JSON with object keys sorted at every level: equal for inputs that differ only in key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

/** A queue's policy as the spec compares it: `size` and `rating`, key order ignored. */
function policyOf(input: Loose): string {
  const queue = isObject(input['queue']) ? input['queue'] : {};
  return canonical(queue['rating'] === undefined ? { size: queue['size'] } : { size: queue['size'], rating: queue['rating'] });
}

/**
 * The band of a rated ticket waiting since `since`, at `at` (spec "Pairing compatibility"):
 * min(max, initial + widenPerSecond * waitingSeconds), without `max` uncapped. Computed with the
 * same floating-point operations, in the same order, as the service (lua/includes/pairing.lua),
 * so an exact boundary is judged the same way.
 */
export function tolerance(policy: { initial: number; widenPerSecond: number; max?: number }, since: number, at: number): number {
  const band = policy.initial + policy.widenPerSecond * ((at - since) / 1000);
  return policy.max !== undefined && band > policy.max ? policy.max : band;
}

/** Whether a waiting (older) admission and a joining one may pair when the joiner is admitted. */
function compatible(waiting: Loose, joining: Loose): boolean {
  const w = waiting['input'] as Loose;
  const j = joining['input'] as Loose;
  if (w['player'] === j['player']) return false;
  if (isRated(w) !== isRated(j)) return false;
  const cutoff = cutoffOf(w);
  if (cutoff !== undefined && cutoff <= joining['createdAt']) return false;
  if (!isRated(w)) return true;
  const policy = w['queue']['rating'];
  if (!isObject(policy) || typeof w['rating'] !== 'number' || typeof j['rating'] !== 'number') return false;
  return Math.abs(j['rating'] - w['rating']) <= tolerance(policy as { initial: number; widenPerSecond: number; max?: number }, waiting['createdAt'], joining['createdAt']);
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
  // 200, or a createTicket conflict (checked against the final state below); nothing else.
  const isConflict = (o: Observation) =>
    o.operation === 'createTicket' && o.status === 409 && isObject(o.body) && (o.body['error'] === 'ticket_conflict' || o.body['error'] === 'queue_conflict');
  for (const o of observations) {
    if (o.status !== 200 && !isConflict(o)) {
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

  // --- cutoffs of waiting and expired tickets, queue policies ----------------------------
  const policies = new Map<string, Map<string, string>>(); // queue -> policy -> a ticket ID
  for (const t of byId.values()) {
    if (t['admission'] === null) continue;
    const admission = t['admission'] as Loose;
    const input = admission['input'] as Loose;
    const cutoff = cutoffOf(input);
    if (t['state'] === 'waiting' && cutoff !== undefined) {
      if (cutoff <= admission['createdAt']) {
        report('cutoff', `ticket ${t['id']} waits although its cutoff ${cutoff} was at or before its admission at ${admission['createdAt']}`);
      } else if (options.listedAt !== undefined && cutoff <= options.listedAt) {
        report('cutoff', `ticket ${t['id']} is listed waiting at ${options.listedAt}, at or past its cutoff ${cutoff}`);
      }
    }
    if (t['state'] === 'cancelled' && t['reason'] === 'expired') {
      if (cutoff === undefined) report('cutoff', `ticket ${t['id']} expired without a cutoff`);
      else if (t['cancelledAt'] < cutoff) report('cutoff', `ticket ${t['id']} expired at ${t['cancelledAt']}, before its cutoff ${cutoff}`);
    }
    const queue = String(input['queue']['key']);
    const seen = policies.get(queue) ?? new Map<string, string>();
    if (!seen.has(policyOf(input))) seen.set(policyOf(input), t['id']);
    policies.set(queue, seen);
  }
  for (const [queue, seen] of policies) {
    if (seen.size > 1) {
      report('queue-policy', `queue ${show(queue)} admitted tickets under ${seen.size} policies: ${[...seen].map(([p, id]) => `${id} ${p}`).join('; ')}`);
    }
  }

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
      continue;
    }
    const matchedAt = match['matchedAt'] as number;
    for (const a of entries) {
      const cutoff = cutoffOf(a['input']);
      if (cutoff !== undefined && !(matchedAt < cutoff)) {
        report('cutoff', `match ${matchId} at ${matchedAt} pairs ${a['input']['id']}, whose cutoff is ${cutoff}`);
      }
    }
    if (isRated(waiting['input']) !== isRated(joining['input'])) {
      report('rated-unrated', `match ${matchId} pairs ${isRated(waiting['input']) ? 'rated' : 'unrated'} ${waiting['input']['id']} with ${isRated(joining['input']) ? 'rated' : 'unrated'} ${joining['input']['id']}`);
    } else if (isRated(waiting['input'])) {
      const policy = waiting['input']['queue']['rating'];
      const [w, j] = [waiting['input']['rating'], joining['input']['rating']];
      if (!isObject(policy) || typeof w !== 'number' || typeof j !== 'number') {
        report('tolerance', `rated match ${matchId} without a rating policy or numeric ratings`);
      } else {
        const band = tolerance(policy as { initial: number; widenPerSecond: number; max?: number }, waiting['createdAt'], matchedAt);
        if (!(Math.abs(j - w) <= band)) {
          report('tolerance', `match ${matchId} pairs ratings ${w} and ${j} (gap ${Math.abs(j - w)}) at ${matchedAt}, when ${waiting['input']['id']}'s band (waiting since ${waiting['createdAt']}) was ${band}`);
        }
      }
    }
  }

  // --- oldest compatible partner ------------------------------------------------------
  // Every admission that reached pairing (not past its cutoff on arrival) took the oldest
  // compatible ticket that was waiting when it ran, or found none. A ticket C created before
  // the admission B was provably still waiting while B ran when it is waiting now, or left
  // waiting by a script that ran later: a match whose joiner was created after B, or one
  // recorded at a later time than B's admission, or a cancellation recorded later.
  if (options.waitingPairs ?? true) {
    const byQueue = new Map<string, Loose[]>();
    for (const t of byId.values()) {
      if (t['admission'] === null) continue;
      const queue = String(t['admission']['input']['queue']['key']);
      const list = byQueue.get(queue) ?? [];
      list.push(t);
      byQueue.set(queue, list);
    }
    const waitingWhile = (c: Loose, b: Loose): boolean => {
      const at = b['admission']['createdAt'] as number;
      if (c['state'] === 'waiting') return true;
      if (c['state'] === 'cancelled') return typeof c['cancelledAt'] === 'number' && c['cancelledAt'] > at;
      const match = c['match'] as Loose;
      const entries = match['tickets'] as Loose[];
      if (entries.length !== 2 || entries[0]!['input']['id'] !== c['id']) return false; // C joined: it never waited
      const joinerAt = position.get(entries[1]!['input']['id']);
      return (joinerAt !== undefined && joinerAt > position.get(b['id'])!) || (typeof match['matchedAt'] === 'number' && match['matchedAt'] > at);
    };
    for (const [queue, tickets] of byQueue) {
      tickets.sort((x, y) => position.get(x['id'])! - position.get(y['id'])!);
      for (const b of tickets) {
        const admission = b['admission'] as Loose;
        const cutoff = cutoffOf(admission['input']);
        if (cutoff !== undefined && cutoff <= admission['createdAt']) continue; // expired on arrival: no pairing
        const entries = b['state'] === 'matched' ? (b['match']['tickets'] as Loose[]) : [];
        const partner = entries.length === 2 && entries[1]!['input']['id'] === b['id'] ? (entries[0]!['input']['id'] as string) : null;
        const limit = partner === null ? position.get(b['id'])! : position.get(partner) ?? position.get(b['id'])!;
        const older = tickets.find((c) => position.get(c['id'])! < limit && compatible(c['admission'], admission) && waitingWhile(c, b));
        if (older === undefined) continue;
        const what = `${older['id']} (${older['state']}, admitted ${older['admission']['createdAt']}) was compatible and waiting when ${b['id']} was admitted at ${admission['createdAt']} in queue ${show(queue)}`;
        if (partner === null) report('waiting-pair', `${what}, yet ${b['id']} found no partner`);
        else report('not-oldest', `${what}, yet ${b['id']} paired with the younger ${partner}`);
      }
    }
  }

  // --- responses against the final state ------------------------------------------------
  const requireListed = options.requireListed ?? true;
  for (const o of observations) {
    if (!isConflict(o)) continue;
    const code = (o.body as Loose)['error'] as string;
    const where = `createTicket ${show(o.input)} answered ${code}${o.note ? ` (${o.note})` : ''}`;
    if (!isObject(o.input) || typeof o.input['id'] !== 'string' || !isObject(o.input['queue'])) {
      report('conflict-response', `${where}, for an input that is not a ticket`);
      continue;
    }
    const final = byId.get(o.input['id']);
    if (code === 'ticket_conflict') {
      // Only an admitted ID with another input justifies it (a tombstone answers itself).
      if (final === undefined) {
        if (requireListed) report('conflict-response', `${where}, but ticket ${o.input['id']} does not exist`);
      } else if (final['admission'] === null) {
        report('conflict-response', `${where}, but ${o.input['id']} is a tombstone, which answers any input`);
      } else if (isDeepStrictEqual(final['admission']['input'], o.input)) {
        report('conflict-response', `${where}, but this very input is the ticket's admission`);
      }
    } else {
      // The refused input was not admitted, and the queue holds tickets of another policy.
      if (final !== undefined && final['admission'] !== null && isDeepStrictEqual(final['admission']['input'], o.input)) {
        report('conflict-response', `${where}, but this very input was admitted`);
      }
      const seen = policies.get(String(o.input['queue']['key']));
      const sent = policyOf(o.input);
      if (requireListed && (seen === undefined || [...seen.keys()].every((p) => p === sent))) {
        report('conflict-response', `${where}, but no listed ticket of that queue has another policy than ${sent}`);
      }
    }
  }
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
