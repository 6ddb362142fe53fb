import type { RedisClient } from '../redis/connection.js';
import type { Keys } from '../redis/keys.js';
import { ScriptRunner } from '../redis/scripts.js';
import { renderTicket, type TicketReply } from './render.js';
import type { ValidTicketInput } from './validation.js';

const SCRIPTS = ['createTicket', 'cancelTicket', 'listTickets'] as const;

export type CreateOutcome = { ticket: string } | { conflict: 'ticket_conflict' | 'queue_conflict' };

export interface ListPosition {
  player?: string | undefined;
  id?: string | undefined;
  /** "" on a first page. */
  snapshot: string;
  after: string;
}

export interface ListOutcome {
  snapshot: string;
  /** Rendered Ticket JSON texts, in creation order. */
  tickets: string[];
  /** Sequence to continue after, or null on the last page. */
  nextAfter: string | null;
}

const optional = (value: number | undefined) => (value === undefined ? '' : JSON.stringify(value));

/**
 * The one module that calls the matchmaking scripts: it builds their KEYS and ARGV (in the
 * order each script's header names) and turns their replies into rendered tickets.
 */
export class MatchmakingStore {
  private readonly scripts = new ScriptRunner(SCRIPTS);
  private readonly clockFlag: string;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    options: { testClock: boolean },
  ) {
    this.clockFlag = options.testClock ? '1' : '0';
  }

  get scriptsLoaded(): boolean {
    return this.scripts.isLoaded;
  }

  preload(): Promise<void> {
    return this.scripts.preload(this.redis);
  }

  async createTicket(appId: string, valid: ValidTicketInput): Promise<CreateOutcome> {
    const { input } = valid;
    const policy = input.queue.rating;
    const reply = (await this.scripts.run(this.redis, 'createTicket', [this.keys.appScope(appId)], [
      input.id,
      input.player,
      input.queue.key,
      valid.policyJson,
      valid.payloadJson,
      optional(input.rating),
      optional(input.expiresAt),
      optional(policy?.initial),
      optional(policy?.widenPerSecond),
      optional(policy?.max),
      this.clockFlag,
    ])) as [string, TicketReply?];
    if (reply[0] === 'ok') return { ticket: renderTicket(reply[1]!) };
    return { conflict: reply[0] as 'ticket_conflict' | 'queue_conflict' };
  }

  async cancelTicket(appId: string, id: string): Promise<string> {
    const reply = (await this.scripts.run(this.redis, 'cancelTicket', [this.keys.appScope(appId)], [id, this.clockFlag])) as [
      string,
      TicketReply,
    ];
    return renderTicket(reply[1]);
  }

  async listTickets(appId: string, position: ListPosition, pageSize: number): Promise<ListOutcome> {
    const reply = (await this.scripts.run(this.redis, 'listTickets', [this.keys.appScope(appId)], [
      position.player ?? '',
      position.id ?? '',
      position.snapshot,
      position.after,
      pageSize,
      this.clockFlag,
    ])) as [string, TicketReply[], string];
    return { snapshot: reply[0], tickets: reply[1].map(renderTicket), nextAfter: reply[2] === '' ? null : reply[2] };
  }
}
