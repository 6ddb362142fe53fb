import { decodeProtectedHeader, jwtVerify, SignJWT } from 'jose';
import { parsePublicKey, parseSecretKey, privateKeyObject, publicKeyObject } from '../shared/ed25519.js';
import { canonicalOrigin } from '../shared/origin.js';
import { KEY_PROOF_AUD, KEY_PROOF_TYP, MANIFEST_AUD, MANIFEST_TYP, MAX_TOKEN_LIFETIME_S, TOKEN_LEEWAY_S } from '../shared/protocol.js';
import { checkTokenTimes } from './auth.js';

/** A manifest or key proof that cannot be issued or accepted; the message is one line for operators. */
export class ManifestError extends Error {}

export interface ManifestClaims {
  origin: string;
  name: string;
  /** base58 32-byte app key, or null when the manifest has none (no matchmaking). */
  appKey: string | null;
  /** capabilities.push: false, true, or a legacy push public key. */
  push: boolean | string;
  environment: 'production' | 'staging';
}

export interface IssueOptions {
  signingKey: string;
  origin: string;
  name: string;
  appKey: string;
  proof: string;
  push?: true | string;
  staging?: boolean;
  /** Issue time in seconds (default: now). */
  now?: number;
}

/** One line describing why jose refused a JWS (its messages are single lines already). */
function joseReason(error: unknown): { code: string; message: string } {
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : '';
  const message = error instanceof Error ? error.message.split('\n')[0]! : String(error);
  return { code, message };
}

/** Only EdDSA, and the header's typ; nothing else in a header is ever followed. */
function checkHeader(jws: string, typ: string, what: string): void {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(jws);
  } catch {
    throw new ManifestError(`${what} is not a compact JWS`);
  }
  if (header.alg !== 'EdDSA') throw new ManifestError(`${what} must be signed with EdDSA, not ${String(header.alg)}`);
  if (header.typ !== typ) throw new ManifestError(`${what} has typ ${String(header.typ)}, expected ${typ}`);
}

/** Checks that the holder of `appKey` signed a fresh proof for `origin` (what makes the key attested). */
export async function verifyKeyProof(proof: string, appKey: string, origin: string): Promise<void> {
  const publicKey = parsePublicKey(appKey);
  if (!publicKey) throw new ManifestError('the app key is not a base58 32-byte Ed25519 public key');
  const jws = proof.trim();
  checkHeader(jws, KEY_PROOF_TYP, 'the key proof');
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(jws, publicKeyObject(publicKey), {
      algorithms: ['EdDSA'],
      typ: KEY_PROOF_TYP,
      audience: KEY_PROOF_AUD,
      clockTolerance: TOKEN_LEEWAY_S,
      requiredClaims: ['iss', 'iat', 'exp'],
    }));
  } catch (error) {
    const { code, message } = joseReason(error);
    if (code === 'ERR_JWT_EXPIRED') throw new ManifestError('the key proof has expired: sign a fresh one (versus manifest proof)');
    if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') throw new ManifestError('the key proof is not valid for this app key (it is signed by another key)');
    throw new ManifestError(`the key proof is not valid for this app key (${message})`);
  }
  if (payload['iss'] !== origin) throw new ManifestError(`the key proof is for ${String(payload['iss'])}, not ${origin}`);
  if (!checkTokenTimes(payload['iat'], payload['exp'])) {
    throw new ManifestError(`the key proof must live at most ${MAX_TOKEN_LIFETIME_S} s and not start in the future`);
  }
}

