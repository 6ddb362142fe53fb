import { MATCHMAKING_ERROR_CODES, type MatchmakingApiErrorCode } from '../shared/matchmaking-types.js';

/**
 * Codes a matchmaking call can fail with (spec section 7): the API's refusal codes, plus
 * `invalid_response`, which only the client produces (the outcome is unknown).
 */
export type MatchmakingErrorCode = MatchmakingApiErrorCode | 'invalid_response';

/**
 * A failed matchmaking call. `status` is the HTTP status of the reply, or null for a local
 * failure (invalid input or options, a missing or malformed key, a network failure or a
 * timeout before any reply). Handle by `code`: a body-read timeout can keep status 200.
 */
export class MatchmakingError extends Error {
  override readonly name = 'MatchmakingError';

  constructor(
    readonly code: MatchmakingErrorCode,
    readonly status: number | null,
    message: string = code,
    options?: { cause?: unknown },
  ) {
    super(message === code ? code : `${code}: ${message}`, options);
  }
}

export function isMatchmakingApiCode(value: unknown): value is MatchmakingApiErrorCode {
  return typeof value === 'string' && (MATCHMAKING_ERROR_CODES as readonly string[]).includes(value);
}

/**
 * Reasons the service gives for refusing a notification (spec section 7), plus the client's
 * own: `invalid_response` (an unreadable reply). A refusal with a reason this list does not
 * know still carries the service's reason as `code`.
 */
export type PushErrorCode =
  | 'unauthenticated'
  | 'unauthorized'
  | 'app_not_verified'
  | 'push_not_declared'
  | 'push_muted'
  | 'unknown_user'
  | 'not_your_user'
  | 'broadcast_not_configured'
  | 'invalid_request'
  | 'invalid_title'
  | 'invalid_body'
  | 'invalid_path'
  | 'unavailable'
  | 'push_not_enabled'
  | 'invalid_response';

/**
 * A refused or failed notification. `code` is the service's reason for a refusal; `status` is
 * the HTTP status, or null when the request was refused locally or no reply arrived (network
 * failure or timeout: `unavailable`; the notification may still have been accepted).
 */
export class PushError extends Error {
  override readonly name = 'PushError';

  constructor(
    // `string & {}` keeps editor completion for the known codes while admitting new ones.
    readonly code: PushErrorCode | (string & {}),
    readonly status: number | null,
    message: string = code,
    options?: { cause?: unknown },
  ) {
    super(message === code ? code : `${code}: ${message}`, options);
  }
}
