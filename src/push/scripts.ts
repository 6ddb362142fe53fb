import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/connection.js';

/**
 * Small Lua scripts of the push data, kept here beside their only caller (src/push/store.ts).
 * Each touches keys of one hash tag only (one app, or one wallet), so it runs on Redis Cluster.
 * Run by SHA; NOSCRIPT (Redis restarted) is answered by sending the source once.
 */
export class InlineScript {
  readonly sha: string;

  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(redis: RedisClient, keys: string[], args: Array<string | number>): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) return redis.eval(this.source, keys.length, ...keys, ...args);
      throw error;
    }
  }
}

/** The one clock (lua/includes/clock.lua): Redis TIME, or with the test switch the app's frozen clock key. */
const CLOCK = `
local function currentTime(clockKey, testClock)
  if testClock == '1' then
    local frozen = redis.call('GET', clockKey)
    if frozen then return tonumber(frozen) end
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(n) return string.format('%.0f', n) end
`;

/** KEYS visitors, clock; ARGV wallet, testClock, retentionMs. Records a visit now; prunes old ones. */
export const VISIT = new InlineScript(`${CLOCK}
local now = currentTime(KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[1], int(now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. int(now - tonumber(ARGV[3])))
return int(now)
`);

/** KEYS visitors, clock; ARGV wallet, windowMs, testClock. 1 when the wallet visited within the window. */
export const VISITED_WITHIN = new InlineScript(`${CLOCK}
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) >= currentTime(KEYS[2], ARGV[3]) - tonumber(ARGV[2]) then return 1 end
return 0
`);

/**
 * KEYS subs, order; ARGV endpoint, subscription JSON, nowMs, max. Stores (replaces) the
 * subscription of an endpoint; past \`max\` the oldest are dropped and returned.
 */
export const ADD_SUBSCRIPTION = new InlineScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local dropped = {}
local n = redis.call('ZCARD', KEYS[2])
local max = tonumber(ARGV[4])
if n > max then
  dropped = redis.call('ZRANGE', KEYS[2], 0, n - max - 1)
  for _, e in ipairs(dropped) do
    redis.call('HDEL', KEYS[1], e)
    redis.call('ZREM', KEYS[2], e)
  end
end
return dropped
`);

/**
 * KEYS subs, order; ARGV endpoint, [expected JSON]. Removes the endpoint's subscription (only
 * when it still is the expected one, if given). Returns 1 when removed.
 */
export const REMOVE_SUBSCRIPTION = new InlineScript(`
if ARGV[2] and ARGV[2] ~= '' then
  if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
end
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return removed
`);

/** KEYS key; ARGV value. Deletes the key only while it holds the value. */
export const DELETE_IF = new InlineScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);

/** KEYS set; ARGV member, ttlSeconds. Adds one member and (re)sets the set's lifetime. */
export const ADD_WITH_TTL = new InlineScript(`
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`);

/**
 * One step of a broadcast's audience snapshot. KEYS visitors, snapshot, fanout state, clock;
 * ARGV windowMs, pageSize, testClock, ttlSeconds.
 *
 * Copies the next page of the app's visitors (by visit time, from the window's start, fixed at
 * the first step) into the snapshot. The cursor is a score: members tied with a page's last
 * score are copied with it, and the next page starts after it, so a wallet that visits again
 * during the copy moves forward and is copied later, never skipped. Returns {1, count} once
 * the copy is complete (a short page), else {0, copied}. Each step is bounded, so a large
 * audience never blocks Redis for long; the finished snapshot never changes again.
 */
export const SNAPSHOT_STEP = new InlineScript(`${CLOCK}
local st = redis.call('HMGET', KEYS[3], 'cursor', 'count')
local ttl = tonumber(ARGV[4])
if st[2] then return {1, tonumber(st[2])} end
local min
if st[1] then
  min = '(' .. st[1]
else
  min = int(currentTime(KEYS[4], ARGV[3]) - tonumber(ARGV[1]))
end
local pageSize = tonumber(ARGV[2])
local items = redis.call('ZRANGE', KEYS[1], min, '+inf', 'BYSCORE', 'LIMIT', 0, pageSize, 'WITHSCORES')
local n = #items / 2
if n > 0 then
  local last = items[#items]
  local args = {}
  for i = 1, #items, 2 do
    args[#args + 1] = items[i + 1]
    args[#args + 1] = items[i]
  end
  if n == pageSize then
    for _, m in ipairs(redis.call('ZRANGE', KEYS[1], last, last, 'BYSCORE')) do
      args[#args + 1] = last
      args[#args + 1] = m
    end
  end
  for i = 1, #args, 2000 do
    redis.call('ZADD', KEYS[2], unpack(args, i, math.min(i + 1999, #args)))
  end
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('HSET', KEYS[3], 'cursor', last)
end
redis.call('EXPIRE', KEYS[3], ttl)
if n < pageSize then
  local count = redis.call('ZCARD', KEYS[2])
  redis.call('HSET', KEYS[3], 'count', count)
  return {1, count}
end
return {0, n}
`);

/**
 * KEYS fanout state, snapshot, settled; ARGV graceSeconds. A chunk finished: once every chunk
 * has, the snapshot and the delivered set expire after a grace period. Returns chunks left.
 */
export const CHUNK_DONE = new InlineScript(`
local left = redis.call('HINCRBY', KEYS[1], 'left', -1)
if left <= 0 then
  redis.call('EXPIRE', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[3], ARGV[1])
  redis.call('HSET', KEYS[1], 'finished', '1')
end
return left
`);
