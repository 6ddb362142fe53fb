import { isIPv4, isIPv6 } from 'node:net';
import { parseSecretKey } from '../shared/ed25519.js';
import { canonicalOrigin, isLoopbackHostname } from '../shared/origin.js';
import { DEFAULT_API_URL } from '../shared/protocol.js';

/** Why a configuration value was refused; each area turns it into its own error. */
export class ConfigProblem extends Error {}

const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;

/**
 * The app origin: a canonical public HTTPS origin (`https://host[:port]`, lowercase, no path,
 * no trailing slash, no default port). Loopback hosts and IP literals outside the public
 * address space are not public. Returns it unchanged, or throws ConfigProblem.
 */
export function checkAppOrigin(origin: unknown): string {
  if (typeof origin !== 'string') throw new ConfigProblem('origin must be a string');
  const canonical = canonicalOrigin(origin);
  if (canonical === null) {
    throw new ConfigProblem(`origin must be a canonical HTTPS origin (https://host[:port], lowercase, no path or trailing slash): ${JSON.stringify(origin)}`);
  }
  const hostname = new URL(canonical).hostname;
  if (isLoopbackHostname(hostname) || !isPublicAddressOrName(hostname)) {
    throw new ConfigProblem(`origin must be public, not a loopback or private address: ${origin}`);
  }
  return canonical;
}

function isPublicAddressOrName(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (isIPv4(host)) return isPublicIPv4(host);
  if (isIPv6(host)) return isPublicIPv6(host);
  return true;
}

function isPublicIPv4(host: string): boolean {
  const [a = 0, b = 0] = host.split('.').map(Number);
  if (a === 0 || a === 10 || a === 127 || a >= 224) return false; // this network, private, loopback, multicast/reserved
  if (a === 169 && b === 254) return false; // link-local
  if (a === 172 && b >= 16 && b <= 31) return false; // private
  if (a === 192 && b === 168) return false; // private
  if (a === 100 && b >= 64 && b <= 127) return false; // shared address space (CGNAT)
  return true;
}

function isPublicIPv6(host: string): boolean {
  const lower = host.toLowerCase();
  if (lower === '::' || lower === '::1') return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return isPublicIPv4(mapped[1]!);
  if (lower.startsWith('::ffff:')) return false; // mapped IPv4 in hex form: not a name anyone publishes
  const first = parseInt(lower.split(':')[0] || '0', 16);
  if ((first & 0xfe00) === 0xfc00) return false; // unique local fc00::/7
  if ((first & 0xffc0) === 0xfe80) return false; // link-local fe80::/10
  if ((first & 0xff00) === 0xff00) return false; // multicast
  return true;
}

/**
 * The API origin: HTTPS, or plain HTTP to a loopback host (local API development), with no
 * path, query, fragment or credentials. A lone trailing slash is the empty path and is
 * accepted; the result is the URL's origin.
 */
export function checkApiUrl(text: unknown, source: string): string {
  if (typeof text !== 'string') throw new ConfigProblem(`${source} must be a string`);
  const shape = 'https://host[:port] (or http:// to a loopback host) with no path, query, fragment or credentials';
  // Checked on the text too: URL parsing would quietly drop an empty `?`/`#` or normalise `/.`.
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\@\s]+\/?$/.test(text)) throw new ConfigProblem(`${source} must be ${shape}: ${JSON.stringify(text)}`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigProblem(`${source} is not a URL: ${JSON.stringify(text)}`);
  }
  const allowed = url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHostname(url.hostname));
  if (!allowed || url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '' || url.pathname !== '/') {
    throw new ConfigProblem(`${source} must be ${shape}: ${JSON.stringify(text)}`);
  }
  return url.origin;
}

/** The API origin of one call: the explicit option, else SERVICE_API_URL, else production. */
export function resolveApiUrl(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (explicit !== undefined) return checkApiUrl(explicit, 'apiUrl');
  const fromEnv = env['SERVICE_API_URL'];
  if (fromEnv !== undefined) return checkApiUrl(fromEnv, 'SERVICE_API_URL');
  return DEFAULT_API_URL;
}

export type KeySource = 'option' | 'SERVICE_APP_KEY' | 'SERVICE_PUSH_KEY';

export interface SelectedKey {
  key: string;
  source: KeySource;
}

/**
 * The app key of one call: the explicit option, else SERVICE_APP_KEY, else SERVICE_PUSH_KEY.
 * A variable that is set is selected even when empty (and then fails), so a key is never
 * silently taken from a lower-priority source. Read at every call: a rotated key takes
 * effect on the next call. Throws ConfigProblem when no key is set or the selected one is
 * malformed: not base58, not 64 bytes, or a second half that is not the seed's public key.
 */
export function selectKey(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): SelectedKey {
  const selected: SelectedKey | null =
    explicit !== undefined
      ? { key: explicit, source: 'option' }
      : env['SERVICE_APP_KEY'] !== undefined
        ? { key: env['SERVICE_APP_KEY'], source: 'SERVICE_APP_KEY' }
        : env['SERVICE_PUSH_KEY'] !== undefined
          ? { key: env['SERVICE_PUSH_KEY'], source: 'SERVICE_PUSH_KEY' }
          : null;
  if (selected === null) throw new ConfigProblem('no app key: pass `key`, or set SERVICE_APP_KEY (or the legacy SERVICE_PUSH_KEY)');
  checkSecretKey(selected.key, selected.source === 'option' ? 'key' : selected.source);
  return selected;
}

export function checkSecretKey(key: unknown, source: string): void {
  if (typeof key !== 'string' || key === '') throw new ConfigProblem(`${source} is empty`);
  // Strictly base58: parseSecretKey would forgive surrounding whitespace, the spec does not.
  if (!BASE58.test(key) || parseSecretKey(key) === null) {
    throw new ConfigProblem(`${source} is malformed: expected base58 of a 64-byte Ed25519 secret key (seed, then its public key)`);
  }
}
