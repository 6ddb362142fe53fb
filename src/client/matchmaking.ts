import type { Json, Ticket, TicketInput, TicketPage, TicketQuery } from '../shared/matchmaking-types.js';
import { signAppToken } from '../shared/tokens.js';
import { checkAppOrigin, checkApiUrl, ConfigProblem, resolveApiUrl, selectKey } from './config.js';
import { isMatchmakingApiCode, MatchmakingError } from './errors.js';
import { InvalidInput, ticketId, ticketInput, ticketQuery } from './input.js';
import { checkPage, checkTicket, MalformedReply, parseJsonBytes } from './replies.js';
import { post, TransportFailure } from './transport.js';

export interface MatchmakingOptions {
  /** The app's origin: canonical public HTTPS (`https://host[:port]`), as verified by the service. */
  origin: string;
  /**
   * The API origin. Default: SERVICE_API_URL (read at each call), else the production API.
   * HTTPS, or plain HTTP to a loopback host; no path, query, fragment or credentials.
   */
  apiUrl?: string;
  /**
   * The app key (base58 of a 64-byte Ed25519 secret key). Default: SERVICE_APP_KEY, else the
   * legacy SERVICE_PUSH_KEY, read at each call so that a rotated key takes effect.
   */
  key?: string;
}

/**
 * The matchmaking operations of one app (spec section 4A). `P` is the payload type. Every call
 * is one HTTP request with a fresh app token and a 30-second timeout; nothing is retried
 * automatically. After `unavailable` or `invalid_response` the outcome is unknown: retry the
 * identical input with the same ID, or list tickets (app-wide if the ID is lost).
 */
export interface Matchmaking<P extends Json = Json> {
  /** Admits a ticket, or returns the current state of an identical earlier admission. */
  createTicket(input: TicketInput<P>): Promise<Ticket<P>>;
  /** One page (at most 25, in creation order) of the app's tickets; pass `nextCursor` back with the same filters. */
  listTickets(query?: TicketQuery): Promise<TicketPage<P>>;
  /** Cancels a ticket; answers `matched` if pairing won the race, else `cancelled`. */
  cancelTicket(id: string): Promise<Ticket<P>>;
}

const OPTION_KEYS = ['origin', 'apiUrl', 'key'];

function invalidOption(message: string): MatchmakingError {
  return new MatchmakingError('invalid_argument', null, message);
}

/** Checks the options now; environment variables are read at each call. */
function readOptions(options: unknown): { origin: string; apiUrl: string | undefined; key: string | undefined } {
  if (typeof options !== 'object' || options === null) throw invalidOption('options must be an object with `origin`');
  const record = options as Record<string, unknown>;
  for (const name of Object.keys(record)) {
    if (!OPTION_KEYS.includes(name)) throw invalidOption(`unknown option ${JSON.stringify(name)} (expected origin, apiUrl, key)`);
  }
  try {
    const origin = checkAppOrigin(record['origin']);
    const apiUrl = record['apiUrl'] === undefined ? undefined : checkApiUrl(record['apiUrl'], 'apiUrl');
    const key = record['key'];
    if (key !== undefined && typeof key !== 'string') throw new ConfigProblem('key must be a string');
    return { origin, apiUrl, key };
  } catch (error) {
    if (error instanceof ConfigProblem) throw invalidOption(error.message);
    throw error;
  }
}

type Operation = 'createTicket' | 'listTickets' | 'cancelTicket';

/**
 * A matchmaking client for one app. Throws MatchmakingError `invalid_argument` (status null)
 * at once when `origin` or `apiUrl` is not acceptable.
 *
 * ```ts
 * const matchmaking = createMatchmaking<{ seed: number }>({ origin: 'https://game.example' });
 * const ticket = await matchmaking.createTicket({ id, player, queue: { key: 'duel', size: 2 }, payload: { seed } });
 * ```
 */
