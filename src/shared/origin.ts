/**
 * Canonical origins: `https://host[:port]`, lowercase, no path, no trailing slash, no
 * credentials, query or fragment, and no default port. Returns null for anything else.
 * `allowLoopbackHttp` also admits `http://` origins on loopback hosts (local development
 * and tests only).
 */
export function canonicalOrigin(text: string, options: { allowLoopbackHttp?: boolean } = {}): string | null {
  if (typeof text !== 'string' || text.length === 0 || text.length > 2048) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  const isHttps = url.protocol === 'https:';
  const isLoopbackHttp = url.protocol === 'http:' && options.allowLoopbackHttp === true && isLoopbackHostname(url.hostname);
  if (!isHttps && !isLoopbackHttp) return null;
  if (url.username || url.password || url.search || url.hash) return null;
  if (url.pathname !== '/' || text.endsWith('/')) return null;
  const origin = url.origin;
  // The canonical form is the text itself: no uppercase, no default port, nothing to normalise.
  return origin === text ? origin : null;
}

export function isLoopbackHostname(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}
