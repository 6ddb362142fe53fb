/**
 * The app-side values some CLI commands act with (`versus manifest proof`, `versus token`).
 * They are the app's own secret key and origin, not service configuration, so they are read
 * here rather than in src/config.ts (which stays the only reader of the service's settings).
 */
export function readAppKeyFromEnv(): string | undefined {
  return process.env['SERVICE_APP_KEY']?.trim() || undefined;
}

export function readAppOriginFromEnv(): string | undefined {
  return process.env['VERSUS_APP_ORIGIN']?.trim() || undefined;
}
