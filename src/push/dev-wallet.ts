import { randomBytes } from 'node:crypto';
import nacl from 'tweetnacl';
import { encodeBase58, signDetached } from '../shared/ed25519.js';
import { HOST_AUD } from './types.js';

/**
 * A user's wallet as the launcher holds it: an Ed25519 key pair whose public key (base58) is
 * the wallet address, signing host requests (README "Host endpoints"). `versus dev` registers
 * its demo wallet's subscription with one; the tests sign (and forge) host requests with it.
 */
export class HostWallet {
  readonly address: string;
  private readonly secretKey: Uint8Array;

  /** A new random wallet, or the one of a 64-byte secret key (seed then public key). */
  constructor(secretKey?: Uint8Array) {
    const pair = secretKey ? nacl.sign.keyPair.fromSecretKey(secretKey) : nacl.sign.keyPair();
    this.address = encodeBase58(pair.publicKey);
    this.secretKey = pair.secretKey;
  }

  /** A host request body (wallet, signedAt, nonce, aud + members) and its X-Wallet-Signature. */
  sign(members: Record<string, unknown>, options: { signedAt?: number; nonce?: string; aud?: string; wallet?: string } = {}): { body: string; signature: string } {
    const body = JSON.stringify({
      wallet: options.wallet ?? this.address,
      signedAt: options.signedAt ?? Date.now(),
      nonce: options.nonce ?? randomBytes(18).toString('base64url'),
      aud: options.aud ?? HOST_AUD,
      ...members,
    });
    return { body, signature: this.signBytes(body) };
  }

  signBytes(body: string): string {
    return signDetached(Buffer.from(body), this.secretKey);
  }
}
