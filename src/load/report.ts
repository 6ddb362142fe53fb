import type { LoadModel, LoadOptions } from './options.js';
import type { LatencySummary, LoadStats, OperationStats } from './stats.js';

/** What a run reports; `--json` prints exactly this object. */
export interface LoadReport {
  /** The run's options as given (the key left out), its ID and its model flattened. */
  run: Pick<LoadOptions, 'seed' | 'url' | 'origin' | 'durationMs' | 'timeoutMs' | 'players' | 'queues' | 'rated' | 'cancel' | 'idPrefix'> & {
    id: string;
    model: LoadModel['kind'];
    /** Target admissions per second (open model), else null. */
    rate: number | null;
    maxInFlight: number | null;
    /** Workers (closed model), else null. */
    concurrency: number | null;
  };
  /** Time admissions were sent (the duration, or less when stopped early). */
  windowMs: number;
  /** From the first send until the last reply (the window plus draining). */
  elapsedMs: number;
  admissions: {
    sent: number;
    ok: number;
    errors: number;
    /** Open model: admissions due that were never sent because the in-flight cap was reached. */
    unsent: number;
    /** Accepted admissions per second of elapsed time. */
    perSecond: number;
    /** States of the accepted admissions as answered. */
    states: { waiting: number; matched: number; cancelled: number };
    /** Open model: from each scheduled send time; closed model: from the send. */
    latencyMs: LatencySummary;
    errorCodes: Record<string, number>;
  };
  cancels: {
    sent: number;
    ok: number;
    errors: number;
    /** `matched` means pairing won the race with the cancellation. */
    states: { cancelled: number; matched: number };
    latencyMs: LatencySummary;
    errorCodes: Record<string, number>;
  };
  matches: {
    /** Distinct match IDs seen in any answer: each is one pair of this run's tickets. */
    pairs: number;
    /** createTicket answers in state matched (the joining side of each pair). */
    matchedAdmissions: number;
  };
  /** Every failed request by code, both operations together. */
  errors: Record<string, number>;
}

function stateCount(op: OperationStats, state: string): number {
  return op.states.toObject()[state] ?? 0;
}

function combine(...tallies: Array<Record<string, number>>): Record<string, number> {
  const all = new Map<string, number>();
  for (const tally of tallies) for (const [code, n] of Object.entries(tally)) all.set(code, (all.get(code) ?? 0) + n);
  return Object.fromEntries([...all.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)));
}

