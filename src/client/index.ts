/**
 * `versus/client`: the client library for app servers (spec "Client-side behavior",
 * sections 5 and 7). It talks HTTP to a Versus API and contains no server code.
 */
export { createMatchmaking, type Matchmaking, type MatchmakingOptions } from './matchmaking.js';
export {
  notifyAudience,
  notifyUser,
  NOTIFICATION_LIMITS,
  type NotificationReceipt,
  type NotifyAudienceOptions,
  type NotifyUserOptions,
} from './push.js';
export { MatchmakingError, PushError, type MatchmakingErrorCode, type PushErrorCode } from './errors.js';
export type {
  Admission,
  Json,
  Match,
  Queue,
  RatingPolicy,
  Ticket,
  TicketInput,
  TicketPage,
  TicketQuery,
} from '../shared/matchmaking-types.js';
export { LIMITS as MATCHMAKING_LIMITS } from '../shared/matchmaking-types.js';
