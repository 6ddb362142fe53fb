/**
 * Turns the scripts' ticket replies into the spec's Ticket JSON. Payloads are stored as
 * canonical JSON and numbers as JSON number text, so the reply is spliced together as text
 * instead of being parsed and serialised again.
 */
import type { ValidTicketInput } from './validation.js';

/** { id, own hash fields (flat), other ticket's fields (flat, matched only), queue policy JSON } */
export type TicketReply = [string, string[], string[], string];

type Fields = Record<string, string>;

function fieldsOf(flat: string[]): Fields {
  const fields: Fields = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return fields;
}

const str = JSON.stringify;

function inputJson(id: string, f: Fields, policyJson: string): string {
  // policyJson is `{"rating":…,"size":2}` or `{"size":2}`: splice the key in front of its members.
  let text = `{"id":${str(id)},"player":${str(f['p'])},"queue":{"key":${str(f['q'])},${policyJson.slice(1)},"payload":${f['d']}`;
  if (f['r'] !== undefined) text += `,"rating":${f['r']}`;
  if (f['x'] !== undefined) text += `,"expiresAt":${f['x']}`;
  return `${text}}`;
}

function admissionJson(id: string, f: Fields, policyJson: string, acceptedPayload: string): string {
  return `{"input":${inputJson(id, f, policyJson)},"createdAt":${f['c']},"payload":${acceptedPayload}}`;
}

export function renderTicket(reply: TicketReply): string {
  const [id, ownFlat, otherFlat, policyJson] = reply;
  return renderFields(id, fieldsOf(ownFlat), fieldsOf(otherFlat), policyJson);
}

/**
 * createTicket.lua's reply for a new admission: { "new", state, createdAt } and, when it
 * matched, the match ID, the partner's ID and the partner's stored p, d, c, r, x (null when absent).
 */
export type AdmissionReply = [
  'new', 'w' | 'm' | 'c', string,
  string?, string?, string?, string?, string?, (string | null)?, (string | null)?,
];

/** The ticket a new admission made, from the input that was admitted and what the script decided. */
export function renderAdmission(valid: ValidTicketInput, reply: AdmissionReply): string {
  const { input, policyJson, payloadJson } = valid;
  const [, state, createdAt, matchId, partnerId, player, payload, partnerCreatedAt, rating, expiresAt] = reply;
  const own: Fields = { s: state, p: input.player, q: input.queue.key, d: payloadJson, c: createdAt };
  if (input.rating !== undefined) own['r'] = str(input.rating);
  if (input.expiresAt !== undefined) own['x'] = str(input.expiresAt);
  const other: Fields = {};
  if (state === 'c') Object.assign(own, { rs: 'expired', ca: createdAt });
  if (state === 'm') {
    Object.assign(own, { mi: matchId!, o: partnerId!, ma: createdAt, j: '1' });
    Object.assign(other, { s: 'm', p: player!, q: input.queue.key, d: payload!, c: partnerCreatedAt! });
    if (rating != null) other['r'] = rating;
    if (expiresAt != null) other['x'] = expiresAt;
  }
  return renderFields(input.id, own, other, policyJson);
}

function renderFields(id: string, own: Fields, other: Fields, policyJson: string): string {
  switch (own['s']) {
    case 'w':
      return `{"id":${str(id)},"state":"waiting","admission":${admissionJson(id, own, policyJson, own['d']!)}}`;
    case 'm': {
      const otherId = own['o']!;
      const ownIsJoining = own['j'] === '1';
      const [waitingId, waiting, joiningId, joining] = ownIsJoining
        ? [otherId, other, id, own]
        : [id, own, otherId, other];
      const accepted = waiting['d']!;
      const waitingAdmission = admissionJson(waitingId, waiting, policyJson, accepted);
      const joiningAdmission = admissionJson(joiningId, joining, policyJson, accepted);
      const match = `{"id":${str(own['mi'])},"queue":${str(own['q'])},"matchedAt":${own['ma']},"payload":${accepted},"tickets":[${waitingAdmission},${joiningAdmission}]}`;
      return `{"id":${str(id)},"state":"matched","admission":${ownIsJoining ? joiningAdmission : waitingAdmission},"match":${match}}`;
    }
    case 'c': {
      const admission = own['p'] === undefined ? 'null' : admissionJson(id, own, policyJson, own['d']!);
      return `{"id":${str(id)},"state":"cancelled","admission":${admission},"reason":${str(own['rs'])},"cancelledAt":${own['ca']}}`;
    }
    default:
      throw new Error(`ticket ${id} has no state`);
  }
}
