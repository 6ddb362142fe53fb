import { describe, expect, it } from 'vitest';
import { generateKeyPair } from '../../src/shared/ed25519.js';
import { LOAD_DEFAULTS, LoadUsageError, parseDuration, parseLoadArgs, type LoadOptions } from '../../src/load/options.js';

const key = generateKeyPair().secretKey;
const base = ['--url', 'http://127.0.0.1:8080', '--origin', 'https://game.example', '--key', key];

function parse(args: string[], env: Record<string, string> = {}): LoadOptions {
  const parsed = parseLoadArgs(args, env);
  if (parsed.help) throw new Error('unexpected help');
  return parsed.options;
}

function refusal(args: string[], env: Record<string, string> = {}): string {
  try {
    parseLoadArgs(args, env);
  } catch (error) {
    expect(error).toBeInstanceOf(LoadUsageError);
    const message = (error as Error).message;
    expect(message).not.toContain('\n');
    return message;
  }
  throw new Error(`accepted ${args.join(' ')}`);
}

describe('versus load options', () => {
  it('has the documented defaults', () => {
    const options = parse(base);
    expect(options).toMatchObject({
      url: 'http://127.0.0.1:8080',
      origin: 'https://game.example',
      key,
      model: { kind: 'concurrency', workers: 32 },
      durationMs: 10_000,
      timeoutMs: 10_000,
      players: 1000,
      queues: 10,
      rated: 0,
      cancel: 0,
      idPrefix: 'load-',
      json: false,
    });
    expect(Number.isInteger(options.seed)).toBe(true);
    expect(LOAD_DEFAULTS.concurrency).toBe(32);
  });

  it('reads URL, origin and key from the environment; flags win', () => {
    const env = { SERVICE_API_URL: 'https://api.example/', VERSUS_APP_ORIGIN: 'https://env.example', SERVICE_APP_KEY: key };
    expect(parse([], env)).toMatchObject({ url: 'https://api.example', origin: 'https://env.example', key });
    expect(parse(['--url', 'http://localhost:9000', '--origin', 'https://flag.example'], env)).toMatchObject({
      url: 'http://localhost:9000',
      origin: 'https://flag.example',
    });
    // An empty variable counts as unset.
    expect(refusal([], { ...env, SERVICE_API_URL: '' })).toBe('--url is required (or set SERVICE_API_URL)');
  });

  it('parses every flag', () => {
    const options = parse([
      ...base,
      '--rate', '250.5',
      '--max-in-flight', '64',
      '--duration', '1500ms',
      '--timeout', '2s',
      '--players', '2',
      '--queues', '3',
      '--rated', '0.3',
      '--cancel', '0.1',
      '--seed', '42',
      '--id-prefix', 'ci.',
      '--json',
    ]);
    expect(options).toMatchObject({
      model: { kind: 'rate', perSecond: 250.5, maxInFlight: 64 },
      durationMs: 1500,
      timeoutMs: 2000,
      players: 2,
      queues: 3,
      rated: 0.3,
      cancel: 0.1,
      seed: 42,
      idPrefix: 'ci.',
      json: true,
    });
    expect(parse([...base, '--rate', '10']).model).toEqual({ kind: 'rate', perSecond: 10, maxInFlight: 256 });
    expect(parse([...base, '--concurrency', '4']).model).toEqual({ kind: 'concurrency', workers: 4 });
    expect(parseLoadArgs(['--help'], {})).toEqual({ help: true });
  });

  it('parses durations', () => {
    expect(parseDuration('30s', '--duration')).toBe(30_000);
    expect(parseDuration('30', '--duration')).toBe(30_000);
    expect(parseDuration('250ms', '--duration')).toBe(250);
    expect(parseDuration('1.5s', '--duration')).toBe(1500);
    expect(parseDuration('2m', '--duration')).toBe(120_000);
    expect(parseDuration('1h', '--duration')).toBe(3_600_000);
    for (const bad of ['', 's', '-1s', '1d', '0', '0ms', 'ten', '25h', '1e3']) {
      expect(() => parseDuration(bad, '--duration'), bad).toThrow(LoadUsageError);
    }
  });

  it('refuses bad flags with one line each', () => {
    expect(refusal([...base, '--rate', '10', '--concurrency', '4'])).toBe('use --rate or --concurrency, not both');
    // The conflict is reported even before the missing URL.
    expect(refusal(['--rate', '10', '--concurrency', '4'])).toBe('use --rate or --concurrency, not both');
    expect(refusal([...base, '--max-in-flight', '4'])).toBe('--max-in-flight applies to --rate only');
    expect(refusal([...base, '--rate', '0'])).toMatch(/^--rate must be above 0/);
    expect(refusal([...base, '--rate', 'fast'])).toMatch(/^--rate must be a number/);
    expect(refusal([...base, '--concurrency', '0'])).toMatch(/^--concurrency must be an integer from 1/);
    expect(refusal([...base, '--concurrency', '2.5'])).toMatch(/^--concurrency must be an integer/);
    expect(refusal([...base, '--players', '0'])).toMatch(/^--players must be an integer from 1/);
    expect(refusal([...base, '--queues', 'x'])).toMatch(/^--queues must be a number/);
    expect(refusal([...base, '--rated', '1.5'])).toBe('--rated must be a share from 0 to 1 (got "1.5")');
    expect(refusal([...base, '--cancel=-0.1'])).toBe('--cancel must be a share from 0 to 1 (got "-0.1")');
    expect(refusal([...base, '--cancel', '-0.1'])).toBe("Option '--cancel' argument is ambiguous: to give an option argument starting with a dash use '--cancel=-XYZ'.");
    expect(refusal([...base, '--seed=-1'])).toMatch(/^--seed must be an integer from 0 to 4294967295/);
    expect(refusal([...base, '--duration', 'forever'])).toMatch(/^--duration must be a duration/);
    expect(refusal([...base, '--id-prefix', 'has space'])).toMatch(/^--id-prefix must be/);
    expect(refusal([...base, '--id-prefix', 'x'.repeat(65)])).toMatch(/^--id-prefix must be/);
    expect(refusal([...base, '--bogus'])).toBe("Unknown option '--bogus' (versus load --help)");
    expect(refusal([...base, '--rate'])).toMatch(/argument missing/);
    expect(refusal([...base, 'extra'])).toMatch(/^Unexpected argument 'extra'/);
  });

  it('refuses a missing or malformed URL, origin or key', () => {
    const [, url, , origin, , k] = base as [string, string, string, string, string, string];
    expect(refusal(['--origin', origin, '--key', k])).toBe('--url is required (or set SERVICE_API_URL)');
    expect(refusal(['--url', url, '--key', k])).toBe('--origin is required (or set VERSUS_APP_ORIGIN)');
    expect(refusal(['--url', url, '--origin', origin])).toBe('--key is required (or set SERVICE_APP_KEY)');
    expect(refusal(['--url', 'ftp://host', '--origin', origin, '--key', k])).toBe('--url must be an http(s) URL (got "ftp://host")');
    expect(refusal(['--url', 'not a url', '--origin', origin, '--key', k])).toMatch(/^--url must be an http\(s\) URL/);
    expect(refusal(['--url', 'https://u:p@api.example', '--origin', origin, '--key', k])).toMatch(/credentials/);
    expect(refusal(['--url', url, '--origin', 'https://game.example/', '--key', k])).toMatch(/^--origin: https:\/\/game\.example\/ is not a canonical origin/);
    expect(refusal(['--url', url, '--origin', 'http://game.example', '--key', k])).toMatch(/not a canonical origin/);
    expect(refusal(['--url', url, '--origin', origin, '--key', 'abc'])).toBe('--key: not a base58 64-byte Ed25519 secret key');
    expect(refusal(['--url', url, '--origin', origin], { SERVICE_APP_KEY: 'abc' })).toBe('SERVICE_APP_KEY: not a base58 64-byte Ed25519 secret key');
    // A base path is kept (a deployment behind a path prefix); a trailing slash is dropped.
    expect(parse(['--url', 'https://edge.example/versus/', '--origin', origin, '--key', k]).url).toBe('https://edge.example/versus');
    // A loopback http app origin is accepted (local development).
    expect(parse(['--url', url, '--origin', 'http://127.0.0.1:3000', '--key', k]).origin).toBe('http://127.0.0.1:3000');
  });
});
