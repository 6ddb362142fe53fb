import { Ajv, type ValidateFunction } from 'ajv';
import { canonicalJson, findJsonProblem, MAX_JSON_DEPTH, utf8Length } from '../shared/json.js';
import { LIMITS, type MatchmakingOperation, type Queue, type TicketInput } from '../shared/matchmaking-types.js';

/** Refusal of a request's content; mapped to 400 invalid_argument. */
export class InvalidArgument extends Error {
  readonly code = 'invalid_argument';
}

const nonEmptyString = { type: 'string', minLength: 1 } as const;

/*
 * The ajv schemas requests are validated with; src/http/openapi.ts publishes the same objects.
 * Byte limits, the rating rules across members and the payload's depth and size are checked
 * after them (validateTicketInput).
 */
export const ratingPolicySchema = {
  type: 'object',
  required: ['initial', 'widenPerSecond'],
  additionalProperties: false,
  properties: {
    initial: { type: 'number', minimum: 0 },
    widenPerSecond: { type: 'number', exclusiveMinimum: 0 },
    max: { type: 'number' },
  },
} as const;

export const queueSchema = {
  type: 'object',
  required: ['key', 'size'],
  additionalProperties: false,
  properties: { key: nonEmptyString, size: { const: 2 }, rating: ratingPolicySchema },
} as const;

export const ticketInputSchema = {
  type: 'object',
  required: ['id', 'player', 'queue', 'payload'],
  additionalProperties: false,
  properties: {
    id: nonEmptyString,
    player: nonEmptyString,
    queue: queueSchema,
    payload: {},
    rating: { type: 'number' },
    expiresAt: { type: 'number' },
  },
} as const;

export const ticketQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: { player: nonEmptyString, id: nonEmptyString, cursor: { type: 'string', minLength: 1, maxLength: LIMITS.cursorChars } },
} as const;

export const cancelSchema = {
  type: 'object',
  required: ['id'],
  additionalProperties: false,
  properties: { id: nonEmptyString },
} as const;

export const envelopeSchema = {
  type: 'object',
  required: ['operation'],
  additionalProperties: false,
  properties: { operation: { enum: ['createTicket', 'listTickets', 'cancelTicket'] }, input: {} },
} as const;

const ajv = new Ajv({ allErrors: false, strict: true });
const validators = {
  envelope: ajv.compile(envelopeSchema),
  createTicket: ajv.compile(ticketInputSchema),
  listTickets: ajv.compile(ticketQuerySchema),
  cancelTicket: ajv.compile(cancelSchema),
};

function check(validate: ValidateFunction, value: unknown, what: string): void {
  if (!validate(value)) {
    const error = validate.errors?.[0];
    const where = error?.instancePath ? `${what}${error.instancePath.replace(/\//g, '.')}` : what;
    throw new InvalidArgument(`${where}: ${error?.message ?? 'invalid'}`);
  }
}

function checkBytes(value: string, max: number, what: string): void {
  if (utf8Length(value) > max) throw new InvalidArgument(`${what}: longer than ${max} bytes`);
}

/** A createTicket input that passed every rule, with the canonical texts the scripts compare. */
export interface ValidTicketInput {
  input: TicketInput;
  policyJson: string;
  payloadJson: string;
}

export type ValidRequest =
  | { operation: 'createTicket'; ticket: ValidTicketInput }
  | { operation: 'listTickets'; query: { player?: string; id?: string; cursor?: string } }
  | { operation: 'cancelTicket'; id: string };

/** The queue's fixed policy, compared as canonical JSON: key order ignored, `max` present or not. */
export function queuePolicyJson(queue: Queue): string {
  return canonicalJson(queue.rating === undefined ? { size: queue.size } : { size: queue.size, rating: queue.rating });
}

function validateTicketInput(raw: unknown): ValidTicketInput {
  check(validators.createTicket, raw, 'input');
  const input = raw as TicketInput;
  checkBytes(input.id, LIMITS.idBytes, 'input.id');
  checkBytes(input.player, LIMITS.playerBytes, 'input.player');
  checkBytes(input.queue.key, LIMITS.queueKeyBytes, 'input.queue.key');
  const policy = input.queue.rating;
  if (policy?.max !== undefined && policy.max < policy.initial) {
    throw new InvalidArgument('input.queue.rating.max: must be at least initial');
  }
  if (input.rating !== undefined && policy === undefined) {
    throw new InvalidArgument('input.rating: a rated ticket needs a queue with a rating policy');
  }
  const problem = findJsonProblem(input.payload, MAX_JSON_DEPTH);
  if (problem === 'too_deep') throw new InvalidArgument(`input.payload: nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (problem !== null) throw new InvalidArgument('input.payload: not valid JSON');
  const payloadJson = canonicalJson(input.payload);
  if (utf8Length(payloadJson) > LIMITS.payloadBytes) {
    throw new InvalidArgument(`input.payload: larger than ${LIMITS.payloadBytes} bytes of JSON`);
  }
  return { input, policyJson: queuePolicyJson(input.queue), payloadJson };
}

/** Validates a parsed matchmaking envelope. Throws InvalidArgument with a specific message. */
export function validateRequest(body: unknown): ValidRequest {
  check(validators.envelope, body, 'request');
  const envelope = body as { operation: MatchmakingOperation; input?: unknown };
  switch (envelope.operation) {
    case 'createTicket':
      if (envelope.input === undefined) throw new InvalidArgument('input: required');
      return { operation: 'createTicket', ticket: validateTicketInput(envelope.input) };
    case 'listTickets': {
      // An omitted input is an empty query; null is not (optional members are omitted, never null).
      const query = envelope.input === undefined ? {} : envelope.input;
      check(validators.listTickets, query, 'input');
      const q = query as { player?: string; id?: string; cursor?: string };
      if (q.player !== undefined) checkBytes(q.player, LIMITS.playerBytes, 'input.player');
      if (q.id !== undefined) checkBytes(q.id, LIMITS.idBytes, 'input.id');
      return { operation: 'listTickets', query: q };
    }
    case 'cancelTicket': {
      check(validators.cancelTicket, envelope.input, 'input');
      const { id } = envelope.input as { id: string };
      checkBytes(id, LIMITS.idBytes, 'input.id');
      return { operation: 'cancelTicket', id };
    }
  }
}
