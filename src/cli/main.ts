#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { changeOf, describeLimit, NO_LIMITS, setLimits, shownLimits } from '../apps/limits.js';
import { issueManifest } from '../apps/manifest.js';
import { AppRegistry, type AppRecord } from '../apps/registry.js';
import { registerManifest, verifyApp } from '../apps/verification.js';
import { loadConfig, type Config } from '../config.js';
import { createRedis, waitForReady, type RedisClient } from '../redis/connection.js';
import { Keys } from '../redis/keys.js';
import { generateKeyPair, parseSecretKey } from '../shared/ed25519.js';
import { canonicalOrigin } from '../shared/origin.js';
import { createKeyProof, signAppToken } from '../shared/tokens.js';
import { readAppKeyFromEnv, readAppOriginFromEnv } from './env.js';

const USAGE = `versus — head-to-head matchmaking and app notifications

  versus dev                                     Redis, demo app, API, push worker and a loopback push service
  versus serve [--role api|worker|all]           run the service (PORT, HOST)
  versus keygen                                  print a new key pair as JSON
  versus manifest proof --origin O               sign a key proof with SERVICE_APP_KEY
  versus manifest issue --origin O --name N --app-key PUB --proof JWS [--push | --push-key PUB] [--staging]
  versus apps register --manifest FILE|-         verify a manifest in hand and store the app
  versus apps verify O [--allow-insecure-loopback]
  versus apps show O                             print the app record as JSON (without the manifest;
                                                 limits null = none)
  versus apps list                               one line per app: origin, name, environment,
                                                 verified|unverified, push=yes|no|legacy-key (tab-separated)
  versus apps mute O [--off]                     mute (or unmute) the app's notifications (push_muted)
  versus apps audience O --recent-days N [--user-days N]
                                                 broadcast audience window; notifyUser window (default 90)
  versus apps limits O [--admissions N/s|N/min|N/h|off] [--admission-burst N]
                       [--notifications N/s|N/min|N/h|off] [--notification-burst N]
                                                 per-app rate limits (default none; burst defaults to N);
                                                 refusals are 429 {"error":"unavailable"}; no flags: print them
  versus apps stats O [--json]                   tickets by state, waiting per queue, Redis memory (estimate)
  versus token                                   print a fresh app JWT (SERVICE_APP_KEY, VERSUS_APP_ORIGIN)
  versus load [--url U] [--origin O] [--key K] [--rate N [--max-in-flight 256] | --concurrency 32]
              [--duration 10s] [--timeout 10s] [--players 1000] [--queues 10] [--rated 0] [--cancel 0]
              [--seed N] [--id-prefix load-] [--json]
                                                 admissions load against a deployment (SERVICE_API_URL,
                                                 VERSUS_APP_ORIGIN, SERVICE_APP_KEY); report on stdout

Configuration comes from the environment (see README.md).`;

/** A failure to report as one line, exit 1. */
class CliError extends Error {}

function readStdin(): string {
  return readFileSync(0, 'utf8');
}

function need(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new CliError(`${flag} is required`);
  return value;
}

function originArg(value: string | undefined, allowLoopbackHttp = false): string {
  const origin = need(value, 'an origin');
  if (canonicalOrigin(origin, { allowLoopbackHttp }) === null) {
    throw new CliError(`${origin} is not a canonical origin (https://host[:port], lowercase, no path or trailing slash)`);
  }
  return origin;
}

/** Runs `action` on a fresh connection to the configured Redis (or cluster), closed afterwards. */
async function withRedis<T>(config: Config, action: (redis: RedisClient, keys: Keys) => Promise<T>): Promise<T> {
  const redis: RedisClient = createRedis(config, { name: 'versus-cli' });
  redis.on('error', () => {});
  try {
    await waitForReady(redis, 5000).catch(() => {
      throw new CliError(`no Redis answers at ${config.redisClusterNodes ? 'REDIS_CLUSTER_NODES' : config.redisUrl}`);
    });
    return await action(redis, new Keys(config.keyPrefix));
  } finally {
    redis.disconnect();
  }
}

function withRegistry<T>(config: Config, action: (registry: AppRegistry) => Promise<T>): Promise<T> {
  return withRedis(config, (redis, keys) => action(new AppRegistry(redis, keys, 0)));
}

/** SERVICE_APP_KEY, checked: the app's own secret key (see env.ts). */
function appSecretKey(): string {
  const key = need(readAppKeyFromEnv(), 'SERVICE_APP_KEY');
  if (!parseSecretKey(key)) throw new CliError('SERVICE_APP_KEY: not a base58 64-byte Ed25519 secret key');
  return key;
}

