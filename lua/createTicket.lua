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

  Returns { "ok", ticketReply } | { "ticket_conflict" } | { "queue_conflict" }
    | { "rate_limited", msUntilAToken }.
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
local now = currentTime(clockKey(scope), ARGV[11])
local tkey = ticketKey(scope, id)

local existing = redis.call('HMGET', tkey, 's', 'p', 'q', 'd', 'r', 'x')
if existing[1] then
  if not existing[2] then return { 'ok', ticketReply(scope, id) } end -- tombstone, whatever was proposed
  local same = existing[2] == player and existing[3] == queue and existing[4] == payload
    and (existing[5] or '') == rating and (existing[6] or '') == expiresAt
    and redis.call('HGET', scope .. 'qp', queue) == policyJson
  if not same then return { 'ticket_conflict' } end
  observeExpiry(scope, id, now)
  return { 'ok', ticketReply(scope, id) }
end

local fixedPolicy = redis.call('HGET', scope .. 'qp', queue)
if fixedPolicy and fixedPolicy ~= policyJson then return { 'queue_conflict' } end
if ARGV[12] ~= '' then
  local wait = takeToken(admissionLimitKey(scope), now, tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[11])
  if wait > 0 then return { 'rate_limited', wait } end
end
if not fixedPolicy then redis.call('HSET', scope .. 'qp', queue, policyJson) end

local seq = redis.call('INCR', scope .. 'seq')
local fields = { 's', 'w', 'p', player, 'q', queue, 'd', payload, 'c', int(now), 'n', int(seq) }
if rating ~= '' then table.insert(fields, 'r'); table.insert(fields, rating) end
if expiresAt ~= '' then table.insert(fields, 'x'); table.insert(fields, expiresAt) end
redis.call('ZADD', scope .. 'all', seq, id)
redis.call('ZADD', playerKey(scope, player), seq, id)

if expiresAt ~= '' and tonumber(expiresAt) <= now then
  -- Already past its cutoff: recorded, never waits, cancelledAt == createdAt.
  fields[2] = 'c'
  table.insert(fields, 'rs'); table.insert(fields, 'expired')
  table.insert(fields, 'ca'); table.insert(fields, int(now))
  redis.call('HSET', tkey, unpack(fields))
  countEvent(scope, 'ax', 1)
  return { 'ok', admissionReply(id, fields, {}, policyJson) }
end

retireExpired(scope, queue, now)

local policy = nil
if ARGV[8] ~= '' then
  policy = { initial = tonumber(ARGV[8]), widen = tonumber(ARGV[9]), max = nil }
  if ARGV[10] ~= '' then policy.max = tonumber(ARGV[10]) end
end
local rated = rating ~= ''
-- The new ticket is in no queue index yet, so the search cannot find it; its hash is written
-- once, afterwards, in its final state.
local partner, partnerPlayer, partnerNextSeq = findPartner(scope, queue, player, rated and tonumber(rating) or nil, now, policy)

local partnerFields = {}
if partner then
  local matchId = 'm' .. seq
  local pkey = ticketKey(scope, partner)
  -- Read once: it tells whether the partner has a cutoff, and becomes the reply's partner half.
  partnerFields = redis.call('HGETALL', pkey)
  local hasCutoff = false
  for i = 1, #partnerFields, 2 do
    if partnerFields[i] == 's' then partnerFields[i + 1] = 'm'
    elseif partnerFields[i] == 'x' then hasCutoff = true end
  end
  if rated then
    leaveQueue(scope, partner, queue, nil, true, hasCutoff)
  else
    leaveQueueAsHead(scope, partner, queue, partnerPlayer, partnerNextSeq, hasCutoff)
  end
  local matched = { 'mi', matchId, 'o', id, 'ma', int(now) }
  redis.call('HSET', pkey, 's', 'm', unpack(matched))
  for _, v in ipairs(matched) do table.insert(partnerFields, v) end
  fields[2] = 'm'
  for _, v in ipairs({ 'mi', matchId, 'o', partner, 'ma', int(now), 'j', '1' }) do table.insert(fields, v) end
  redis.call('HSET', tkey, unpack(fields))
  countEvent(scope, 'am', 1)
else
  redis.call('HSET', tkey, unpack(fields))
  joinQueue(scope, id, queue, player, rating, seq, expiresAt)
end
return { 'ok', admissionReply(id, fields, partnerFields, policyJson) }
