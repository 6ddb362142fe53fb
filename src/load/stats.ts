import { build, type Histogram } from 'hdr-histogram-js';

/** Latencies are recorded in microseconds, up to an hour, to 3 significant digits. */
const HIGHEST_US = 3_600_000_000;

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** An HDR histogram of latencies in milliseconds (stored as whole microseconds). */
export class LatencyHistogram {
  private readonly histogram: Histogram = build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: 3,
    autoResize: false,
  });

  recordMs(ms: number): void {
    const us = Math.min(HIGHEST_US, Math.max(1, Math.round(ms * 1000)));
    this.histogram.recordValue(us);
  }

  get count(): number {
    return this.histogram.totalCount;
  }

  /** Percentiles, max and mean in ms, to the microsecond; all 0 when nothing was recorded. */
  summary(): LatencySummary {
    const h = this.histogram;
    if (h.totalCount === 0) return { count: 0, p50: 0, p95: 0, p99: 0, max: 0, mean: 0 };
    // A percentile is the top of its bucket (3 significant digits), so it may pass the exact max.
    const max = h.maxValue;
    const ms = (us: number): number => Math.round(Math.min(us, max)) / 1000;
    return {
      count: h.totalCount,
      p50: ms(h.getValueAtPercentile(50)),
      p95: ms(h.getValueAtPercentile(95)),
      p99: ms(h.getValueAtPercentile(99)),
      max: ms(max),
      mean: ms(h.mean),
    };
  }
}

/** Counts by name, kept in first-seen order and reported sorted by count. */
export class Tally {
  private readonly counts = new Map<string, number>();

  add(name: string, by = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + by);
  }

  get total(): number {
    let total = 0;
    for (const n of this.counts.values()) total += n;
    return total;
  }

  /** Most frequent first, ties by name. */
  toObject(): Record<string, number> {
    const entries = [...this.counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return Object.fromEntries(entries);
  }
}

/** The result of one request, as the runner sees it. */
export type RequestResult = { ok: true; state: 'waiting' | 'matched' | 'cancelled'; matchId: string | null } | { ok: false; code: string };

/** Counters and latencies of one operation (createTicket or cancelTicket). */
export class OperationStats {
  sent = 0;
  ok = 0;
  readonly states = new Tally();
  readonly errors = new Tally();
  readonly latency = new LatencyHistogram();

  get failed(): number {
    return this.errors.total;
  }

  record(result: RequestResult, latencyMs: number): void {
    this.latency.recordMs(latencyMs);
    if (result.ok) {
      this.ok += 1;
      this.states.add(result.state);
    } else {
      this.errors.add(result.code);
    }
  }
}

/** Everything a run counts. */
export class LoadStats {
  readonly admissions = new OperationStats();
  readonly cancels = new OperationStats();
  /** Distinct match IDs in any answer: each is one pair. */
  readonly matchIds = new Set<string>();
  /** Admissions due in the open model that were never sent (in-flight cap reached). */
  unsent = 0;

  recordAdmission(result: RequestResult, latencyMs: number): void {
    this.admissions.record(result, latencyMs);
    if (result.ok && result.matchId !== null) this.matchIds.add(result.matchId);
  }

  recordCancel(result: RequestResult, latencyMs: number): void {
    this.cancels.record(result, latencyMs);
    if (result.ok && result.matchId !== null) this.matchIds.add(result.matchId);
  }
}