/** Runs an operator action, reporting its refusal as one line. */
async function adminCall<T>(action: () => Promise<T>): Promise<T> {
  const { AdminError } = await import('../push/admin.js');
  try {
    return await action();
  } catch (error) {
    if (error instanceof AdminError) throw new CliError(error.message);
    throw error;
  }
}

/** The record as operators see it: everything but the manifest text, and the limits (null: none) as rates. */
function shown(record: AppRecord): Omit<AppRecord, 'manifest' | 'limits'> & { limits: ReturnType<typeof shownLimits> } {
  const { manifest: _manifest, limits, ...rest } = record;
  return { ...rest, limits: shownLimits(limits ?? NO_LIMITS) };
}

export async function main(argv: string[]): Promise<void> {
  const [command, sub, ...rest] = argv;
  // `versus load --help` is the load command's own usage; anywhere else --help shows this one.
  if (command === undefined || command === 'help' || (command !== 'load' && (argv.includes('--help') || argv.includes('-h')))) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  switch (command) {
    case 'keygen':
      process.stdout.write(`${JSON.stringify(generateKeyPair())}\n`);
      return;
    case 'token': {
      const key = appSecretKey();
      const origin = need(readAppOriginFromEnv(), 'VERSUS_APP_ORIGIN');
      if (canonicalOrigin(origin, { allowLoopbackHttp: true }) === null) {
        throw new CliError(`VERSUS_APP_ORIGIN: ${origin} is not a canonical origin (https://host[:port], lowercase, no path or trailing slash)`);
      }
      process.stdout.write(`${await signAppToken(key, origin)}\n`);
      return;
    }
    case 'serve': {
      const { values } = parseArgs({ args: [sub, ...rest].filter((a): a is string => a !== undefined), options: { role: { type: 'string', default: 'all' } } });
      const role = values.role;
      if (role !== 'api' && role !== 'worker' && role !== 'all') throw new CliError('--role must be api, worker or all');
      const { runServe } = await import('../http/server.js');
      await runServe(loadConfig(), role);
      return;
    }
    case 'dev': {
      const { runDev } = await import('./dev.js');
      await runDev();
      return;
    }
    case 'load': {
      const { runLoadCommand } = await import('../load/cli.js');
      await runLoadCommand([sub, ...rest].filter((a): a is string => a !== undefined));
      return;
    }
    case 'manifest':
      return manifestCommand(sub, rest);
    case 'apps':
      return appsCommand(sub, rest);
    default:
      throw new CliError(`unknown command "${command}" (versus --help lists them)`);
  }
}

async function manifestCommand(sub: string | undefined, args: string[]): Promise<void> {
  if (sub === 'proof') {
    const { values } = parseArgs({ args, options: { origin: { type: 'string' } } });
    const origin = originArg(values.origin, true);
    process.stdout.write(`${await createKeyProof(appSecretKey(), origin)}\n`);
    return;
  }
  if (sub === 'issue') {
    const { values } = parseArgs({
      args,
      options: {
        origin: { type: 'string' },
        name: { type: 'string' },
        'app-key': { type: 'string' },
        proof: { type: 'string' },
        push: { type: 'boolean', default: false },
        'push-key': { type: 'string' },
        staging: { type: 'boolean', default: false },
      },
    });
    if (values.push && values['push-key'] !== undefined) throw new CliError('use --push or --push-key, not both');
    const config = loadConfig();
    const push = values['push-key'] ?? (values.push ? true : undefined);
    const manifest = await issueManifest({
      signingKey: need(config.signingKey ?? undefined, 'SERVICE_SIGNING_KEY'),
      origin: originArg(values.origin, true),
      name: need(values.name, '--name'),
      appKey: need(values['app-key'], '--app-key'),
      proof: need(values.proof, '--proof'),
      ...(push === undefined ? {} : { push }),
      staging: values.staging,
    });
    process.stdout.write(`${manifest}\n`);
    return;
  }
  throw new CliError('usage: versus manifest proof|issue … (versus --help)');
}

