import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import webpush from 'web-push';
import { issueManifest } from '../apps/manifest.js';
import { AppRegistry } from '../apps/registry.js';
import { registerManifest } from '../apps/verification.js';
import { DEFAULT_PUSH_ENDPOINT_HOSTS, loadConfig, type Config } from '../config.js';
import { startServer } from '../http/server.js';
import { CertificateError, DevPushService, loopbackCertificate, type LoopbackCertificate } from '../push/dev-push-service.js';
import { HostWallet } from '../push/dev-wallet.js';
import { createRedis, redisAnswers, waitForReady } from '../redis/connection.js';
import { Keys } from '../redis/keys.js';
import { generateKeyPair, parseSecretKey } from '../shared/ed25519.js';
import { isLoopbackHostname } from '../shared/origin.js';
import { createKeyProof } from '../shared/tokens.js';

/** Where `versus dev` keeps its keys and its Redis data, unless VERSUS_DEV_DIR says otherwise (ignored by git). */
const DEFAULT_DEV_DIR = '.versus-dev';
const DEMO_ORIGIN = 'https://demo.versus.localhost';
const DEMO_NAME = 'Versus Demo';
/** The loopback push service's certificate and the demo subscription's endpoint, under the dev folder. */
const PUSH_DIR = 'push-service';

interface DevState {
  serviceSecretKey: string;
  appSecretKey: string;
  /** Web Push keys, so notifications are enabled in the local stack. */
  vapid: { publicKey: string; privateKey: string };
  /** The demo wallet (base58 64-byte Ed25519 secret key) whose subscription is the loopback push service's. */
  demoWalletSecretKey: string;
}

export class DevError extends Error {}

/** Keys survive restarts, so an app server's environment lines stay valid. */
function loadDevState(devDir: string): DevState {
  const file = join(devDir, 'keys.json');
  if (existsSync(file)) {
    const state = JSON.parse(readFileSync(file, 'utf8')) as Partial<DevState>;
    if (state.serviceSecretKey && parseSecretKey(state.serviceSecretKey) && state.appSecretKey && parseSecretKey(state.appSecretKey)) {
      // Key files from before VAPID keys or the demo wallet were kept get them now.
      const wallet = state.demoWalletSecretKey && parseSecretKey(state.demoWalletSecretKey) ? state.demoWalletSecretKey : undefined;
      const complete = { ...state, vapid: state.vapid ?? webpush.generateVAPIDKeys(), demoWalletSecretKey: wallet ?? generateKeyPair().secretKey } as DevState;
      if (!state.vapid || !wallet) writeFileSync(file, `${JSON.stringify(complete, null, 2)}\n`, { mode: 0o600 });
      return complete;
    }
  }
  const state: DevState = {
    serviceSecretKey: generateKeyPair().secretKey,
    appSecretKey: generateKeyPair().secretKey,
    vapid: webpush.generateVAPIDKeys(),
    demoWalletSecretKey: generateKeyPair().secretKey,
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

/** A free loopback port (for the worker's /healthz and /readyz). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** This command's own entry point (main.ts under tsx, dist/cli/main.js when built). */
function cliEntry(): string {
  return fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './main.ts' : './main.js', import.meta.url));
}

interface WorkerChild {
  child: ChildProcess;
  url: string;
  /** Resolves once its /readyz answers 200; rejects when it exits first or after 30 s. */
  ready(): Promise<void>;
  /** SIGTERM (the worker finishes the jobs in hand) and wait for the exit. */
  stop(): Promise<void>;
}

/**
 * `versus serve --role worker` as a child process, as production runs it. A child, because
 * the worker must trust the loopback push service's certificate, and Node reads
 * NODE_EXTRA_CA_CERTS only when a process starts.
 */
