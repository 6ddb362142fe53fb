import { bucketArgs, type RateLimit } from '../apps/limits.js';
import type { RedisClient } from '../redis/connection.js';
import type { Keys } from '../redis/keys.js';
import { ScriptRunner } from '../redis/scripts.js';
import { renderAdmission, renderTicket, type AdmissionReply, type TicketReply } from './render.js';
import type { ValidTicketInput } from './validation.js';

const SCRIPTS = ['createTicket', 'cancelTicket', 'listTickets'] as const;

/** A ticket, or a refusal (which wrote nothing); `rate_limited` comes with the wait until a token. */
export type CreateOutcome =
  | { ticket: string }
  | { conflict: 'ticket_conflict' | 'queue_conflict' }
  | { conflict: 'rate_limited'; retryAfterMs: number };

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

/** createTicket.lua's ARGV, in its header's order (exported for the benchmark's like-for-like baseline). */
export function createTicketArgs(valid: ValidTicketInput, clockFlag: '0' | '1', admissionLimit: RateLimit | null): string[] {
  const { input } = valid;
  const policy = input.queue.rating;
  return [
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
    clockFlag,
    ...(admissionLimit === null ? ['', ''] : bucketArgs(admissionLimit)),
  ];
}

/**
 * The one module that calls the matchmaking scripts: it builds their KEYS and ARGV (in the
 * order each script's header names) and turns their replies into rendered tickets.
 */
export class MatchmakingStore {
  private readonly scripts = new ScriptRunner(SCRIPTS);
  private readonly clockFlag: '0' | '1';

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

  /** `admissionLimit`: the app's (AppRecord.limits); null skips the bucket entirely. */
  async createTicket(appId: string, valid: ValidTicketInput, admissionLimit: RateLimit | null = null): Promise<CreateOutcome> {
    const reply = (await this.scripts.run(this.redis, 'createTicket', [this.keys.appScope(appId)], createTicketArgs(valid, this.clockFlag, admissionLimit))) as
      | [string, (TicketReply | number)?]
      | AdmissionReply;
    if (reply[0] === 'new') return { ticket: renderAdmission(valid, reply as AdmissionReply) };
    if (reply[0] === 'ok') return { ticket: renderTicket(reply[1] as TicketReply) };
    if (reply[0] === 'rate_limited') return { conflict: 'rate_limited', retryAfterMs: reply[1] as number };
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
