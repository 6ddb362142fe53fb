import { findJsonProblem, MAX_JSON_DEPTH } from '../shared/json.js';
import { LIMITS, type Ticket, type TicketPage } from '../shared/matchmaking-types.js';

/** A reply that is not what the spec says the service answers. */
export class MalformedReply extends Error {}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Strict JSON of a reply body: valid UTF-8, finite numbers, well-formed strings. */
export function parseJsonBytes(bytes: Uint8Array): unknown {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch {
    throw new MalformedReply('the reply is not JSON');
  }
  // A matched ticket nests its payload a few levels below the ticket itself.
  if (findJsonProblem(value, MAX_JSON_DEPTH + 16) !== null) throw new MalformedReply('the reply is not plain JSON');
  return value;
}

type Plain = Record<string, unknown>;

function isObject(value: unknown): value is Plain {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail(path: string, what: string): never {
  throw new MalformedReply(`${path}: ${what}`);
}

function obj(value: unknown, path: string): Plain {
  if (!isObject(value)) fail(path, 'not an object');
  return value;
}

function str(value: unknown, path: string): string {
  if (typeof value !== 'string' || value === '') fail(path, 'not a nonempty string');
  return value;
}

function num(value: unknown, path: string): number {
  if (typeof value !== 'number') fail(path, 'not a number');
  return value;
}

function has(record: Plain, key: string, path: string): unknown {
  if (!Object.hasOwn(record, key)) fail(`${path}.${key}`, 'missing');
  return record[key];
}

function optionalNumber(record: Plain, key: string, path: string): void {
  if (Object.hasOwn(record, key)) num(record[key], `${path}.${key}`);
}

function checkInput(value: unknown, path: string): void {
  const input = obj(value, path);
  str(has(input, 'id', path), `${path}.id`);
  str(has(input, 'player', path), `${path}.player`);
  const queue = obj(has(input, 'queue', path), `${path}.queue`);
  str(has(queue, 'key', `${path}.queue`), `${path}.queue.key`);
  if (has(queue, 'size', `${path}.queue`) !== 2) fail(`${path}.queue.size`, 'not 2');
  if (Object.hasOwn(queue, 'rating')) {
    const rating = obj(queue['rating'], `${path}.queue.rating`);
    num(has(rating, 'initial', `${path}.queue.rating`), `${path}.queue.rating.initial`);
    num(has(rating, 'widenPerSecond', `${path}.queue.rating`), `${path}.queue.rating.widenPerSecond`);
    optionalNumber(rating, 'max', `${path}.queue.rating`);
  }
  has(input, 'payload', path);
  optionalNumber(input, 'rating', path);
  optionalNumber(input, 'expiresAt', path);
}

function checkAdmission(value: unknown, path: string): void {
  const admission = obj(value, path);
  checkInput(has(admission, 'input', path), `${path}.input`);
  num(has(admission, 'createdAt', path), `${path}.createdAt`);
  has(admission, 'payload', path);
}

/** Checks that a value is a Ticket as the spec defines it (members beyond the spec's are tolerated). */
export function checkTicket(value: unknown, path = 'ticket'): Ticket<never> {
  const ticket = obj(value, path);
  str(has(ticket, 'id', path), `${path}.id`);
  const state = has(ticket, 'state', path);
  switch (state) {
    case 'waiting':
      checkAdmission(has(ticket, 'admission', path), `${path}.admission`);
      break;
    case 'matched': {
      checkAdmission(has(ticket, 'admission', path), `${path}.admission`);
      const match = obj(has(ticket, 'match', path), `${path}.match`);
      str(has(match, 'id', `${path}.match`), `${path}.match.id`);
      str(has(match, 'queue', `${path}.match`), `${path}.match.queue`);
      num(has(match, 'matchedAt', `${path}.match`), `${path}.match.matchedAt`);
      has(match, 'payload', `${path}.match`);
      const tickets = has(match, 'tickets', `${path}.match`);
      if (!Array.isArray(tickets) || tickets.length !== 2) fail(`${path}.match.tickets`, 'not exactly 2 admissions');
      tickets.forEach((admission, i) => checkAdmission(admission, `${path}.match.tickets[${i}]`));
      break;
    }
    case 'cancelled': {
      const admission = has(ticket, 'admission', path);
      if (admission !== null) checkAdmission(admission, `${path}.admission`);
      const reason = has(ticket, 'reason', path);
      if (reason !== 'requested' && reason !== 'expired') fail(`${path}.reason`, 'not "requested" or "expired"');
      num(has(ticket, 'cancelledAt', path), `${path}.cancelledAt`);
      break;
    }
    default:
      fail(`${path}.state`, 'not waiting, matched or cancelled');
  }
  return ticket as unknown as Ticket<never>;
}

/** Checks that a value is a TicketPage: at most 25 tickets and a cursor or null. */
export function checkPage(value: unknown): TicketPage<never> {
  const page = obj(value, 'page');
  const tickets = has(page, 'tickets', 'page');
  if (!Array.isArray(tickets)) fail('page.tickets', 'not an array');
  if (tickets.length > LIMITS.pageSize) fail('page.tickets', `more than ${LIMITS.pageSize} tickets`);
  tickets.forEach((ticket, i) => checkTicket(ticket, `page.tickets[${i}]`));
  const cursor = has(page, 'nextCursor', 'page');
  if (cursor !== null && (typeof cursor !== 'string' || cursor === '')) fail('page.nextCursor', 'not a nonempty string or null');
  return page as unknown as TicketPage<never>;
}
