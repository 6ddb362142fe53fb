import { createHash } from 'node:crypto';

/**
 * Every Redis key Versus writes is built here (the Lua half of the layout is
 * lua/includes/keys.lua, which appends suffixes to an app's scope).
 *
 * One app's data share the hash tag `{<appId>}`, so one app lives in one cluster slot and
 * one script can touch all of it atomically, while apps spread over the cluster.
 */
export function appIdOf(origin: string): string {
  return createHash('sha256').update(origin).digest('base64url').slice(0, 16);
}

/** Short stable tag of a wallet address or endpoint, for key names and hash tags. */
function tagOf(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 16);
}

/** `text` as a literal in a Redis SCAN/KEYS glob pattern. */
function globEscape(text: string): string {
  return text.replace(/[\\*?[\]]/g, (c) => `\\${c}`);
}

export class Keys {
  constructor(readonly prefix: string) {}

  /** Set of registered app origins: the one key without a hash tag, touched only by single-key commands. */
  appsIndex(): string {
    return `${this.prefix}:apps`;
  }

  /** Hash: one app's verified record. */
  appRecord(origin: string): string {
    return `${this.prefix}:app:{${appIdOf(origin)}}`;
  }

  /** Prefix of every matchmaking key of one app; KEYS[1] of the matchmaking scripts. */
  appScope(appId: string): string {
    return `${this.prefix}:{${appId}}:`;
  }

  /** Test-only frozen clock of one app (ms), read by the scripts when VERSUS_TEST_CLOCK=1. */
  testClock(appId: string): string {
    return `${this.appScope(appId)}clock`;
  }

  /** String: GCRA state of the app's admission limit (lua/includes/ratelimit.lua; keys.lua admissionLimitKey). */
  admissionLimit(appId: string): string {
    return `${this.appScope(appId)}rl:admissions`;
  }

  /** String: GCRA state of the app's notification limit (lua/includes/ratelimit.lua). */
  notificationLimit(appId: string): string {
    return `${this.appScope(appId)}rl:notifications`;
  }

  /** Hash of one ticket (used by tests and tools that inspect storage). */
  ticket(appId: string, ticketId: string): string {
    return `${this.appScope(appId)}t:${ticketId}`;
  }

  /** Hash: the app's matchmaking event counters (keys.lua statsKey, which names the fields). */
  matchmakingStats(appId: string): string {
    return `${this.appScope(appId)}stats`;
  }

  /** String: the app's sequence, one INCR per admission and per tombstone (keys.lua `seq`). */
  sequence(appId: string): string {
    return `${this.appScope(appId)}seq`;
  }

  /** Sorted set: every ticket and tombstone of the app, score = sequence (keys.lua `all`). */
  allTickets(appId: string): string {
    return `${this.appScope(appId)}all`;
  }

  /** Hash: queue key -> canonical JSON of its fixed policy, maybe marked (keys.lua `qp`, ticket.lua NO_CUTOFFS). */
  queuePolicies(appId: string): string {
    return `${this.appScope(appId)}qp`;
  }

  /** Sorted set: waiting rated tickets of one queue (keys.lua waitingKey). */
  queueRatedWaiting(appId: string, queue: string): string {
    return `${this.appScope(appId)}qw:${queue}`;
  }

  /** Sorted set: player heads of one queue's waiting unrated tickets (keys.lua headsKey). */
  queuePlayerHeads(appId: string, queue: string): string {
    return `${this.appScope(appId)}qh:${queue}`;
  }

  /** Sorted set: one player's waiting unrated tickets in one queue (keys.lua ownKey; Lua's #queue is its length in bytes). */
  queuePlayerTickets(appId: string, queue: string, player: string): string {
    return `${this.appScope(appId)}qo:${Buffer.byteLength(queue, 'utf8')}:${queue}${player}`;
  }

  /** Sorted sets of one player's waiting rated tickets in one queue (keys.lua ownRatingKey, ownReachUpKey, ownReachDownKey, ownMatureKey). */
  queuePlayerRated(appId: string, queue: string, player: string): { byRating: string; reachUp: string; reachDown: string; mature: string } {
    const tail = `${Buffer.byteLength(queue, 'utf8')}:${queue}${player}`;
    const scope = this.appScope(appId);
    return { byRating: `${scope}rr:${tail}`, reachUp: `${scope}ru:${tail}`, reachDown: `${scope}rd:${tail}`, mature: `${scope}rm:${tail}` };
  }

