import { createPublicKey } from 'node:crypto';

/**
 * Push endpoints are outbound addresses that users supply. Only `https:` URLs whose host is
 * allowed by PUSH_ENDPOINT_HOSTS are accepted by the host endpoint and contacted by the worker.
 *
 * An entry `host` matches that host name exactly on port 443; `host:port` that host on that
 * port; `.domain` any subdomain of domain (not domain itself) on port 443, `.domain:port` on
 * that port. No credentials in the URL; at most 2048 characters.
 */
export const MAX_ENDPOINT_CHARS = 2048;

export function allowedEndpoint(endpoint: unknown, hosts: readonly string[]): URL | null {
  if (typeof endpoint !== 'string' || endpoint.length === 0 || endpoint.length > MAX_ENDPOINT_CHARS) return null;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return null;
  }
  if (url.protocol !== 'https:' || url.username !== '' || url.password !== '' || url.hash !== '') return null;
  const hostname = url.hostname.toLowerCase();
  const port = url.port === '' ? '443' : url.port;
  for (const entry of hosts) {
    const match = /^(.*?)(?::(\d{1,5}))?$/.exec(entry);
    if (!match) continue;
    const entryHost = match[1]!.toLowerCase();
    const entryPort = match[2] ?? '443';
    if (entryPort !== port) continue;
    if (entryHost.startsWith('.') ? hostname.endsWith(entryHost) && hostname.length > entryHost.length : hostname === entryHost) {
      return url;
    }
  }
  return null;
}

/** Decodes base64url (padding tolerated); null when it is not base64url. */
export function decodeBase64Url(text: unknown): Buffer | null {
  if (typeof text !== 'string' || !/^[A-Za-z0-9_-]+={0,2}$/.test(text)) return null;
  return Buffer.from(text.replace(/=+$/, ''), 'base64url');
}

/** A subscription's p256dh: an uncompressed P-256 point (65 bytes, 0x04 first) on the curve. */
export function validP256dh(bytes: Buffer): boolean {
  if (bytes.length !== 65 || bytes[0] !== 0x04) return false;
  try {
    createPublicKey({
      format: 'jwk',
      key: { kty: 'EC', crv: 'P-256', x: bytes.subarray(1, 33).toString('base64url'), y: bytes.subarray(33).toString('base64url') },
    });
    return true;
  } catch {
    return false;
  }
}
