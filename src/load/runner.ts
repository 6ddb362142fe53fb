import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { classifyTicketReply, Poster, TokenSource } from './http.js';
import type { LoadOptions } from './options.js';
import { buildReport, type LoadReport, type ProgressSnapshot } from './report.js';
import { LoadStats } from './stats.js';
import { Workload } from './workload.js';

export interface RunHooks {
  /** Called every `progressIntervalMs` (default 1000) while the run lasts. */
  onProgress?: (snapshot: ProgressSnapshot) => void;
  progressIntervalMs?: number;
  /** Aborting closes the window now; in-flight requests still drain (up to the timeout). */
  signal?: AbortSignal;
  /** Fixed run ID (default: 8 random hex digits). */
  runId?: string;
}

/** The run could not start (the API is unreachable or refuses the app): one line, exit 1. */
export class LoadRunError extends Error {}

/**
 * Checks, before any load, that the API answers and accepts the app: one listTickets for an ID
 * no run uses (an unknown ID yields an empty page and writes nothing).
 */
async function preflight(poster: Poster, token: string, id: string, options: LoadOptions): Promise<void> {
  const reply = await poster.post(JSON.stringify({ operation: 'listTickets', input: { id } }), token, options.timeoutMs);
  if (reply.status === null) throw new LoadRunError(`no answer from ${poster.endpoint.href} (${reply.code})`);
  if (reply.status === 200) return;
  const body = reply.body as { error?: unknown } | undefined;
  const code = typeof body === 'object' && body !== null && typeof body.error === 'string' ? body.error : `HTTP ${reply.status}`;
  if (code === 'unauthenticated' || code === 'app_not_verified') {
    throw new LoadRunError(`${poster.endpoint.href} refused the app ${options.origin} (${code}): check --origin and --key`);
  }
  throw new LoadRunError(`${poster.endpoint.href} answered listTickets with ${code}`);
}

/**
 * Runs admissions against `options.url` for `options.durationMs`, then drains in-flight
 * requests (each bounded by `options.timeoutMs`), and reports.
 *
 * - Closed model (`concurrency`): each worker sends its next admission when its last one (and
 *   its cancel, if any) answered; latency is measured from the send.
 * - Open model (`rate`): admission k is scheduled at start + k / rate, whatever the replies do;
 *   latency is measured from the scheduled time, so a slow server shows in the percentiles
 *   instead of silently lowering the rate (no coordinated omission). At most `maxInFlight`
 *   requests are outstanding; admissions due beyond that wait, and those still waiting when
 *   the window closes are reported as `unsent`.
 * - A waiting admission chosen for cancellation is cancelled at once by the same unit of work.
 */
