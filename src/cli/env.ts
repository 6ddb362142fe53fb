/**
 * The app-side values some CLI commands act with. They are the app's own secrets and name, not
 * service configuration, so they are read here rather than in src/config.ts.
 */
export function appKeyFromEnv(): string | undefined {
  return process.env['SERVICE_APP_KEY'] || undefined;
}

export function appOriginFromEnv(): string | undefined {
  return process.env['VERSUS_APP_ORIGIN'] || undefined;
}
