import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { parseSecretKey } from '../shared/ed25519.js';
import { canonicalOrigin } from '../shared/origin.js';

/** How `versus load` is driven. */
export type LoadModel =
  | { kind: 'rate'; perSecond: number; maxInFlight: number }
  | { kind: 'concurrency'; workers: number };

/** Everything one run needs, checked. */
export interface LoadOptions {
  /** The API base URL as given (http or https), without a trailing slash. */
  url: string;
  /** The app origin the tokens are issued for. */
  origin: string;
  /** The app key (base58 64-byte Ed25519 secret). */
  key: string;
  model: LoadModel;
  durationMs: number;
  /** Per-request time limit; also the cap on draining after the duration. */
  timeoutMs: number;
  players: number;
  queues: number;
  /** Share of admissions that are rated (in rated queues). */
  rated: number;
  /** Share of waiting admissions that are then cancelled. */
  cancel: number;
  seed: number;
  idPrefix: string;
  json: boolean;
}

export const LOAD_DEFAULTS = {
  concurrency: 32,
  durationMs: 10_000,
  timeoutMs: 10_000,
  players: 1000,
  queues: 10,
  rated: 0,
  cancel: 0,
  maxInFlight: 256,
  idPrefix: 'load-',
} as const;

export const LOAD_USAGE = `versus load — admissions load against a Versus deployment

  versus load [--url URL] [--origin O] [--key K]
              [--rate N [--max-in-flight ${LOAD_DEFAULTS.maxInFlight}] | --concurrency ${LOAD_DEFAULTS.concurrency}] [--duration 10s]
              [--players ${LOAD_DEFAULTS.players}] [--queues ${LOAD_DEFAULTS.queues}] [--rated 0] [--cancel 0]
              [--timeout 10s] [--seed N] [--id-prefix ${LOAD_DEFAULTS.idPrefix}] [--json]

  --url          API base URL, http(s) (default SERVICE_API_URL)
  --origin       the app's origin (default VERSUS_APP_ORIGIN)
  --key          the app key (default SERVICE_APP_KEY); tokens are signed locally and reused
  --rate         open model: admissions per second, latency from each scheduled send time
  --max-in-flight  open model: cap on requests in flight (admissions due beyond it are reported unsent)
  --concurrency  closed model: workers, each sending its next admission when the last one answered
  --duration     how long admissions are sent (500ms, 30s, 2m); in-flight requests then drain
  --players      distinct players the admissions are spread over
  --queues       queues (each has an unrated key and a rated twin)
  --rated        share of admissions that are rated, 0..1 (rating policy initial 50, widen 10/s, max 400)
  --cancel       share of waiting admissions that are then cancelled, 0..1
  --timeout      per-request time limit; also the longest drain after --duration
  --seed         workload seed (random by default; printed in the report)
  --id-prefix    prefix of the run's ticket IDs, players and queues (letters, digits, . _ : -)
  --json         one JSON object on stdout, no progress line`;

/** A bad flag or value: reported as one line, exit 1. */
export class LoadUsageError extends Error {}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const MAX_DURATION_MS = 24 * 3_600_000;
const ID_PREFIX = /^[A-Za-z0-9._:-]{0,64}$/;

/** `500ms`, `30s`, `2m`, `1h`, or a bare number of seconds. */
export function parseDuration(text: string, flag: string): number {
  const match = DURATION.exec(text.trim());
  if (!match) throw new LoadUsageError(`${flag} must be a duration such as 500ms, 30s or 2m (got "${text}")`);
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 's']!;
  if (!(ms >= 1)) throw new LoadUsageError(`${flag} must be at least 1ms`);
  if (ms > MAX_DURATION_MS) throw new LoadUsageError(`${flag} must be at most 24h`);
  return Math.round(ms);
}

function parseNumber(text: string, flag: string): number {
  const value = text.trim() === '' ? NaN : Number(text);
  if (!Number.isFinite(value)) throw new LoadUsageError(`${flag} must be a number (got "${text}")`);
  return value;
}

function parseInteger(text: string, flag: string, min: number, max: number): number {
  const value = parseNumber(text, flag);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new LoadUsageError(`${flag} must be an integer from ${min} to ${max} (got "${text}")`);
  }
  return value;
}

function parseShare(text: string, flag: string): number {
  const value = parseNumber(text, flag);
  if (value < 0 || value > 1) throw new LoadUsageError(`${flag} must be a share from 0 to 1 (got "${text}")`);
  return value;
}

