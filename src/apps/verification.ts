import type { Config } from '../config.js';
import { canonicalOrigin, isLoopbackHostname } from '../shared/origin.js';
import { MANIFEST_PATH } from '../shared/protocol.js';
import { appIdOf } from '../redis/keys.js';
import { verifyManifest } from './manifest.js';
import { DEFAULT_USER_DAYS, type AppRecord, type AppRegistry } from './registry.js';

/** Verification of an app failed; the message is one line for operators. */
export class VerificationError extends Error {}

const FETCH_TIMEOUT_MS = 5000;
const MAX_MANIFEST_BYTES = 64 * 1024;

interface Deps {
  registry: AppRegistry;
  config: Pick<Config, 'signingPublicKey' | 'environment'>;
}

/** Verifies a manifest in hand and stores the app's record (keeping operator settings of a known app). */
export async function registerManifest(jws: string, deps: Deps & { expectedOrigin?: string }): Promise<AppRecord> {
  let claims;
  try {
    claims = await verifyManifest(jws, { signingPublicKey: deps.config.signingPublicKey, environment: deps.config.environment });
  } catch (error) {
    throw new VerificationError((error as Error).message);
  }
  if (deps.expectedOrigin !== undefined && claims.origin !== deps.expectedOrigin) {
    throw new VerificationError(`the manifest is for ${claims.origin}, not ${deps.expectedOrigin}`);
  }
  const known = await deps.registry.fetch(claims.origin);
  const record: AppRecord = {
    origin: claims.origin,
    appId: appIdOf(claims.origin),
    name: claims.name,
    appKey: claims.appKey,
    push: claims.push,
    environment: claims.environment,
    verified: true,
    manifest: jws.trim(),
    verifiedAt: Date.now(),
    pushMuted: known?.pushMuted ?? false,
    audienceDays: known?.audienceDays ?? null,
    userDays: known?.userDays ?? DEFAULT_USER_DAYS,
  };
  await deps.registry.put(record);
  return record;
}

async function fetchManifest(origin: string): Promise<string> {
  let response: Response;
  try {
    response = await fetch(`${origin}${MANIFEST_PATH}`, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  } catch (error) {
    throw new VerificationError(`could not fetch ${origin}${MANIFEST_PATH}: ${(error as Error).message}`);
  }
  if (response.status !== 200) throw new VerificationError(`${origin}${MANIFEST_PATH} answered HTTP ${response.status}`);
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_MANIFEST_BYTES) throw new VerificationError(`${origin}${MANIFEST_PATH} is larger than 64 KiB`);
  const body = await response.arrayBuffer();
  if (body.byteLength > MAX_MANIFEST_BYTES) throw new VerificationError(`${origin}${MANIFEST_PATH} is larger than 64 KiB`);
  return Buffer.from(body).toString('utf8');
}

/**
 * `versus apps verify`: fetches the manifest the app serves, checks it and stores the record.
 * HTTPS only; plain HTTP only to a loopback origin with allowInsecureLoopback. A failure for a
 * known app marks it unverified.
 */
export async function verifyApp(origin: string, deps: Deps & { allowInsecureLoopback?: boolean }): Promise<AppRecord> {
  const canonical = canonicalOrigin(origin, { allowLoopbackHttp: deps.allowInsecureLoopback === true });
  if (canonical === null) {
    const insecure = canonicalOrigin(origin.replace(/^http:/, 'https:')) !== null && origin.startsWith('http://') && isLoopbackHostname(new URL(origin).hostname);
    throw new VerificationError(
      insecure
        ? `${origin} is plain HTTP: add --allow-insecure-loopback for a local app`
        : `${origin} is not a canonical HTTPS origin (https://host[:port], lowercase, no path or trailing slash)`,
    );
  }
  try {
    return await registerManifest(await fetchManifest(canonical), { ...deps, expectedOrigin: canonical });
  } catch (error) {
    if (await deps.registry.fetch(canonical)) await deps.registry.update(canonical, { verified: false });
    throw error instanceof VerificationError ? error : new VerificationError((error as Error).message);
  }
}
