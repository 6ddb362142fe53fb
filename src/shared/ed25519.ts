import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import bs58 from 'bs58';
import nacl from 'tweetnacl';

/**
 * Ed25519 keys as Versus writes them: an app or service secret key is base58 of 64 bytes
 * (32-byte seed, then its 32-byte public key: the Solana keypair layout); a public key or
 * wallet address is base58 of 32 bytes.
 */
export interface Ed25519KeyPair {
  /** 64 bytes: seed then public key. */
  secretKey: Uint8Array;
  publicKey: Uint8Array;
  publicKeyBase58: string;
}

function decodeBase58(text: string): Uint8Array | null {
  try {
    return bs58.decode(text);
  } catch {
    return null;
  }
}

/** Parses a base58 64-byte secret key; null when it is not one (wrong alphabet or length, or a public half that is not the seed's). */
export function parseSecretKey(text: string): Ed25519KeyPair | null {
  if (typeof text !== 'string' || text.trim() === '') return null;
  const bytes = decodeBase58(text.trim());
  if (!bytes || bytes.length !== 64) return null;
  const derived = nacl.sign.keyPair.fromSeed(bytes.slice(0, 32));
  if (!nacl.verify(derived.publicKey, bytes.slice(32))) return null;
  return { secretKey: derived.secretKey, publicKey: derived.publicKey, publicKeyBase58: bs58.encode(derived.publicKey) };
}

/** Parses a base58 32-byte public key (or wallet address); null when it is not one. */
export function parsePublicKey(text: string): Uint8Array | null {
  if (typeof text !== 'string' || text === '') return null;
  const bytes = decodeBase58(text);
  return bytes && bytes.length === 32 ? bytes : null;
}

export function generateKeyPair(): { secretKey: string; publicKey: string } {
  const pair = nacl.sign.keyPair();
  return { secretKey: bs58.encode(pair.secretKey), publicKey: bs58.encode(pair.publicKey) };
}

export function encodeBase58(bytes: Uint8Array): string {
  return bs58.encode(bytes);
}

/** A node KeyObject for jose, from a parsed key pair. */
export function privateKeyObject(pair: Ed25519KeyPair): KeyObject {
  return createPrivateKey({
    format: 'jwk',
    key: {
      kty: 'OKP',
      crv: 'Ed25519',
      d: Buffer.from(pair.secretKey.subarray(0, 32)).toString('base64url'),
      x: Buffer.from(pair.publicKey).toString('base64url'),
    },
  });
}

export function publicKeyObject(publicKey: Uint8Array): KeyObject {
  return createPublicKey({
    format: 'jwk',
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
  });
}

/** Detached signature helpers for wallet-signed host requests. */
export function signDetached(message: Uint8Array, secretKey: Uint8Array): string {
  return bs58.encode(nacl.sign.detached(message, secretKey));
}

export function verifyDetached(message: Uint8Array, signatureBase58: string, publicKey: Uint8Array): boolean {
  const signature = decodeBase58(signatureBase58);
  if (!signature || signature.length !== 64) return false;
  return nacl.sign.detached.verify(message, signature, publicKey);
}
