--[[
  Finds the oldest compatible waiting ticket of a queue for a joining ticket, or nil.
  Expired tickets were retired before this runs. Compatibility (spec "Pairing compatibility"):
  another player; unrated pairs only with unrated; rated pairs when
  |joining - waiting| <= min(max, initial + widenPerSecond * waitingSeconds).
  This is the one boundary the pairing structures live behind (keys.lua names them).
]]
--- @include "keys"

-- Unrated: the oldest waiting ticket of another player, from the player-head index. At most
-- two heads are read: the oldest, and the next when the oldest is the joining player's own.
-- Returns the ticket, its player (whose head it is) and the sequence of that player's next
-- waiting ticket in the queue (false when none), so taking the partner out of the queue needs
-- no further read (ticket.lua leaveQueueAsHead).
local function findUnratedPartner(scope, queue, player)
  local heads = redis.call('ZRANGE', headsKey(scope, queue), '0', '1')
  for i = 1, #heads do
    if heads[i] ~= player then
      local oldest = redis.call('ZRANGE', ownKey(scope, queue, heads[i]), '0', '1', 'WITHSCORES')
      return oldest[1], heads[i], oldest[4] or false
    end
  end
  return nil
end

local RATED_BATCH = 16

-- The band of a ticket waiting since `createdAt`: min(max, initial + widen * waitingSeconds).
local function tolerance(policy, createdAt, now)
  local band = policy.initial + policy.widen * ((now - createdAt) / 1000)
  if policy.max and band > policy.max then band = policy.max end
  return band
end

-- A score bound for ZCOUNT/ZRANGEBYSCORE, exact to the last bit ('%.17g'), infinities spelled
-- the way Redis reads them.
local function scoreBound(x)
  if x == math.huge then return '+inf' end
  if x == -math.huge then return '-inf' end
  return string.format('%.17g', x)
end

-- Compatibility of one waiting rated ticket; returns its sequence when compatible, else nil.
local function ratedCandidate(scope, id, player, rating, now, policy)
  local f = redis.call('HMGET', ticketKey(scope, id), 'p', 'r', 'c', 'n')
  if f[1] == player then return nil end
  if math.abs(rating - tonumber(f[2])) <= tolerance(policy, tonumber(f[3]), now) then return tonumber(f[4]) end
  return nil
end

--[[
  Rated: the oldest waiting rated ticket of another player within its band.
  Two indexes of the queue's waiting rated tickets: qw (admission order) and qr (rating).
  No band is wider than the oldest waiting ticket's (bands only widen with waiting time), so
  every compatible ticket has a rating within that band of the joining rating: the "window".
    - An empty window (ZCOUNT, O(log n)) means no partner: the common case of a queue of
      incompatible ratings costs O(log n) whatever its depth.
    - Otherwise two exact searches run in turns, a batch each, and the first to finish answers:
      the window read in rating order (the answer is its oldest compatible ticket, known once
      the window is read to its end), and the queue read in admission order (the answer is the
      first compatible ticket met). Cost: O(log n + min(window size, tickets older than the
      answer)) ticket reads.
  The window is widened by a relative 1e-12 so that float rounding at the exact band edge can
  only add a candidate (each one is then tested exactly), never drop one.
]]
local function findRatedPartner(scope, queue, player, rating, now, policy)
  local wkey, rkey = waitingKey(scope, queue), ratingKey(scope, queue)
  local oldest = redis.call('ZRANGE', wkey, 0, 0)[1]
  if not oldest then return nil end
  local widest = tolerance(policy, tonumber(redis.call('HGET', ticketKey(scope, oldest), 'c')), now)
  local slack = (math.abs(rating) + widest) * 1e-12
  local low, high = scoreBound(rating - widest - slack), scoreBound(rating + widest + slack)
  local windowSize = redis.call('ZCOUNT', rkey, low, high)
  if windowSize == 0 then return nil end

  -- Both reads go by rank (O(log n + batch) each), never by a growing LIMIT offset.
  local windowAt = redis.call('ZCOUNT', rkey, '-inf', '(' .. low)
  local windowEnd = windowAt + windowSize - 1
  local queueAt = 0
  local best, bestSeq = nil, nil
  while true do
    local window = redis.call('ZRANGE', rkey, windowAt, math.min(windowEnd, windowAt + RATED_BATCH - 1))
    for i = 1, #window do
      local seq = ratedCandidate(scope, window[i], player, rating, now, policy)
      if seq and (bestSeq == nil or seq < bestSeq) then best, bestSeq = window[i], seq end
    end
    windowAt = windowAt + RATED_BATCH
    if windowAt > windowEnd then return best end

    local inOrder = redis.call('ZRANGE', wkey, queueAt, queueAt + RATED_BATCH - 1)
    for i = 1, #inOrder do
      if ratedCandidate(scope, inOrder[i], player, rating, now, policy) then return inOrder[i] end
    end
    if #inOrder < RATED_BATCH then return nil end
    queueAt = queueAt + RATED_BATCH
  end
end

-- Returns the partner's ID, or nil; for an unrated partner also its player and the sequence of
-- that player's next waiting ticket (a rated queue's indexes need neither).
local function findPartner(scope, queue, player, rating, now, policy)
  if rating == nil then return findUnratedPartner(scope, queue, player) end
  return findRatedPartner(scope, queue, player, rating, now, policy)
end