export async function runLoad(options: LoadOptions, hooks: RunHooks = {}): Promise<LoadReport> {
  const runId = hooks.runId ?? randomBytes(4).toString('hex');
  const workload = new Workload(options, options.idPrefix, runId);
  const model = options.model;
  const maxInFlight = model.kind === 'rate' ? model.maxInFlight : model.workers;
  const poster = new Poster(new URL(`${options.url}/api/matchmaking`), maxInFlight);
  const tokens = await TokenSource.start(options.key, options.origin);
  const stats = new LoadStats();
  let progressTimer: NodeJS.Timeout | undefined;
  let windowTimer: NodeJS.Timeout | undefined;
  let pumpTimer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;

  try {
    await preflight(poster, tokens.current, `${workload.base}-preflight`, options);

    const start = performance.now();
    let windowEnd = start + options.durationMs;
    let hardStop = windowEnd + options.timeoutMs;
    let windowClosed = false;
    let inFlight = 0;
    let next = 0;
    let closeWindow = (): void => {};
    /** A fault of the generator itself (never an API failure): ends the run and is rethrown. */
    let fault: unknown;
    let settle = (): void => {};
    const finished = new Promise<void>((resolve) => (settle = resolve));

    const budget = (): number => Math.min(options.timeoutMs, hardStop - performance.now());

    /** One admission, then its cancel if it waits and was chosen; resolves when both answered. */
    const unit = async (k: number, scheduledAt: number): Promise<void> => {
      const plan = workload.admission(k);
      stats.admissions.sent += 1;
      const reply = await poster.post(JSON.stringify({ operation: 'createTicket', input: plan.input }), tokens.current, budget());
      const result = classifyTicketReply(reply);
      stats.recordAdmission(result, performance.now() - scheduledAt);
      if (!result.ok || result.state !== 'waiting' || !plan.cancelIfWaiting) return;
      const left = budget();
      if (left < 1) return;
      stats.cancels.sent += 1;
      const sentAt = performance.now();
      const cancelReply = await poster.post(JSON.stringify({ operation: 'cancelTicket', input: { id: plan.input.id } }), tokens.current, left);
      stats.recordCancel(classifyTicketReply(cancelReply), performance.now() - sentAt);
    };

    const checkDone = (): void => {
      if (windowClosed && inFlight === 0) settle();
    };
    const close = (): void => {
      if (windowClosed) return;
      windowClosed = true;
      clearTimeout(windowTimer);
      closeWindow();
    };

    if (model.kind === 'concurrency') {
      const worker = async (): Promise<void> => {
        while (!windowClosed) {
          inFlight += 1;
          try {
            await unit(next++, performance.now());
          } catch (error) {
            fault ??= error;
            close();
          } finally {
            inFlight -= 1;
          }
        }
        checkDone();
      };
      closeWindow = checkDone;
      for (let i = 0; i < model.workers; i++) void worker();
    } else {
      const intervalMs = 1000 / model.perSecond;
      const dueAt = (k: number): number => start + k * intervalMs;
      const launch = (k: number): void => {
        inFlight += 1;
        unit(k, dueAt(k))
          .catch((error: unknown) => {
            fault ??= error;
            close();
          })
          .finally(() => {
            inFlight -= 1;
            if (windowClosed) checkDone();
            else pump();
          });
      };
      const pump = (): void => {
        clearTimeout(pumpTimer);
        pumpTimer = undefined;
        if (windowClosed) return;
        const now = performance.now();
        while (inFlight < maxInFlight && dueAt(next) <= now && dueAt(next) < windowEnd) launch(next++);
        // With a free slot, wake at the next due time; at the cap, the next reply wakes us.
        if (inFlight < maxInFlight && dueAt(next) < windowEnd) pumpTimer = setTimeout(pump, Math.max(0, dueAt(next) - now));
      };
      closeWindow = () => {
        clearTimeout(pumpTimer);
        // A late timer must not pass for a full cap: send what is due and fits, then count
        // the admissions due before the window closed but never sent (the cap held them back).
        while (inFlight < maxInFlight && dueAt(next) < windowEnd) launch(next++);
        // Count what was due with the same test the sender uses (dueAt(k) < windowEnd): the
        // quotient alone can round past an integer (start + 1000 - start may exceed 1000).
        let due = Math.max(0, Math.ceil((windowEnd - start) / intervalMs));
        while (due > 0 && dueAt(due - 1) >= windowEnd) due -= 1;
        while (dueAt(due) < windowEnd) due += 1;
        stats.unsent = Math.max(0, due - next);
        checkDone();
      };
      pump();
    }

    windowTimer = setTimeout(close, options.durationMs);
    if (hooks.signal) {
      onAbort = () => {
        windowEnd = Math.min(windowEnd, performance.now());
        hardStop = Math.min(hardStop, windowEnd + options.timeoutMs);
        close();
      };
      if (hooks.signal.aborted) onAbort();
      else hooks.signal.addEventListener('abort', onAbort, { once: true });
    }

    if (hooks.onProgress) {
      const onProgress = hooks.onProgress;
      const every = hooks.progressIntervalMs ?? 1000;
      let lastAt = start;
      let lastAnswered = 0;
      progressTimer = setInterval(() => {
        const now = performance.now();
        const answered = stats.admissions.ok + stats.admissions.failed;
        const rate = now > lastAt ? ((answered - lastAnswered) / (now - lastAt)) * 1000 : 0;
        lastAt = now;
        lastAnswered = answered;
        onProgress({
          elapsedMs: now - start,
          sent: stats.admissions.sent,
          ok: stats.admissions.ok,
          errors: stats.admissions.failed,
          inFlight,
          ratePerSecond: rate,
          draining: windowClosed,
        });
      }, every);
    }

    await finished;
    if (fault !== undefined) throw fault;
    const end = performance.now();
    return buildReport(stats, options, { id: runId, windowMs: Math.min(windowEnd, end) - start, elapsedMs: end - start });
  } finally {
    clearInterval(progressTimer);
    clearTimeout(windowTimer);
    clearTimeout(pumpTimer);
    if (onAbort) hooks.signal?.removeEventListener('abort', onAbort);
    tokens.stop();
    poster.close();
  }
}