/** Signs a manifest for an app, after checking its key proof. */
export async function issueManifest(options: IssueOptions): Promise<string> {
  const service = parseSecretKey(options.signingKey);
  if (!service) throw new ManifestError('SERVICE_SIGNING_KEY is not a base58 64-byte Ed25519 secret key');
  // Loopback http:// origins are for local app development (apps verify --allow-insecure-loopback).
  if (canonicalOrigin(options.origin, { allowLoopbackHttp: true }) === null) {
    throw new ManifestError(`${options.origin} is not a canonical origin (https://host[:port], lowercase, no path or trailing slash)`);
  }
  if (options.name.trim() === '' || options.name.length > 100) throw new ManifestError('the app name must be 1 to 100 characters');
  if (typeof options.push === 'string' && !parsePublicKey(options.push)) {
    throw new ManifestError('the push key is not a base58 32-byte Ed25519 public key');
  }
  await verifyKeyProof(options.proof, options.appKey, options.origin);
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    sub: options.origin,
    aud: MANIFEST_AUD,
    name: options.name.trim(),
    manifestVersion: 1,
    iat: now,
    appKey: options.appKey,
    capabilities: options.push === undefined ? {} : { push: options.push },
  };
  if (options.staging) claims['environment'] = 'staging';
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: MANIFEST_TYP }).sign(privateKeyObject(service));
}

/** Verifies a service-signed manifest for this deployment's environment. */
export async function verifyManifest(
  jws: string,
  options: { signingPublicKey: string | null; environment: 'production' | 'staging' },
): Promise<ManifestClaims> {
  if (options.signingPublicKey === null) throw new ManifestError('set SERVICE_SIGNING_PUBLIC_KEY (or SERVICE_SIGNING_KEY) to verify manifests');
  const servicePublic = parsePublicKey(options.signingPublicKey);
  if (!servicePublic) throw new ManifestError('SERVICE_SIGNING_PUBLIC_KEY is not a base58 32-byte Ed25519 public key');
  if (typeof jws !== 'string') throw new ManifestError('the manifest is not a compact JWS');
  const text = jws.trim();
  checkHeader(text, MANIFEST_TYP, 'the manifest');
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(text, publicKeyObject(servicePublic), { algorithms: ['EdDSA'], typ: MANIFEST_TYP }));
  } catch (error) {
    const { code, message } = joseReason(error);
    if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') throw new ManifestError("the manifest is not signed by this service's key");
    throw new ManifestError(`the manifest is not valid (${message})`);
  }
  if (payload['aud'] !== MANIFEST_AUD) throw new ManifestError(`the manifest's aud must be ${MANIFEST_AUD}`);
  const origin = payload['sub'];
  if (typeof origin !== 'string' || canonicalOrigin(origin, { allowLoopbackHttp: true }) === null) {
    throw new ManifestError('the manifest\'s sub is not a canonical origin');
  }
  if (payload['manifestVersion'] !== 1) throw new ManifestError('the manifest\'s manifestVersion must be 1');
  const name = payload['name'];
  if (typeof name !== 'string' || name.trim() === '') throw new ManifestError('the manifest has no name');
  const appKey = payload['appKey'];
  if (appKey !== undefined && (typeof appKey !== 'string' || !parsePublicKey(appKey))) {
    throw new ManifestError('the manifest\'s appKey is not a base58 32-byte Ed25519 public key');
  }
  const capabilities = payload['capabilities'] ?? {};
  if (typeof capabilities !== 'object' || capabilities === null || Array.isArray(capabilities)) {
    throw new ManifestError('the manifest\'s capabilities must be an object');
  }
  const push = (capabilities as Record<string, unknown>)['push'] ?? false;
  if (typeof push !== 'boolean' && !(typeof push === 'string' && parsePublicKey(push))) {
    throw new ManifestError('capabilities.push must be true, false or a base58 public key');
  }
  const environment = payload['environment'] === undefined ? 'production' : payload['environment'];
  if (environment !== 'production' && environment !== 'staging') throw new ManifestError('the manifest\'s environment must be staging or absent');
  if (environment !== options.environment) {
    throw new ManifestError(`the manifest is for ${environment} but this service is ${options.environment}`);
  }
  return { origin, name, appKey: (appKey as string | undefined) ?? null, push, environment };
}