async function spawnWorker(env: Record<string, string | undefined>): Promise<WorkerChild> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [...process.execArgv, cliEntry(), 'serve', '--role', 'worker'], {
    env: { ...env, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const exit = new Promise<void>((resolve) => {
    if (exited()) resolve();
    else child.once('exit', () => resolve());
  });
  const stop = async () => {
    if (!exited()) child.kill('SIGTERM');
    await exit;
  };
  const ready = async () => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (exited()) throw new DevError(`the push worker exited at start (${child.exitCode ?? child.signalCode})`);
      if (await fetch(`${url}/readyz`).then((res) => res.ok, () => false)) return;
      if (Date.now() > deadline) throw new DevError('the push worker did not become ready within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  return { child, url, ready, stop };
}

/** POSTs a wallet-signed host request to the API, as the launcher does; anything but 204 is an error. */
async function hostRequest(apiUrl: string, path: string, wallet: HostWallet, members: Record<string, unknown>): Promise<void> {
  const { body, signature } = wallet.sign(members);
  const res = await fetch(`${apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-wallet-signature': signature }, body });
  if (res.status !== 204) throw new DevError(`${path} answered ${res.status} ${(await res.text()).slice(0, 200)}`);
}

/**
 * Registers the demo wallet as the launcher would: its subscription at the loopback push
 * service (replacing the one of the previous run, whose port is gone) and a visit to the demo
 * app, so notifyUser reaches it. Without the push service, only the visit.
 */
async function registerDemoWallet(apiUrl: string, wallet: HostWallet, pushService: DevPushService | null, devDir: string): Promise<void> {
  const endpointFile = join(devDir, PUSH_DIR, 'endpoint');
  const previous = existsSync(endpointFile) ? readFileSync(endpointFile, 'utf8').trim() : '';
  if (previous !== '') {
    await hostRequest(apiUrl, '/api/host/subscriptions/remove', wallet, { endpoint: previous });
    rmSync(endpointFile, { force: true });
  }
  if (pushService) {
    const subscription = pushService.subscribe(wallet.address);
    await hostRequest(apiUrl, '/api/host/subscriptions', wallet, { subscription });
    writeFileSync(endpointFile, `${subscription.endpoint}\n`);
  }
  await hostRequest(apiUrl, '/api/host/visits', wallet, { origin: DEMO_ORIGIN });
}

/**
 * The loopback push service, with its certificate in `<devDir>/push-service/`; null (and one
 * line saying so) when openssl cannot make the certificate: notifications are then accepted
 * and not delivered.
 */
async function startPushService(devDir: string, vapid: { publicKey: string; subject: string }, log: (line: string) => void): Promise<DevPushService | null> {
  let certificate: LoopbackCertificate;
  try {
    certificate = loopbackCertificate(join(devDir, PUSH_DIR));
  } catch (error) {
    if (!(error instanceof CertificateError)) throw error;
    log(`no loopback push service (${error.message}, needed for its certificate): notifications are accepted, not delivered`);
    return null;
  }
  const print = (line: string) => process.stdout.write(`push service: ${line}\n`);
  const service = await DevPushService.start({ certificate, vapid, print });
  log(`loopback push service at ${service.url} (prints each notification it receives, decrypted)`);
  return service;
}

/** NODE_EXTRA_CA_CERTS for the worker: the push service's certificate, with the file already set, if any. */
function workerCaFile(devDir: string, certPath: string, existing: string | undefined): string {
  if (!existing || !existsSync(existing)) return certPath;
  const bundle = join(devDir, PUSH_DIR, 'ca-bundle.pem');
  writeFileSync(bundle, `${readFileSync(existing, 'utf8').trimEnd()}\n${readFileSync(certPath, 'utf8')}`);
  return bundle;
}

/**
 * `versus dev`: Redis, the demo app, the API, a push worker and a loopback push service with
 * a demo wallet subscribed, in one command; prints an app server's environment and the demo
 * wallet, then every notification the push service receives.
 */
export async function runDev(env: Record<string, string | undefined> = process.env): Promise<void> {
  const log = (line: string) => process.stderr.write(`versus dev: ${line}\n`);
  const devDir = resolve(env['VERSUS_DEV_DIR'] || DEFAULT_DEV_DIR);
  const state = loadDevState(devDir);
  const serviceEnv: Record<string, string | undefined> = {
    HOST: '127.0.0.1',
    ...env,
    SERVICE_SIGNING_KEY: env['SERVICE_SIGNING_KEY'] ?? state.serviceSecretKey,
    VAPID_PUBLIC_KEY: env['VAPID_PUBLIC_KEY'] ?? state.vapid.publicKey,
    VAPID_PRIVATE_KEY: env['VAPID_PRIVATE_KEY'] ?? state.vapid.privateKey,
    VAPID_SUBJECT: env['VAPID_SUBJECT'] ?? 'mailto:dev@versus.localhost',
    SERVICE_SIGNING_PUBLIC_KEY: undefined,
  };
  // Checks every setting before anything starts.
  const redisConfig = loadConfig(serviceEnv);
  const redisChild = await ensureRedis(redisConfig, devDir, log);

  // What runs is stopped in reverse order: worker, API, push service, Redis.
  const running: Array<() => Promise<void>> = [
    () =>
      new Promise<void>((resolve) => {
        if (!redisChild || redisChild.exitCode !== null) return resolve();
        redisChild.once('exit', () => resolve());
        redisChild.kill('SIGTERM');
      }),
  ];
  let stopping: Promise<void> | null = null;
  const stopAll = () => {
    stopping ??= (async () => {
      for (const stop of running.reverse()) await stop().catch(() => {});
    })();
    return stopping;
  };
  const exitAfterStop = (code: number) => void stopAll().then(() => process.exit(code));

  try {
    const pushService = await startPushService(devDir, { publicKey: serviceEnv['VAPID_PUBLIC_KEY']!, subject: redisConfig.vapid!.subject }, log);
    if (pushService) running.push(() => pushService.close());
    // The loopback push service's host is allowed here only: `versus serve` reads PUSH_ENDPOINT_HOSTS as given.
    const hosts = [...(env['PUSH_ENDPOINT_HOSTS']?.trim() ? [env['PUSH_ENDPOINT_HOSTS'].trim()] : DEFAULT_PUSH_ENDPOINT_HOSTS), ...(pushService ? [pushService.hostEntry] : [])];
    const stackEnv = { ...serviceEnv, PUSH_ENDPOINT_HOSTS: hosts.join(',') };
    const config = loadConfig(stackEnv);

    await registerDemoApp(config, state);
    const server = await startServer(config, { role: 'api' });
    running.push(() => server.close());
    const apiUrl = server.url;
    process.once('SIGINT', () => exitAfterStop(0));
    process.once('SIGTERM', () => exitAfterStop(0));

    const caFile = pushService ? workerCaFile(devDir, join(devDir, PUSH_DIR, 'cert.pem'), env['NODE_EXTRA_CA_CERTS']) : env['NODE_EXTRA_CA_CERTS'];
    const worker = await spawnWorker({ ...stackEnv, NODE_EXTRA_CA_CERTS: caFile });
    running.push(() => worker.stop());
    await worker.ready();
    log(`push worker (versus serve --role worker, pid ${worker.child.pid}) ready at ${worker.url}`);
    worker.child.once('exit', (code, signal) => {
      if (stopping) return;
      log(`the push worker exited (${code ?? signal}); stopping`);
      exitAfterStop(1);
    });

    const wallet = new HostWallet(parseSecretKey(state.demoWalletSecretKey)!.secretKey);
    await registerDemoWallet(apiUrl, wallet, pushService, devDir);

    // Everything is ready (file written, signals handled) before the lines announce it.
    const envLines = `SERVICE_APP_KEY=${state.appSecretKey}\nSERVICE_API_URL=${apiUrl}\nVERSUS_APP_ORIGIN=${DEMO_ORIGIN}\nVERSUS_DEMO_WALLET=${wallet.address}\n`;
    // The same lines in a file, for `set -a; . .versus-dev/app.env; set +a` in another shell.
    writeFileSync(join(devDir, 'app.env'), envLines, { mode: 0o600 });
    log(`demo app ${DEMO_ORIGIN} registered; API at ${apiUrl}; demo wallet ${wallet.address}${pushService ? ' subscribed at the push service' : ''}; environment also in ${join(devDir, 'app.env')}; Ctrl-C stops`);
    process.stdout.write(envLines);
  } catch (error) {
    await stopAll();
    throw error;
  }
}