  /** Sorted sets of one queue's waiting rated tickets by rating, reach, and band at max (keys.lua ratingKey, reachUpKey, reachDownKey, matureKey). */
  queueRated(appId: string, queue: string): { byRating: string; reachUp: string; reachDown: string; mature: string } {
    const scope = this.appScope(appId);
    return { byRating: `${scope}qr:${queue}`, reachUp: `${scope}qu:${queue}`, reachDown: `${scope}qv:${queue}`, mature: `${scope}qm:${queue}` };
  }

  /** Hash: one rated queue's rating tree while it has one (keys.lua treeKey, lua/includes/ratingtree.lua). */
  queueRatingTree(appId: string, queue: string): string {
    return `${this.appScope(appId)}qt:${queue}`;
  }

  /** Sorted set: waiting tickets of one queue that have a cutoff, score = expiresAt (keys.lua expiryKey). */
  queueCutoffs(appId: string, queue: string): string {
    return `${this.appScope(appId)}qx:${queue}`;
  }

  /** SCAN pattern of every key under the app's hash tag scope (its matchmaking and notification keys). */
  appScopePattern(appId: string): string {
    return `${globEscape(this.appScope(appId))}*`;
  }

  // ---- Notifications (src/push). Wallet data share the hash tag `{w:<hash>}`, so one
  // wallet's keys live in one cluster slot; an app's audience, mutes, idempotency records and
  // per-notification delivery state live under the app's scope (its `{<appId>}` tag).

  /** Hash: one wallet's push subscriptions, endpoint -> subscription JSON. */
  walletSubscriptions(wallet: string): string {
    return `${this.prefix}:w:{w:${tagOf(wallet)}}:subs`;
  }

  /** Sorted set: one wallet's subscription endpoints by registration time (oldest dropped past the cap). */
  walletSubscriptionOrder(wallet: string): string {
    return `${this.prefix}:w:{w:${tagOf(wallet)}}:subs-at`;
  }

  /** String: set once the wallet registered a subscription or a visit ("known" to notifyUser). */
  walletKnown(wallet: string): string {
    return `${this.prefix}:w:{w:${tagOf(wallet)}}:known`;
  }

  /** String with a TTL: a nonce of a wallet-signed host request, remembered to refuse replays. */
  walletNonce(wallet: string, nonce: string): string {
    return `${this.prefix}:w:{w:${tagOf(wallet)}}:nonce:${nonce}`;
  }

  /** String: the wallet an endpoint is registered to (one subscription per endpoint). */
  endpointOwner(endpoint: string): string {
    return `${this.prefix}:pe:{e:${tagOf(endpoint)}}`;
  }

  /** Sorted set: wallets that opened the app, score = latest visit (ms). */
  pushVisitors(appId: string): string {
    return `${this.appScope(appId)}push:visits`;
  }

  /** Set: wallets that muted the app. */
  pushMutes(appId: string): string {
    return `${this.appScope(appId)}push:mutes`;
  }

  /** String (24 h): the first answer to an idempotent send; `keyHash` hashes the Idempotency-Key or legacy token. */
  pushIdempotency(appId: string, keyHash: string): string {
    return `${this.appScope(appId)}push:idem:${keyHash}`;
  }

  /** Set: hashes of the subscription endpoints one notification was settled for (sent, gone or refused). */
  pushSettled(appId: string, notificationId: string): string {
    return `${this.appScope(appId)}push:sent:${notificationId}`;
  }

  /** Sorted set: the audience snapshot of one broadcast (ranks are the chunk ranges). */
  pushAudience(appId: string, notificationId: string): string {
    return `${this.appScope(appId)}push:aud:${notificationId}`;
  }

  /** Hash: progress of one broadcast's fan-out (snapshot cursor, count, chunks left). */
  pushFanout(appId: string, notificationId: string): string {
    return `${this.appScope(appId)}push:fan:${notificationId}`;
  }

  /** BullMQ's key prefix: under this prefix, and one hash tag so a queue lives in one cluster slot. */
  bullPrefix(): string {
    return `${this.prefix}:{bull}`;
  }

  /** Pattern matching every key under this prefix (cleanup in tests and tools). */
  everything(): string {
    return `${this.prefix}:*`;
  }
}