async function appsCommand(sub: string | undefined, args: string[]): Promise<void> {
  const config = loadConfig();
  switch (sub) {
    case 'register': {
      const { values } = parseArgs({ args, options: { manifest: { type: 'string' } } });
      const source = need(values.manifest, '--manifest');
      const jws = source === '-' ? readStdin() : readFileSync(source, 'utf8');
      const record = await withRegistry(config, (registry) => registerManifest(jws, { registry, config }));
      process.stdout.write(`registered ${record.origin} (${record.name}, ${record.environment})\n`);
      return;
    }
    case 'verify': {
      const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'allow-insecure-loopback': { type: 'boolean', default: false } } });
      const allow = values['allow-insecure-loopback'];
      const origin = need(positionals[0], 'an origin');
      const record = await withRegistry(config, (registry) => verifyApp(origin, { registry, config, allowInsecureLoopback: allow }));
      process.stdout.write(`verified ${record.origin} (${record.name}, ${record.environment})\n`);
      return;
    }
    case 'show': {
      const origin = originArg(args[0], true);
      const record = await withRegistry(config, (registry) => registry.fetch(origin));
      if (!record) throw new CliError(`no app ${origin}`);
      process.stdout.write(`${JSON.stringify(shown(record), null, 2)}\n`);
      return;
    }
    case 'list': {
      const records = await withRegistry(config, (registry) => registry.list());
      for (const r of records) {
        process.stdout.write(`${r.origin}\t${r.name}\t${r.environment}\t${r.verified ? 'verified' : 'unverified'}\tpush=${r.push === false ? 'no' : r.push === true ? 'yes' : 'legacy-key'}\n`);
      }
      return;
    }
    case 'mute': {
      const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { off: { type: 'boolean', default: false } } });
      const origin = originArg(positionals[0], true);
      const { setPushMuted } = await import('../push/admin.js');
      const record = await withRegistry(config, (registry) => adminCall(() => setPushMuted(registry, origin, !values.off)));
      process.stdout.write(`${record.pushMuted ? 'muted' : 'unmuted'} ${record.origin}\n`);
      return;
    }
    case 'audience': {
      const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'recent-days': { type: 'string' }, 'user-days': { type: 'string' } } });
      const origin = originArg(positionals[0], true);
      const { parseDays, setAudience } = await import('../push/admin.js');
      const record = await withRegistry(config, (registry) =>
        adminCall(() => {
          const recent = parseDays(values['recent-days'], '--recent-days');
          const user = values['user-days'] === undefined ? undefined : parseDays(values['user-days'], '--user-days');
          return setAudience(registry, origin, recent, user);
        }),
      );
      process.stdout.write(`${record.origin}: broadcast audience ${record.audienceDays} days, user window ${record.userDays} days\n`);
      return;
    }
    case 'limits': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: {
          admissions: { type: 'string' },
          'admission-burst': { type: 'string' },
          notifications: { type: 'string' },
          'notification-burst': { type: 'string' },
        },
      });
      const origin = originArg(positionals[0], true);
      // A LimitError (bad flag, unknown app) is reported like any failure: one line, exit 1.
      const admissions = changeOf(values.admissions, values['admission-burst'], 'admission');
      const notifications = changeOf(values.notifications, values['notification-burst'], 'notification');
      const change = { ...(admissions ? { admissions } : {}), ...(notifications ? { notifications } : {}) };
      const record = await withRegistry(config, (registry) => setLimits(registry, origin, change));
      const limits = record.limits ?? NO_LIMITS;
      process.stdout.write(`${record.origin}: admissions ${describeLimit(limits.admissions)}, notifications ${describeLimit(limits.notifications)}\n`);
      return;
    }
    case 'stats': {
      const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { json: { type: 'boolean', default: false } } });
      if (positionals.length > 1) throw new CliError('usage: versus apps stats O [--json]');
      const origin = originArg(positionals[0], true);
      const { appStats, formatAppStats } = await import('../matchmaking/stats.js');
      const stats = await withRedis(config, (redis, keys) => appStats(redis, keys, origin, { testClock: config.testClock }));
      if (!stats) throw new CliError(`no app ${origin}`);
      process.stdout.write(values.json ? `${JSON.stringify(stats, null, 2)}\n` : formatAppStats(stats));
      return;
    }
    default:
      throw new CliError('usage: versus apps register|verify|show|list|mute|audience|limits|stats … (versus --help)');
  }
}

/** Every failure: one line on stderr, exit 1, never a stack trace. */
function fail(error: unknown): never {
  const text = error instanceof Error ? error.message : String(error);
  const message = text.split('\n').find((line) => line.trim() !== '')?.trim() ?? 'failed';
  process.stderr.write(`versus: ${message}\n`);
  process.exit(1);
}

process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
main(process.argv.slice(2)).catch(fail);
