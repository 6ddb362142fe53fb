--[[
  Finds the oldest compatible waiting ticket of a queue for a joining ticket, or nil.
  Expired tickets were retired before this runs. Compatibility (spec "Pairing compatibility"):
  another player; unrated pairs only with unrated; rated pairs when
  |joining - waiting| <= min(max, initial + widenPerSecond * waitingSeconds).
  This is the one boundary the pairing structures live behind (keys.lua names them).
]]
--- @include "keys"
--- @include "clock"

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

-- One waiting rated ticket: its sequence when it is another player's and compatible (else
-- nil), and its player.
local function ratedCandidate(scope, id, player, rating, now, policy)
  local f = redis.call('HMGET', ticketKey(scope, id), 'p', 'r', 'c', 'n')
  if f[1] ~= player and math.abs(rating - tonumber(f[2])) <= tolerance(policy, tonumber(f[3]), now) then
    return tonumber(f[4]), f[1]
  end
  return nil, f[1]
end

--[[
  A waiting rated ticket's scores in its player's reach indexes (keys.lua ru, rd), as text:
  up = rating + widen * t and down = widen * t - rating, t its createdAt in seconds. Fixed per
  ticket (a queue's policy is fixed). Without max, a joiner at `r` fits a ticket above it
  exactly when up <= r + initial + widen * now, and one below it exactly when
  down <= initial + widen * now - r; every ticket below meets the first bound, every ticket
  above the second.
]]
local function reachScores(rating, widen, createdAt)
  local wt = widen * (createdAt / 1000)
  return { scoreBound(rating + wt), scoreBound(wt - rating) }
end

-- Whether none of `other`'s waiting tickets in the queue fits a joiner at `rating`, O(log n):
-- each of the player's tickets meets at least one of the two bounds (those below the joiner the
-- first, those above the second) and meets both exactly when it fits, ignoring max (which only
-- narrows bands), so up + down <= total means none fits. The bounds are widened by a relative
-- 1e-12: rounding can make a player look hopeful, never hopeless. A player whose tickets all
-- predate the reach indexes is never hopeless; one with some such tickets has only the indexed
-- ones passed (pastRun stops at the others, which are then read).
local function hopeless(scope, queue, other, rating, now, policy)
  local wt = policy.widen * (now / 1000)
  local slack = (math.abs(rating) + policy.initial + math.abs(wt) + 1) * 1e-12
  local up = redis.call('ZCOUNT', ownReachUpKey(scope, queue, other), '-inf', scoreBound(rating + policy.initial + wt + slack))
  local down = redis.call('ZCOUNT', ownReachDownKey(scope, queue, other), '-inf', scoreBound(policy.initial + wt - rating + slack))
  local total = redis.call('ZCARD', ownRatingKey(scope, queue, other))
  return total > 0 and up + down <= total, total
end

--[[
  The rank just past a run of one player's tickets in `index` (the queue's qr), the run
  starting at `rank` with the member `id`. `own` is that player's index of the same order (rr:
  the same members, scores and so order). Both are read by rank: index[rank+m] is
  own[j+m] (j the rank of `id` in own) exactly while index[rank..rank+m] are all the player's,
  so the run's end is found by galloping and bisection, O(log^2 n) for any length, and at once
  when the run reaches the player's last ticket. A ticket missing from `own` (it waited before
  the player indexes existed) is passed alone, and ends any run. `ownSize`, when the caller
  knows it, is the size of `own` (one ZCARD fewer).
]]
local function pastRun(index, own, rank, id, ownSize)
  local j = redis.call('ZRANK', own, id)
  if not j then return rank + 1 end
  local function inRun(m)
    local mine = redis.call('ZRANGE', own, int(j + m), int(j + m))[1]
    return mine ~= nil and redis.call('ZRANGE', index, int(rank + m), int(rank + m))[1] == mine
  end
  local last = (ownSize or redis.call('ZCARD', own)) - 1 - j
  if inRun(last) then return rank + last + 1 end
  local lo, hi = 0, 1 -- inRun(lo); not inRun(hi) once galloping stops
  while hi < last and inRun(hi) do lo, hi = hi, hi * 2 end
  if hi > last then hi = last end
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if inRun(mid) then lo = mid else hi = mid end
  end
  return rank + lo + 1
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
      first compatible ticket met). The window read passes a run of one player's tickets in
      one step (pastRun) when the player is the joiner or has no ticket that fits (hopeless).
      Cost: O(log n + min(window size, tickets older than the answer)) ticket reads, where a
      run in the window of the joiner's or of a hopeless player's tickets counts O(log^2 n).
  The window is widened by a relative 1e-12 so that float rounding at the exact band edge can
  only add a candidate (each one is then tested exactly), never drop one.
]]
local function findRatedPartner(scope, queue, player, rating, now, policy)
  local wkey, rkey = waitingKey(scope, queue), ratingKey(scope, queue)
  local oldest = redis.call('ZRANGE', wkey, '0', '0')[1]
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
  -- In the window, a run of one player's tickets is passed unread when the player is the
  -- joiner, or has no ticket that fits (asked once per player, and only when a second ticket
  -- of theirs follows an unfit one, so a queue of many players pays nothing). The queue read
  -- passes nothing: it only ever reads as many batches as the window read, which answers.
  local passable, sizes = { [player] = true }, {} -- sizes: a hopeless player's ticket count
  local function passes(owner)
    if passable[owner] == nil then passable[owner], sizes[owner] = hopeless(scope, queue, owner, rating, now, policy) end
    return passable[owner]
  end
  local windowLast = nil -- the owner of the unfit ticket just read
  while true do
    local window = redis.call('ZRANGE', rkey, int(windowAt), int(math.min(windowEnd, windowAt + RATED_BATCH - 1)))
    local resume = windowAt + #window
    for i = 1, #window do
      local seq, owner = ratedCandidate(scope, window[i], player, rating, now, policy)
      if seq then
        if bestSeq == nil or seq < bestSeq then best, bestSeq = window[i], seq end
        windowLast = nil
      elseif (owner == player or owner == windowLast) and passes(owner) then
        resume = pastRun(rkey, ownRatingKey(scope, queue, owner), windowAt + i - 1, window[i], sizes[owner])
        break
      else
        windowLast = owner
      end
    end
    windowAt = resume
    if windowAt > windowEnd then return best end

    local inOrder = redis.call('ZRANGE', wkey, int(queueAt), int(queueAt + RATED_BATCH - 1))
    for i = 1, #inOrder do
      if ratedCandidate(scope, inOrder[i], player, rating, now, policy) then return inOrder[i] end
    end
    if #inOrder < RATED_BATCH then return nil end
    queueAt = queueAt + RATED_BATCH
  end
end

-- Returns the partner's ID, or nil; for an unrated partner also its player and the sequence of
-- that player's next waiting ticket (a rated partner's player comes from its hash, which the
-- caller reads anyway).
local function findPartner(scope, queue, player, rating, now, policy)
  if rating == nil then return findUnratedPartner(scope, queue, player) end
  return findRatedPartner(scope, queue, player, rating, now, policy)
end
