import { SignJWT } from 'jose';
import { parseSecretKey, privateKeyObject } from './ed25519.js';
import { APP_AUTH_AUD, APP_AUTH_TYP, CLIENT_TOKEN_LIFETIME_S, KEY_PROOF_AUD, KEY_PROOF_TYP, MAX_TOKEN_LIFETIME_S } from './protocol.js';

/** Signs an EdDSA JWT with a base58 64-byte secret key; throws on a malformed key. */
async function signWith(secretKeyBase58: string, typ: string, claims: Record<string, unknown>): Promise<string> {
  const pair = parseSecretKey(secretKeyBase58);
  if (!pair) throw new Error('the key is not a base58 64-byte Ed25519 secret key');
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ }).sign(privateKeyObject(pair));
}

/** The shared app JWT: claims exactly iss, aud, iat, exp (60 s). */
export function signAppToken(secretKeyBase58: string, origin: string, nowSeconds = Math.floor(Date.now() / 1000)): Promise<string> {
  return signWith(secretKeyBase58, APP_AUTH_TYP, { iss: origin, aud: APP_AUTH_AUD, iat: nowSeconds, exp: nowSeconds + CLIENT_TOKEN_LIFETIME_S });
}

/** Proof that the app holds its key, checked before a manifest is issued for it. */
export function createKeyProof(secretKeyBase58: string, origin: string, nowSeconds = Math.floor(Date.now() / 1000)): Promise<string> {
  return signWith(secretKeyBase58, KEY_PROOF_TYP, { iss: origin, aud: KEY_PROOF_AUD, iat: nowSeconds, exp: nowSeconds + MAX_TOKEN_LIFETIME_S });
}