export function createMatchmaking<P extends Json = Json>(options: MatchmakingOptions): Matchmaking<P> {
  const { origin, apiUrl, key } = readOptions(options);

  /** API URL and key of one call; local failures before anything is sent. */
  const target = (): { apiUrl: string; key: string } => {
    let url: string;
    try {
      url = resolveApiUrl(apiUrl);
    } catch (error) {
      if (error instanceof ConfigProblem) throw new MatchmakingError('invalid_argument', null, error.message);
      throw error;
    }
    try {
      return { apiUrl: url, key: selectKey(key).key };
    } catch (error) {
      if (error instanceof ConfigProblem) throw new MatchmakingError('unauthenticated', null, error.message);
      throw error;
    }
  };

  /** Runs a local step, turning its InvalidInput into a local invalid_argument. */
  const local = <T>(step: () => T): { value: T } | { error: MatchmakingError } => {
    try {
      return { value: step() };
    } catch (error) {
      if (error instanceof InvalidInput) return { error: new MatchmakingError('invalid_argument', null, error.message) };
      throw error;
    }
  };

  const exchange = async (call: { apiUrl: string; key: string }, operation: Operation, input: unknown): Promise<{ status: number; value: unknown }> => {
    let token: string;
    try {
      token = await signAppToken(call.key, origin);
    } catch (error) {
      throw new MatchmakingError('unauthenticated', null, 'the app key cannot sign a token', { cause: error });
    }
    let reply;
    try {
      reply = await post(
        `${call.apiUrl}/api/matchmaking`,
        { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` },
        JSON.stringify({ operation, input }),
      );
    } catch (error) {
      if (!(error instanceof TransportFailure)) throw error;
      const code = error.kind === 'too_large' ? 'invalid_response' : 'unavailable';
      throw new MatchmakingError(code, error.status, `${operation}: ${error.message}; the outcome is unknown`, { cause: error });
    }
    const { status } = reply;
    let value: unknown;
    try {
      value = parseJsonBytes(reply.body);
    } catch (error) {
      throw new MatchmakingError('invalid_response', status, `${operation}: HTTP ${status}, ${(error as Error).message}; the outcome is unknown`);
    }
    if (status >= 200 && status < 300) return { status, value };
    const code = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as { error?: unknown }).error : undefined;
    if (isMatchmakingApiCode(code)) throw new MatchmakingError(code, status, `${operation} refused (HTTP ${status})`);
    throw new MatchmakingError('invalid_response', status, `${operation}: HTTP ${status} without a known error code; the outcome is unknown`);
  };

  /** Validates a success reply; anything unexpected is invalid_response with the reply's status. */
  const checkReply = <T>(operation: Operation, status: number, check: () => T): T => {
    try {
      return check();
    } catch (error) {
      if (error instanceof MalformedReply) {
        throw new MatchmakingError('invalid_response', status, `${operation}: malformed reply, ${error.message}; the outcome is unknown`);
      }
      throw error;
    }
  };

  const createTicket = async (input: TicketInput<P>): Promise<Ticket<P>> => {
    const snapshot = local(() => ticketInput(input));
    const call = target();
    if ('error' in snapshot) throw snapshot.error;
    const { status, value } = await exchange(call, 'createTicket', snapshot.value);
    return checkReply('createTicket', status, () => {
      const ticket = checkTicket(value);
      if (ticket.id !== snapshot.value.id) throw new MalformedReply(`ticket ${JSON.stringify(ticket.id)} is not the one sent`);
      return ticket as Ticket<P>;
    });
  };

  const listTickets = async (query?: TicketQuery): Promise<TicketPage<P>> => {
    const snapshot = local(() => ticketQuery(query));
    const call = target();
    if ('error' in snapshot) throw snapshot.error;
    const { status, value } = await exchange(call, 'listTickets', snapshot.value);
    return checkReply('listTickets', status, () => {
      const page = checkPage(value);
      const id = snapshot.value.id;
      if (id !== undefined && page.tickets.some((ticket) => ticket.id !== id)) {
        throw new MalformedReply(`a ticket other than ${JSON.stringify(id)} in a page filtered by that ID`);
      }
      return page as TicketPage<P>;
    });
  };

  const cancelTicket = async (id: string): Promise<Ticket<P>> => {
    const snapshot = local(() => ticketId(id));
    const call = target();
    if ('error' in snapshot) throw snapshot.error;
    const { status, value } = await exchange(call, 'cancelTicket', { id: snapshot.value });
    return checkReply('cancelTicket', status, () => {
      const ticket = checkTicket(value);
      if (ticket.id !== snapshot.value) throw new MalformedReply(`ticket ${JSON.stringify(ticket.id)} is not the one sent`);
      if (ticket.state === 'waiting') throw new MalformedReply('cancelTicket answered a waiting ticket');
      return ticket as Ticket<P>;
    });
  };

  return Object.freeze({ createTicket, listTickets, cancelTicket });
}
