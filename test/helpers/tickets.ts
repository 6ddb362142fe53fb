import type { TicketInput } from '../../src/shared/matchmaking-types.js';

let counter = 0;

/** A valid TicketInput with a fresh ID; override any field. */
export function ticket(overrides: Partial<TicketInput> & Record<string, unknown> = {}): TicketInput {
  counter += 1;
  return {
    id: `ticket-${counter}-${Math.random().toString(36).slice(2, 8)}`,
    player: `player-${counter}`,
    queue: { key: 'duel', size: 2 },
    payload: { seed: counter },
    ...overrides,
  } as TicketInput;
}

export const ratedQueue = (key: string, rating: { initial: number; widenPerSecond: number; max?: number }) => ({
  key,
  size: 2 as const,
  rating,
});
