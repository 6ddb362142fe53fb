--[[
  createTicket: admit a ticket, or return the current state of an admitted or tombstoned ID.

  KEYS[1]  the app's scope, `<prefix>:{<appId>}:` (every key below it is built in keys.lua)
  ARGV[1]  ticket ID
  ARGV[2]  player
  ARGV[3]  queue key
  ARGV[4]  queue policy, canonical JSON of {rating?, size}
  ARGV[5]  payload, canonical JSON
  ARGV[6]  rating as JSON number text, or "" when unrated
  ARGV[7]  expiresAt as JSON number text, or "" when it waits indefinitely
  ARGV[8]  rating policy `initial` ("" when the queue is unrated)
  ARGV[9]  rating policy `widenPerSecond` ("" when unrated)
  ARGV[10] rating policy `max` ("" when uncapped or unrated)
  ARGV[11] "1" to honour the test clock
  ARGV[12] admission limit: µs between admissions, or "" when the app has none (no bucket read)
  ARGV[13] admission limit: burst, the bucket's size ("" without a limit)

  Returns { "ok", ticketReply } for an ID already known (tombstone or admitted),
    | { "new", state, createdAt[, matchId, partnerId, partner's p, d, c, r, x] } for a new
      admission: the caller knows the input it sent, so only what the script decided comes
      back (state w | m | c; a matched one names its partner and that partner's input fields,
      r and x false when absent; matchedAt, and cancelledAt of one admitted past its cutoff,
      equal createdAt)
    | { "ticket_conflict" } | { "queue_conflict" } | { "rate_limited", msUntilAToken }.
  Numbers go to redis.call as text, each formatted once: Lua's number-to-text is a printf.
  Order (DESIGN.md): existing ID (tombstone as is; identical input its state; else conflict),
  then queue policy, then the app's admission limit (only a new ID takes a token: retries are
  never limited), then admission. A refusal writes nothing.
  Counts in the app's stats hash (keys.lua statsKey): am (matched at once), ax (admitted past
  its cutoff), e (the expiries it retires); an admission that waits is counted by seq alone.
]]
--- @include "clock"
--- @include "ticket"
--- @include "pairing"
--- @include "ratelimit"

local scope = KEYS[1]
local id, player, queue, policyJson, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local rating, expiresAt = ARGV[6], ARGV[7]
local now, createdAt = currentTime(clockKey(scope), ARGV[11])
local tkey = ticketKey(scope, id)

if redis.call('EXISTS', tkey) == 1 then
  local existing = redis.call('HMGET', tkey, 'p', 'q', 'd', 'r', 'x')
  if not existing[1] then return { 'ok', ticketReply(scope, id) } end -- tombstone, whatever was proposed
  local same = existing[1] == player and existing[2] == queue and existing[3] == payload
    and (existing[4] or '') == rating and (existing[5] or '') == expiresAt
    and queuePolicy(scope, queue) == policyJson
  if not same then return { 'ticket_conflict' } end
  observeExpiry(scope, id, now)
  return { 'ok', ticketReply(scope, id) }
end

local fixedPolicy, noCutoffs = queuePolicy(scope, queue)
if fixedPolicy and fixedPolicy ~= policyJson then return { 'queue_conflict' } end
if ARGV[12] ~= '' then
  local wait = takeToken(admissionLimitKey(scope), now, tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[11])
  if wait > 0 then return { 'rate_limited', wait } end
end
if not fixedPolicy then
  -- A new queue is marked "no cutoffs" unless its first ticket has one (which may wait).
  noCutoffs = expiresAt == ''
  setQueuePolicy(scope, queue, policyJson, noCutoffs)
end

local seq = int(redis.call('INCR', scope .. 'seq'))
local fields = { 's', 'w', 'p', player, 'q', queue, 'd', payload, 'c', createdAt, 'n', seq }
if rating ~= '' then fields[#fields + 1] = 'r'; fields[#fields + 1] = rating end
if expiresAt ~= '' then fields[#fields + 1] = 'x'; fields[#fields + 1] = expiresAt end
redis.call('ZADD', scope .. 'all', seq, id)
redis.call('ZADD', playerKey(scope, player), seq, id)

if expiresAt ~= '' and tonumber(expiresAt) <= now then
  -- Already past its cutoff: recorded, never waits, cancelledAt == createdAt.
  fields[2] = 'c'
  fields[#fields + 1] = 'rs'; fields[#fields + 1] = 'expired'
  fields[#fields + 1] = 'ca'; fields[#fields + 1] = createdAt
  redis.call('HSET', tkey, unpack(fields))
  countEvent(scope, 'ax', 1)
  return { 'new', 'c', createdAt }
end

-- A queue no ticket with a cutoff ever waited in has nothing to retire: skip the cutoff index.
if not noCutoffs then retireExpired(scope, queue, now) end

local policy = nil
if ARGV[8] ~= '' then
  policy = { initial = tonumber(ARGV[8]), widen = tonumber(ARGV[9]), max = nil }
  if ARGV[10] ~= '' then policy.max = tonumber(ARGV[10]) end
end
local rated = rating ~= ''
-- The new ticket is in no queue index yet, so the search cannot find it; its hash is written
-- once, afterwards, in its final state.
local partner, partnerPlayer, partnerNextSeq = findPartner(scope, queue, player, rated and tonumber(rating) or nil, now, policy)

if not partner then
  redis.call('HSET', tkey, unpack(fields))
  joinQueue(scope, id, queue, player, rating, seq, expiresAt, rated and reachScores(tonumber(rating), policy.widen, tonumber(createdAt)) or nil, createdAt)
  if expiresAt ~= '' and noCutoffs then setQueuePolicy(scope, queue, policyJson, false) end
  return { 'new', 'w', createdAt }
end

local matchId = 'm' .. seq
local pkey = ticketKey(scope, partner)
-- Read once: the reply's partner half, and whether the partner is in the cutoff index (x).
local p = redis.call('HMGET', pkey, 'p', 'd', 'c', 'r', 'x', 'n')
if rated then
  leaveQueue(scope, partner, queue, p[1], p[4], p[6], p[5] ~= false)
else
  leaveQueueAsHead(scope, partner, queue, partnerPlayer, partnerNextSeq, p[5] ~= false)
end
redis.call('HSET', pkey, 's', 'm', 'mi', matchId, 'o', id, 'ma', createdAt)
fields[2] = 'm'
local n = #fields
fields[n + 1] = 'mi'; fields[n + 2] = matchId; fields[n + 3] = 'o'; fields[n + 4] = partner
fields[n + 5] = 'ma'; fields[n + 6] = createdAt; fields[n + 7] = 'j'; fields[n + 8] = '1'
redis.call('HSET', tkey, unpack(fields))
countEvent(scope, 'am', 1)
return { 'new', 'm', createdAt, matchId, partner, p[1], p[2], p[3], p[4], p[5] }
