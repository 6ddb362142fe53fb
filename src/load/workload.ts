import type { RatingPolicy, TicketInput } from '../shared/matchmaking-types.js';

/** The policy of every rated queue of a run. */
export const RATING_POLICY: RatingPolicy = { initial: 50, widenPerSecond: 10, max: 400 };
/** Player ratings: roughly normal around this mean with this spread, clamped to 0..3000. */
export const RATING_MEAN = 1500;
export const RATING_SPREAD = 300;

export interface WorkloadShape {
  players: number;
  queues: number;
  rated: number;
  cancel: number;
  seed: number;
}

/** One planned admission: the ticket input, and whether to cancel it should it wait. */
export interface PlannedAdmission {
  input: TicketInput<{ seed: number }>;
  cancelIfWaiting: boolean;
}

/** A 32-bit integer hash (lowbias32). */
function mix32(value: number): number {
  let x = value | 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/** A uniform number in [0, 1) fixed by (seed, index, salt). */
export function uniform(seed: number, index: number, salt: number): number {
  return mix32(seed ^ mix32(index ^ mix32(salt + 0x9e3779b9))) / 0x1_0000_0000;
}

/**
 * The workload of one run. Admission `k` is a pure function of (seed, k): the same seed gives
 * the same players, queues, ratings and cancel choices whatever order requests complete in.
 * Ticket IDs, players and queue keys all carry `prefix + runId`, so runs never share tickets or
 * queues (and a queue's rating policy, fixed by its first admission, never conflicts).
 */
export class Workload {
  readonly base: string;

  constructor(
    readonly shape: WorkloadShape,
    idPrefix: string,
    readonly runId: string,
  ) {
    this.base = `${idPrefix}${runId}`;
  }

  ticketId(k: number): string {
    return `${this.base}-t${k}`;
  }

  player(index: number): string {
    return `${this.base}-p${index}`;
  }

  queueKey(index: number, rated: boolean): string {
    return `${this.base}-q${index}${rated ? '-rated' : ''}`;
  }

  /** A player's fixed rating (sum of three uniforms: a cheap bell curve). */
  rating(playerIndex: number): number {
    const { seed } = this.shape;
    const sum = uniform(seed, playerIndex, 101) + uniform(seed, playerIndex, 102) + uniform(seed, playerIndex, 103);
    const value = Math.round(RATING_MEAN + (sum - 1.5) * 2 * RATING_SPREAD);
    return Math.min(3000, Math.max(0, value));
  }

  admission(k: number): PlannedAdmission {
    const { seed, players, queues, rated, cancel } = this.shape;
    const playerIndex = Math.floor(uniform(seed, k, 1) * players);
    const queueIndex = Math.floor(uniform(seed, k, 2) * queues);
    const isRated = uniform(seed, k, 3) < rated;
    const input: TicketInput<{ seed: number }> = isRated
      ? {
          id: this.ticketId(k),
          player: this.player(playerIndex),
          queue: { key: this.queueKey(queueIndex, true), size: 2, rating: RATING_POLICY },
          payload: { seed: Math.floor(uniform(seed, k, 4) * 1_000_000) },
          rating: this.rating(playerIndex),
        }
      : {
          id: this.ticketId(k),
          player: this.player(playerIndex),
          queue: { key: this.queueKey(queueIndex, false), size: 2 },
          payload: { seed: Math.floor(uniform(seed, k, 4) * 1_000_000) },
        };
    return { input, cancelIfWaiting: uniform(seed, k, 5) < cancel };
  }
}