/** An http(s) base URL with nothing but an optional path; returned without a trailing slash. */
export function parseBaseUrl(text: string, flag: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new LoadUsageError(`${flag} must be an http(s) URL (got "${text}")`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new LoadUsageError(`${flag} must be an http(s) URL (got "${text}")`);
  if (url.username || url.password || url.search || url.hash) {
    throw new LoadUsageError(`${flag} must not carry credentials, a query or a fragment`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

export type ParsedLoadArgs = { help: true } | { help: false; options: LoadOptions };

/**
 * Parses `versus load` arguments; flags win over the environment (SERVICE_API_URL,
 * VERSUS_APP_ORIGIN, SERVICE_APP_KEY). Throws LoadUsageError with a one-line message.
 */
export function parseLoadArgs(args: string[], env: Record<string, string | undefined> = process.env): ParsedLoadArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string' },
        origin: { type: 'string' },
        key: { type: 'string' },
        rate: { type: 'string' },
        concurrency: { type: 'string' },
        'max-in-flight': { type: 'string' },
        duration: { type: 'string' },
        timeout: { type: 'string' },
        players: { type: 'string' },
        queues: { type: 'string' },
        rated: { type: 'string' },
        cancel: { type: 'string' },
        seed: { type: 'string' },
        'id-prefix': { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    const lines = error instanceof Error ? error.message.split('\n') : [String(error)];
    const hint = lines.find((line) => line.startsWith('To specify an option argument starting with a dash'));
    const first = lines[0]!.replace(/\.? *To specify a positional argument.*$/, '').replace(/\.$/, '');
    throw new LoadUsageError(hint ? `${first}: ${hint.replace(/^To specify/, 'to give')}` : `${first} (versus load --help)`);
  }
  if (values['help'] === true) return { help: true };
  const str = (name: string): string | undefined => values[name] as string | undefined;

  const rateText = str('rate');
  const concurrencyText = str('concurrency');
  if (rateText !== undefined && concurrencyText !== undefined) throw new LoadUsageError('use --rate or --concurrency, not both');
  if (str('max-in-flight') !== undefined && rateText === undefined) throw new LoadUsageError('--max-in-flight applies to --rate only');
  let model: LoadModel;
  if (rateText !== undefined) {
    const perSecond = parseNumber(rateText, '--rate');
    if (perSecond <= 0 || perSecond > 1_000_000) throw new LoadUsageError(`--rate must be above 0 and at most 1000000 (got "${rateText}")`);
    const maxInFlight = str('max-in-flight') === undefined ? LOAD_DEFAULTS.maxInFlight : parseInteger(str('max-in-flight')!, '--max-in-flight', 1, 100_000);
    model = { kind: 'rate', perSecond, maxInFlight };
  } else {
    const workers = concurrencyText === undefined ? LOAD_DEFAULTS.concurrency : parseInteger(concurrencyText, '--concurrency', 1, 100_000);
    model = { kind: 'concurrency', workers };
  }

  const urlText = str('url') ?? (env['SERVICE_API_URL'] || undefined);
  if (urlText === undefined) throw new LoadUsageError('--url is required (or set SERVICE_API_URL)');
  const url = parseBaseUrl(urlText, str('url') !== undefined ? '--url' : 'SERVICE_API_URL');

  const origin = str('origin') ?? (env['VERSUS_APP_ORIGIN'] || undefined);
  if (origin === undefined) throw new LoadUsageError('--origin is required (or set VERSUS_APP_ORIGIN)');
  if (canonicalOrigin(origin, { allowLoopbackHttp: true }) === null) {
    const source = str('origin') !== undefined ? '--origin' : 'VERSUS_APP_ORIGIN';
    throw new LoadUsageError(`${source}: ${origin} is not a canonical origin (https://host[:port], lowercase, no path or trailing slash)`);
  }

  const keyFromFlag = str('key');
  const key = keyFromFlag ?? (env['SERVICE_APP_KEY'] || undefined);
  if (key === undefined) throw new LoadUsageError('--key is required (or set SERVICE_APP_KEY)');
  if (parseSecretKey(key) === null) {
    throw new LoadUsageError(`${keyFromFlag !== undefined ? '--key' : 'SERVICE_APP_KEY'}: not a base58 64-byte Ed25519 secret key`);
  }

  const idPrefix = str('id-prefix') ?? LOAD_DEFAULTS.idPrefix;
  if (!ID_PREFIX.test(idPrefix)) throw new LoadUsageError('--id-prefix must be at most 64 letters, digits or . _ : -');

  return {
    help: false,
    options: {
      url,
      origin,
      key,
      model,
      durationMs: str('duration') === undefined ? LOAD_DEFAULTS.durationMs : parseDuration(str('duration')!, '--duration'),
      timeoutMs: str('timeout') === undefined ? LOAD_DEFAULTS.timeoutMs : parseDuration(str('timeout')!, '--timeout'),
      players: str('players') === undefined ? LOAD_DEFAULTS.players : parseInteger(str('players')!, '--players', 1, 100_000_000),
      queues: str('queues') === undefined ? LOAD_DEFAULTS.queues : parseInteger(str('queues')!, '--queues', 1, 1_000_000),
      rated: str('rated') === undefined ? LOAD_DEFAULTS.rated : parseShare(str('rated')!, '--rated'),
      cancel: str('cancel') === undefined ? LOAD_DEFAULTS.cancel : parseShare(str('cancel')!, '--cancel'),
      seed: str('seed') === undefined ? randomBytes(4).readUInt32BE(0) : parseInteger(str('seed')!, '--seed', 0, 0xffff_ffff),
      idPrefix,
      json: values['json'] === true,
    },
  };
}
