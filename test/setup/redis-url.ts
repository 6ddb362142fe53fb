import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

/** The Redis URL chosen by the global setup (test/setup/redis.ts). */
export function redisUrl(): string {
  try {
    const provided = inject('redisUrl');
    if (provided) return provided;
  } catch {
    // Outside a vitest worker (a child process of a test): fall through to the environment.
  }
  return process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
}