export function buildReport(stats: LoadStats, options: LoadOptions, run: { id: string; windowMs: number; elapsedMs: number }): LoadReport {
  const { admissions, cancels } = stats;
  const model = options.model;
  const admissionErrors = admissions.errors.toObject();
  const cancelErrors = cancels.errors.toObject();
  return {
    run: {
      id: run.id,
      seed: options.seed,
      url: options.url,
      origin: options.origin,
      model: model.kind,
      rate: model.kind === 'rate' ? model.perSecond : null,
      maxInFlight: model.kind === 'rate' ? model.maxInFlight : null,
      concurrency: model.kind === 'concurrency' ? model.workers : null,
      durationMs: options.durationMs,
      timeoutMs: options.timeoutMs,
      players: options.players,
      queues: options.queues,
      rated: options.rated,
      cancel: options.cancel,
      idPrefix: options.idPrefix,
    },
    windowMs: Math.round(run.windowMs),
    elapsedMs: Math.round(run.elapsedMs),
    admissions: {
      sent: admissions.sent,
      ok: admissions.ok,
      errors: admissions.failed,
      unsent: stats.unsent,
      perSecond: run.elapsedMs > 0 ? Math.round((admissions.ok / run.elapsedMs) * 1000 * 10) / 10 : 0,
      states: { waiting: stateCount(admissions, 'waiting'), matched: stateCount(admissions, 'matched'), cancelled: stateCount(admissions, 'cancelled') },
      latencyMs: admissions.latency.summary(),
      errorCodes: admissionErrors,
    },
    cancels: {
      sent: cancels.sent,
      ok: cancels.ok,
      errors: cancels.failed,
      states: { cancelled: stateCount(cancels, 'cancelled'), matched: stateCount(cancels, 'matched') },
      latencyMs: cancels.latency.summary(),
      errorCodes: cancelErrors,
    },
    matches: { pairs: stats.matchIds.size, matchedAdmissions: stateCount(admissions, 'matched') },
    errors: combine(admissionErrors, cancelErrors),
  };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;
const percent = (share: number): string => `${Math.round(share * 1000) / 10}%`;
const fixed = (ms: number): string => ms.toFixed(2);

function codes(tally: Record<string, number>): string {
  return Object.entries(tally)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
}

function latencyLine(l: LatencySummary): string {
  return `p50 ${fixed(l.p50)}   p95 ${fixed(l.p95)}   p99 ${fixed(l.p99)}   max ${fixed(l.max)}   mean ${fixed(l.mean)}`;
}

/** The human report: a dozen aligned lines. */
export function formatReport(report: LoadReport): string {
  const { run, admissions, cancels, matches } = report;
  const driven =
    run.model === 'rate'
      ? `rate ${run.rate}/s (at most ${run.maxInFlight} in flight)`
      : `concurrency ${run.concurrency}`;
  const lines = [
    `versus load  run ${run.id}  seed ${run.seed}  ${run.url} as ${run.origin}`,
    `  ${driven} for ${seconds(report.windowMs)}, ${seconds(report.elapsedMs)} with draining; ${run.players} players, ${run.queues} queues, rated ${percent(run.rated)}, cancel ${percent(run.cancel)}`,
    '',
    `admissions   ${admissions.sent} sent   ${admissions.ok} ok   ${admissions.errors} errors   ${admissions.perSecond}/s`,
    `  answered   matched ${admissions.states.matched}   waiting ${admissions.states.waiting}   cancelled ${admissions.states.cancelled}`,
  ];
  if (admissions.unsent > 0) {
    lines.push(`  unsent     ${admissions.unsent} due but not sent: ${run.maxInFlight} in flight (the target rate was not reached)`);
  }
  lines.push(
    `cancels      ${cancels.sent} sent   ${cancels.ok} ok   ${cancels.errors} errors   (cancelled ${cancels.states.cancelled}, matched ${cancels.states.matched})`,
    `matches      ${matches.pairs} pairs (${matches.matchedAdmissions} admissions answered matched)`,
    `latency ms   ${latencyLine(admissions.latencyMs)}   createTicket${run.model === 'rate' ? ', from scheduled send' : ''}`,
  );
  if (cancels.latencyMs.count > 0) lines.push(`             ${latencyLine(cancels.latencyMs)}   cancelTicket`);
  if (admissions.errors === 0 && cancels.errors === 0) {
    lines.push('errors       none');
  } else {
    const parts: string[] = [];
    if (admissions.errors > 0) parts.push(`createTicket: ${codes(admissions.errorCodes)}`);
    if (cancels.errors > 0) parts.push(`cancelTicket: ${codes(cancels.errorCodes)}`);
    lines.push(`errors       ${parts[0]}`, ...parts.slice(1).map((p) => `             ${p}`));
  }
  return `${lines.join('\n')}\n`;
}

/** A progress sample, taken every second while a run lasts. */
export interface ProgressSnapshot {
  elapsedMs: number;
  sent: number;
  ok: number;
  errors: number;
  inFlight: number;
  /** Admissions answered per second over the last interval. */
  ratePerSecond: number;
  /** True once the window closed and in-flight requests are draining. */
  draining: boolean;
}

export function formatProgress(p: ProgressSnapshot): string {
  return `${seconds(p.elapsedMs).padStart(7)}  sent ${p.sent}  ok ${p.ok}  errors ${p.errors}  in flight ${p.inFlight}  ${Math.round(p.ratePerSecond)}/s${p.draining ? '  draining' : ''}`;
}
