--[[
  One ticket is a hash of short fields, so Redis keeps it compact:
    s   state: w (waiting), m (matched), c (cancelled)
    p   player (absent on a tombstone: a cancellation of an unknown ID)
    q   queue key            d  payload, canonical JSON
    r   rating (optional)    x  expiresAt (optional), as the client's JSON number text
    c   createdAt (ms)       n  sequence
    mi  match ID             o  the other ticket's ID      ma  matchedAt
    j   "1" on the joining side of a match
    rs  reason: requested | expired                         ca  cancelledAt
]]
--- @include "keys"

-- Takes a waiting ticket out of its queue's indexes (on match, cancel or expiry).
local function leaveQueue(scope, id, queue)
  redis.call('ZREM', waitingKey(scope, queue), id)
  redis.call('ZREM', expiryKey(scope, queue), id)
end

local function cancelWaiting(scope, id, queue, reason, now)
  redis.call('HSET', ticketKey(scope, id), 's', 'c', 'rs', reason, 'ca', int(now))
  leaveQueue(scope, id, queue)
end

-- A read evaluates expiry: a waiting ticket at or past its cutoff becomes cancelled (expired).
local function observeExpiry(scope, id, now)
  local f = redis.call('HMGET', ticketKey(scope, id), 's', 'x', 'q')
  if f[1] == 'w' and f[2] and tonumber(f[2]) <= now then
    cancelWaiting(scope, id, f[3], 'expired', now)
  end
end

-- Retires every waiting ticket of a queue whose cutoff is at or before now.
local function retireExpired(scope, queue, now)
  local xkey = expiryKey(scope, queue)
  local due = redis.call('ZRANGEBYSCORE', xkey, '-inf', now)
  for i = 1, #due do
    redis.call('HSET', ticketKey(scope, due[i]), 's', 'c', 'rs', 'expired', 'ca', int(now))
    redis.call('ZREM', waitingKey(scope, queue), due[i])
  end
  if #due > 0 then redis.call('ZREMRANGEBYSCORE', xkey, '-inf', now) end
end

-- Reply for one ticket: { id, its fields, the other ticket's fields (matched), queue policy }.
local function ticketReply(scope, id)
  local own = redis.call('HGETALL', ticketKey(scope, id))
  local partner = {}
  local policy = ''
  local state, other, queue
  for i = 1, #own, 2 do
    if own[i] == 's' then state = own[i + 1]
    elseif own[i] == 'o' then other = own[i + 1]
    elseif own[i] == 'q' then queue = own[i + 1] end
  end
  if state == 'm' and other then partner = redis.call('HGETALL', ticketKey(scope, other)) end
  if queue then policy = redis.call('HGET', scope .. 'qp', queue) or '' end
  return { id, own, partner, policy }
end
