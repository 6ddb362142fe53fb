/**
 * A tiny app server that pairs players through the Versus client library.
 *
 *   node --import tsx examples/app-server.ts
 *
 * Environment: VERSUS_APP_ORIGIN (your app's verified origin), SERVICE_APP_KEY (its app key)
 * and SERVICE_API_URL (the Versus API; default production). `npm run dev` prints all three.
 * PORT (default 3000) and HOST (default 127.0.0.1) choose where this server listens.
 *
 * Routes (JSON in, JSON out):
 *   POST   /matches      join the duel queue           -> { ticket }
 *   GET    /matches      my tickets (all pages)        -> { tickets }
 *   GET    /matches/:id  one of my tickets             -> { ticket }
 *   DELETE /matches/:id  cancel one of my tickets      -> { ticket }
 *
 * !!! DEMO ONLY: the player is whatever the `X-Demo-Player` header says. A real app server
 * takes the player from its own verified session (a cookie, a signed token), never from
 * something the browser may freely choose: Versus trusts the app server, not the browser.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
// In your app: import { createMatchmaking, MatchmakingError, type Ticket } from 'versus/client';
import { createMatchmaking, MatchmakingError, type Matchmaking, type Ticket } from '../src/client/index.js';

/** The shared game conditions both players must use (the waiting player's proposal wins). */
type Conditions = { seed: number };

const QUEUE = { key: 'duel:v1', size: 2 } as const;
const DEMO_PLAYER_HEADER = 'x-demo-player';

/** What a player sees of a ticket: never another player's private data, just the match. */
function view(ticket: Ticket<Conditions>) {
  switch (ticket.state) {
    case 'waiting':
      return { id: ticket.id, state: ticket.state, conditions: ticket.admission.payload };
    case 'matched': {
      const mine = ticket.admission.input.player;
      const opponent = ticket.match.tickets.find((admission) => admission.input.player !== mine)!.input.player;
      return { id: ticket.id, state: ticket.state, matchId: ticket.match.id, opponent, conditions: ticket.match.payload };
    }
    case 'cancelled':
      return { id: ticket.id, state: ticket.state, reason: ticket.reason };
  }
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(code);
  }
}

/** DEMO ONLY (see the top of this file): a real app reads its verified session here. */
function sessionPlayer(req: IncomingMessage): string {
  const player = req.headers[DEMO_PLAYER_HEADER];
  if (typeof player !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(player)) throw new HttpError(401, 'no_session');
  return player;
}

/**
 * createTicket with the spec's recovery rule: when the outcome is unknown (`unavailable`,
 * `invalid_response`), retry the identical input with the same ID, never a new ID.
 */
async function createWithRecovery(matchmaking: Matchmaking<Conditions>, player: string): Promise<Ticket<Conditions>> {
  const input = { id: randomUUID(), player, queue: QUEUE, payload: { seed: randomInt(2 ** 31) } };
  for (let attempt = 1; ; attempt++) {
    try {
      return await matchmaking.createTicket(input);
    } catch (error) {
      const unknownOutcome = error instanceof MatchmakingError && (error.code === 'unavailable' || error.code === 'invalid_response');
      if (!unknownOutcome || attempt === 3) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

/** The ticket if it is this player's: app credentials see the whole app, so authorize here. */
async function ownTicket(matchmaking: Matchmaking<Conditions>, player: string, id: string): Promise<Ticket<Conditions>> {
  const page = await matchmaking.listTickets({ id, player });
  const ticket = page.tickets[0];
  if (!ticket) throw new HttpError(404, 'not_found');
  return ticket;
}

async function route(matchmaking: Matchmaking<Conditions>, req: IncomingMessage): Promise<[number, unknown]> {
  const url = new URL(req.url ?? '/', 'http://app.invalid');
  const player = sessionPlayer(req);
  const one = /^\/matches\/([^/]+)$/.exec(url.pathname);
  if (url.pathname === '/matches' && req.method === 'POST') {
    return [201, { ticket: view(await createWithRecovery(matchmaking, player)) }];
  }
  if (url.pathname === '/matches' && req.method === 'GET') {
    const tickets: Array<Ticket<Conditions>> = [];
    let cursor: string | null = null;
    do {
      const page = await matchmaking.listTickets(cursor === null ? { player } : { player, cursor });
      tickets.push(...page.tickets);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return [200, { tickets: tickets.map(view) }];
  }
  if (one && req.method === 'GET') {
    return [200, { ticket: view(await ownTicket(matchmaking, player, decodeURIComponent(one[1]!))) }];
  }
  if (one && req.method === 'DELETE') {
    const ticket = await ownTicket(matchmaking, player, decodeURIComponent(one[1]!));
    return [200, { ticket: view(await matchmaking.cancelTicket(ticket.id)) }];
  }
  throw new HttpError(404, 'not_found');
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

export interface AppServerOptions {
  /** The app's verified origin (VERSUS_APP_ORIGIN). */
  origin: string;
  port?: number;
  host?: string;
}

/** Starts the app server; resolves with its URL and a close function. */
export async function startAppServer(options: AppServerOptions): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  // The key (SERVICE_APP_KEY) and API (SERVICE_API_URL) come from the environment, read at each call.
  const matchmaking = createMatchmaking<Conditions>({ origin: options.origin });
  const server = createServer((req, res) => {
    req.resume(); // no route reads a request body
    route(matchmaking, req).then(
      ([status, body]) => reply(res, status, body),
      (error: unknown) => {
        if (error instanceof HttpError) return reply(res, error.status, { error: error.code });
        if (error instanceof MatchmakingError) {
          // The outcome of an unavailable or invalid_response call is unknown: the player may retry.
          const status = error.code === 'unavailable' || error.code === 'invalid_response' ? 503 : 502;
          console.error(`matchmaking failed: ${error.message}`);
          return reply(res, status, { error: 'matchmaking_failed', code: error.code });
        }
        console.error(error);
        return reply(res, 500, { error: 'internal' });
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 3000, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const origin = process.env['VERSUS_APP_ORIGIN'];
  if (!origin) {
    console.error('VERSUS_APP_ORIGIN is not set: run `npm run dev` and load .versus-dev/app.env (see examples/README.md)');
    process.exit(1);
  }
  try {
    const running = await startAppServer({ origin, port: Number(process.env['PORT'] ?? 3000), host: process.env['HOST'] ?? '127.0.0.1' });
    console.log(`app server listening on ${running.url}`);
    const stop = () => void running.close().then(() => process.exit(0));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
