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
    ...(known?.limits ? { limits: known.limits } : {}),
  };
  await deps.registry.put(record);
  return record;
}

/** One line for a failed fetch: undici says "fetch failed" and keeps the reason in `cause`. */
function fetchFailure(error: unknown): string {
  const err = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError') return `no answer within ${FETCH_TIMEOUT_MS / 1000} s`;
  const cause = err?.cause;
  const detail = cause?.message ?? cause?.code ?? err?.message ?? String(error);
  if (/redirect/i.test(detail)) return 'it answered with a redirect (manifests are not fetched through redirects)';
  return detail.split('\n')[0]!;
}

/** Reads at most MAX_MANIFEST_BYTES of a body, refusing (and cancelling) anything longer. */
async function readLimited(response: Response, url: string): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_MANIFEST_BYTES) {
    await response.body?.cancel().catch(() => {});
    throw new VerificationError(`${url} is larger than 64 KiB`);
  }
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_MANIFEST_BYTES) {
      await reader.cancel().catch(() => {});
      throw new VerificationError(`${url} is larger than 64 KiB`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function fetchManifest(origin: string): Promise<string> {
  const url = `${origin}${MANIFEST_PATH}`;
  try {
    const response = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => {});
      throw new VerificationError(`${url} answered HTTP ${response.status}`);
    }
    return await readLimited(response, url);
  } catch (error) {
    if (error instanceof VerificationError) throw error;
    throw new VerificationError(`could not fetch ${url}: ${fetchFailure(error)}`);
  }
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
