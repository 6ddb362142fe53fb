import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import webpush from 'web-push';
import { issueManifest } from '../apps/manifest.js';
import { AppRegistry } from '../apps/registry.js';
import { registerManifest } from '../apps/verification.js';
import { loadConfig, type Config } from '../config.js';
import { startServer } from '../http/server.js';
import { createRedis, redisAnswers, waitForReady } from '../redis/connection.js';
import { Keys } from '../redis/keys.js';
import { generateKeyPair, parseSecretKey } from '../shared/ed25519.js';
import { isLoopbackHostname } from '../shared/origin.js';
import { createKeyProof } from '../shared/tokens.js';

/** Where `versus dev` keeps its keys and its Redis data, unless VERSUS_DEV_DIR says otherwise (ignored by git). */
const DEFAULT_DEV_DIR = '.versus-dev';
const DEMO_ORIGIN = 'https://demo.versus.localhost';
const DEMO_NAME = 'Versus Demo';

interface DevState {
  serviceSecretKey: string;
  appSecretKey: string;
  /** Web Push keys, so notifications are enabled in the local stack. */
  vapid: { publicKey: string; privateKey: string };
}

export class DevError extends Error {}

/** Keys survive restarts, so an app server's environment lines stay valid. */
function loadDevState(devDir: string): DevState {
  const file = join(devDir, 'keys.json');
  if (existsSync(file)) {
    const state = JSON.parse(readFileSync(file, 'utf8')) as Partial<DevState>;
    if (state.serviceSecretKey && parseSecretKey(state.serviceSecretKey) && state.appSecretKey && parseSecretKey(state.appSecretKey)) {
      // Key files from before VAPID keys were kept get them now.
      const complete = { ...state, vapid: state.vapid ?? webpush.generateVAPIDKeys() } as DevState;
      if (!state.vapid) writeFileSync(file, `${JSON.stringify(complete, null, 2)}\n`, { mode: 0o600 });
      return complete;
    }
  }
  const state: DevState = {
    serviceSecretKey: generateKeyPair().secretKey,
    appSecretKey: generateKeyPair().secretKey,
    vapid: webpush.generateVAPIDKeys(),
  };
  mkdirSync(devDir, { recursive: true });
  writeFileSync(file, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  return state;
}


/** Uses the Redis at REDIS_URL, else starts the local redis-server binary on that loopback port. */
async function ensureRedis(config: Config, devDir: string, log: (line: string) => void): Promise<ChildProcess | null> {
  if (config.redisClusterNodes) return null;
  if (await redisAnswers(config.redisUrl)) {
    log(`using the Redis at ${config.redisUrl}`);
    return null;
  }
  const url = new URL(config.redisUrl);
  const howTo = 'install Redis (apt-get install redis-server, brew install redis) or run `docker compose up redis`, or set REDIS_URL';
  if (!isLoopbackHostname(url.hostname)) throw new DevError(`no Redis answers at ${config.redisUrl}; ${howTo}`);
  if (spawnSync('redis-server', ['--version']).status !== 0) throw new DevError(`no Redis answers at ${config.redisUrl} and redis-server is not installed; ${howTo}`);
  const dataDir = join(devDir, 'redis');
  mkdirSync(dataDir, { recursive: true });
  const port = url.port || '6379';
  const child = spawn('redis-server', ['--port', port, '--bind', url.hostname.replace(/^\[|\]$/g, ''), '--dir', dataDir, '--appendonly', 'yes', '--save', ''], {
    stdio: 'ignore',
  });
  for (let attempt = 0; attempt < 50; attempt++) {
    if (await redisAnswers(config.redisUrl)) {
      log(`started redis-server on port ${port} (data in ${dataDir})`);
      return child;
    }
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new DevError(`redis-server did not start on port ${port}; ${howTo}`);
}

/** Issues and registers the demo app's manifest, as an operator would with the CLI. */
async function registerDemoApp(config: Config, state: DevState): Promise<void> {
  const app = parseSecretKey(state.appSecretKey)!;
  const proof = await createKeyProof(state.appSecretKey, DEMO_ORIGIN);
  const manifest = await issueManifest({
    signingKey: state.serviceSecretKey,
    origin: DEMO_ORIGIN,
    name: DEMO_NAME,
    appKey: app.publicKeyBase58,
    proof,
    push: true,
    staging: config.environment === 'staging',
  });
  const redis = createRedis(config, { name: 'versus-dev' });
  redis.on('error', () => {});
  try {
    await waitForReady(redis, 5000);
    await registerManifest(manifest, { registry: new AppRegistry(redis, new Keys(config.keyPrefix)), config });
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}

/** `versus dev`: Redis, the demo app and the API in one command; prints an app server's environment. */
export async function runDev(env: Record<string, string | undefined> = process.env): Promise<void> {
  const log = (line: string) => process.stderr.write(`versus dev: ${line}\n`);
  const devDir = resolve(env['VERSUS_DEV_DIR'] || DEFAULT_DEV_DIR);
  const state = loadDevState(devDir);
  const config = loadConfig({
    HOST: '127.0.0.1',
    ...env,
    SERVICE_SIGNING_KEY: env['SERVICE_SIGNING_KEY'] ?? state.serviceSecretKey,
    VAPID_PUBLIC_KEY: env['VAPID_PUBLIC_KEY'] ?? state.vapid.publicKey,
    VAPID_PRIVATE_KEY: env['VAPID_PRIVATE_KEY'] ?? state.vapid.privateKey,
    VAPID_SUBJECT: env['VAPID_SUBJECT'] ?? 'mailto:dev@versus.localhost',
    SERVICE_SIGNING_PUBLIC_KEY: undefined,
  });
  const redisChild = await ensureRedis(config, devDir, log);
  /** Stops the redis-server this command started (if any) and waits until it has exited. */
  const stopRedis = (): Promise<void> =>
    new Promise((resolve) => {
      if (!redisChild || redisChild.exitCode !== null) return resolve();
      redisChild.once('exit', () => resolve());
      redisChild.kill('SIGTERM');
    });
  try {
    await registerDemoApp(config, state);
    const server = await startServer(config, { role: 'all' });
    const apiUrl = server.url;
    const stop = () => {
      void server
        .close()
        .finally(stopRedis)
        .then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    // Everything is ready (file written, signals handled) before the lines announce it.
    const envLines = `SERVICE_APP_KEY=${state.appSecretKey}\nSERVICE_API_URL=${apiUrl}\nVERSUS_APP_ORIGIN=${DEMO_ORIGIN}\n`;
    // The same lines in a file, for `set -a; . .versus-dev/app.env; set +a` in another shell.
    writeFileSync(join(devDir, 'app.env'), envLines, { mode: 0o600 });
    log(`demo app ${DEMO_ORIGIN} registered; API at ${apiUrl}; environment also in ${join(devDir, 'app.env')}; Ctrl-C stops`);
    process.stdout.write(envLines);
  } catch (error) {
    await stopRedis();
    throw error;
  }
}
