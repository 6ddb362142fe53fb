import { canonicalJson, findJsonProblem, MAX_JSON_DEPTH, utf8Length } from '../shared/json.js';
import { LIMITS, type Json, type Queue, type RatingPolicy, type TicketInput, type TicketQuery } from '../shared/matchmaking-types.js';
import { NotJson, snapshotJson } from './snapshot.js';

/**
 * Local validation of matchmaking inputs. It mirrors the service's rules (DESIGN.md,
 * src/matchmaking/validation.ts) so that an input the service would refuse with 400 is
 * refused here first, without a round trip: unknown members, optional members set to
 * undefined or null, sizes in UTF-8 bytes, the payload's 16 KiB of compact JSON and its
 * nesting depth.
 */
export class InvalidInput extends Error {}

type Plain = Record<string, unknown>;

function isPlainObject(value: unknown): value is Plain {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function object(value: unknown, path: string, required: readonly string[], optional: readonly string[]): Plain {
  if (!isPlainObject(value)) throw new InvalidInput(`${path}: must be an object`);
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key)) throw new InvalidInput(`${path}: unknown member ${JSON.stringify(key)}`);
  }
  for (const key of required) {
    if (!Object.hasOwn(value, key)) throw new InvalidInput(`${path}.${key}: required`);
  }
  for (const key of optional) {
    if (Object.hasOwn(value, key) && value[key] === null) throw new InvalidInput(`${path}.${key}: omit it instead of null`);
  }
  return value;
}

function text(value: unknown, path: string, maxBytes: number): string {
  if (typeof value !== 'string' || value === '') throw new InvalidInput(`${path}: must be a nonempty string`);
  if (utf8Length(value) > maxBytes) throw new InvalidInput(`${path}: longer than ${maxBytes} bytes of UTF-8`);
  return value;
}

function number(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new InvalidInput(`${path}: must be a finite number`);
  return value;
}

/** Snapshots (see snapshotJson) and turns a NotJson refusal into InvalidInput. */
export function snapshot(value: unknown, path: string): unknown {
  try {
    return snapshotJson(value, path);
  } catch (error) {
    if (error instanceof NotJson) throw new InvalidInput(error.message);
    throw error;
  }
}

function ratingPolicy(value: unknown, path: string): RatingPolicy {
  const raw = object(value, path, ['initial', 'widenPerSecond'], ['max']);
  const initial = number(raw['initial'], `${path}.initial`);
  if (initial < 0) throw new InvalidInput(`${path}.initial: must be nonnegative`);
  const widenPerSecond = number(raw['widenPerSecond'], `${path}.widenPerSecond`);
  if (widenPerSecond <= 0) throw new InvalidInput(`${path}.widenPerSecond: must be positive`);
  if (!Object.hasOwn(raw, 'max')) return { initial, widenPerSecond };
  const max = number(raw['max'], `${path}.max`);
  if (max < initial) throw new InvalidInput(`${path}.max: must be at least initial`);
  return { initial, widenPerSecond, max };
}

function queue(value: unknown, path: string): Queue {
  const raw = object(value, path, ['key', 'size'], ['rating']);
  const key = text(raw['key'], `${path}.key`, LIMITS.queueKeyBytes);
  if (raw['size'] !== 2) throw new InvalidInput(`${path}.size: only 2 is supported`);
  return Object.hasOwn(raw, 'rating') ? { key, size: 2, rating: ratingPolicy(raw['rating'], `${path}.rating`) } : { key, size: 2 };
}

/**
 * A TicketInput, snapshotted and validated: the copy that will be sent, in the caller's key
 * order. Throws InvalidInput.
 */
export function ticketInput(value: unknown): TicketInput {
  const raw = object(snapshot(value, 'input'), 'input', ['id', 'player', 'queue', 'payload'], ['rating', 'expiresAt']);
  text(raw['id'], 'input.id', LIMITS.idBytes);
  text(raw['player'], 'input.player', LIMITS.playerBytes);
  const q = queue(raw['queue'], 'input.queue');
  if (Object.hasOwn(raw, 'rating')) {
    number(raw['rating'], 'input.rating');
    if (q.rating === undefined) throw new InvalidInput('input.rating: a rated ticket needs a queue with a rating policy');
  }
  if (Object.hasOwn(raw, 'expiresAt')) number(raw['expiresAt'], 'input.expiresAt');
  const problem = findJsonProblem(raw['payload'], MAX_JSON_DEPTH);
  if (problem === 'too_deep') throw new InvalidInput(`input.payload: nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (problem !== null) throw new InvalidInput('input.payload: not valid JSON');
  const bytes = utf8Length(canonicalJson(raw['payload']));
  if (bytes > LIMITS.payloadBytes) throw new InvalidInput(`input.payload: ${bytes} bytes of JSON, over the ${LIMITS.payloadBytes}-byte limit`);
  return raw as unknown as TicketInput;
}

/** A TicketQuery (undefined: the empty query), snapshotted and validated. */
export function ticketQuery(value: unknown): TicketQuery {
  if (value === undefined) return {};
  const raw = object(snapshot(value, 'query'), 'query', [], ['player', 'id', 'cursor']);
  const query: TicketQuery = {};
  if (Object.hasOwn(raw, 'player')) query.player = text(raw['player'], 'query.player', LIMITS.playerBytes);
  if (Object.hasOwn(raw, 'id')) query.id = text(raw['id'], 'query.id', LIMITS.idBytes);
  if (Object.hasOwn(raw, 'cursor')) {
    const cursor = raw['cursor'];
    // The service counts the cursor's length in characters (code points), not bytes.
    if (typeof cursor !== 'string' || cursor === '' || [...cursor].length > LIMITS.cursorChars) {
      throw new InvalidInput(`query.cursor: must be a cursor from a previous page (a nonempty string of at most ${LIMITS.cursorChars} characters)`);
    }
    query.cursor = cursor;
  }
  return query;
}

/** cancelTicket's ID. */
export function ticketId(value: unknown): string {
  if (typeof value === 'string' && !value.isWellFormed()) throw new InvalidInput('id: a string with a lone surrogate is not valid UTF-8');
  return text(value, 'id', LIMITS.idBytes);
}

export type { Json };
