/** Names on the wire that the server, the client library and the CLI must agree on (DESIGN.md). */
export const APP_AUTH_TYP = 'service-app-auth+jwt';
export const APP_AUTH_AUD = 'service-api';
export const MANIFEST_TYP = 'service-app-manifest+jwt';
export const MANIFEST_AUD = 'service-app-host';
export const KEY_PROOF_TYP = 'service-app-key-proof+jwt';
export const KEY_PROOF_AUD = 'service-app-key-proof';
export const LEGACY_PUSH_TYP = 'service-push+jwt';
export const LEGACY_BROADCAST_TYP = 'service-push-broadcast+jwt';
export const LEGACY_PUSH_AUD = 'service-push';
export const MANIFEST_PATH = '/.well-known/service.jwt';

/** Longest lifetime (exp - iat, seconds) the server accepts on app-signed tokens. */
export const MAX_TOKEN_LIFETIME_S = 300;
/** Clock skew (seconds) the server tolerates on iat and exp. */
export const TOKEN_LEEWAY_S = 30;
/** Lifetime the client library gives the tokens it signs. */
export const CLIENT_TOKEN_LIFETIME_S = 60;

export const DEFAULT_API_URL = 'https://api.versus.dev';
export const DEFAULT_STAGING_API_URL = 'https://staging-api.versus.dev';
