import { randomBytes } from 'node:crypto';
import bs58 from 'bs58';
import nacl from 'tweetnacl';

/** A user's wallet: an Ed25519 key pair whose public key (base58) is the wallet address. */
export class Wallet {
  readonly address: string;
  private readonly secretKey: Uint8Array;

  constructor() {
    const pair = nacl.sign.keyPair();
    this.address = bs58.encode(pair.publicKey);
    this.secretKey = pair.secretKey;
  }

  /** A host request body (wallet, signedAt, nonce, aud + members) and its X-Wallet-Signature. */
  sign(members: Record<string, unknown>, options: { signedAt?: number; nonce?: string; aud?: string; wallet?: string } = {}): { body: string; signature: string } {
    const body = JSON.stringify({
      wallet: options.wallet ?? this.address,
      signedAt: options.signedAt ?? Date.now(),
      nonce: options.nonce ?? randomBytes(18).toString('base64url'),
      aud: options.aud ?? 'service-host',
      ...members,
    });
    return { body, signature: this.signBytes(body) };
  }

  signBytes(body: string): string {
    return bs58.encode(nacl.sign.detached(Buffer.from(body), this.secretKey));
  }
}
