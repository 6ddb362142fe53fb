--[[
  cancelTicket: cancel a waiting ticket, or record a tombstone for an unknown ID.
  Never leaves a ticket waiting: returns it matched (pairing won) or cancelled.

  KEYS[1]  the app's scope, `<prefix>:{<appId>}:`
  ARGV[1]  ticket ID
  ARGV[2]  "1" to honour the test clock

  Returns { "ok", ticketReply }.
  Counts the event in the app's stats hash (keys.lua statsKey): a tombstone (tb), a requested
  cancellation (c) or an expiry found by the cancel (e).
]]
--- @include "clock"
--- @include "ticket"

local scope = KEYS[1]
local id = ARGV[1]
local now = currentTime(clockKey(scope), ARGV[2])
local tkey = ticketKey(scope, id)

local f = redis.call('HMGET', tkey, 's', 'x')
if not f[1] then
  -- Unknown ID: a permanent tombstone, listed app-wide and by ID, never by player.
  local seq = redis.call('INCR', scope .. 'seq')
  redis.call('HSET', tkey, 's', 'c', 'rs', 'requested', 'ca', int(now), 'c', int(now), 'n', seq)
  redis.call('ZADD', scope .. 'all', seq, id)
  countEvent(scope, 'tb', 1)
elseif f[1] == 'w' then
  local reason, counter = 'requested', 'c'
  if f[2] and tonumber(f[2]) <= now then reason, counter = 'expired', 'e' end
  cancelWaiting(scope, id, reason, now)
  countEvent(scope, counter, 1)
end
return { 'ok', ticketReply(scope, id) }
