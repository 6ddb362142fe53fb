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
--- @include "ratingtree"

-- A queue's entry in qp (keys.lua) is its policy JSON, followed by NO_CUTOFFS while no ticket
-- with a cutoff has waited in the queue: admissions then skip its cutoff index (qx), one call
-- fewer. Canonical JSON ends in '}', so the mark cannot be part of a policy; an entry without
-- it (every entry written before the mark existed too) means "the cutoff index may hold some".
local NO_CUTOFFS, NO_CUTOFFS_BYTE = '~', 126

-- The queue's policy JSON (false for a queue no ticket has named yet), and whether its cutoff
-- index is known to be empty.
local function queuePolicy(scope, queue)
  local entry = redis.call('HGET', queuePoliciesKey(scope), queue)
  if entry and string.byte(entry, -1) == NO_CUTOFFS_BYTE then return string.sub(entry, 1, -2), true end
  return entry, false
end

local function setQueuePolicy(scope, queue, policyJson, noCutoffs)
  redis.call('HSET', queuePoliciesKey(scope), queue, noCutoffs and policyJson .. NO_CUTOFFS or policyJson)
end

-- Puts a new waiting ticket into its queue's indexes.
-- `rating` is the ticket's rating as JSON number text, or "" when unrated; a rated ticket
-- brings its reach scores { up, down } as text (pairing.lua reachScores) and its createdAt.
local function joinQueue(scope, id, queue, player, rating, seq, expiresAt, reach, createdAt)
  if rating ~= '' then
    local tree = RatingTree.open(scope, queue)
    if tree then tree:try(tree.insert, tonumber(rating), tonumber(createdAt), player, id, tonumber(seq)) end
    redis.call('ZADD', waitingKey(scope, queue), seq, id)
    redis.call('ZADD', ratingKey(scope, queue), rating, id)
    redis.call('ZADD', ownRatingKey(scope, queue, player), rating, id)
    redis.call('ZADD', ownReachUpKey(scope, queue, player), reach[1], id)
    redis.call('ZADD', ownReachDownKey(scope, queue, player), reach[2], id)
    redis.call('ZADD', reachUpKey(scope, queue), reach[1], id)
    redis.call('ZADD', reachDownKey(scope, queue), reach[2], id)
  else
    redis.call('ZADD', ownKey(scope, queue, player), seq, id)
    -- NX: a player's existing head is older than any new ticket.
    redis.call('ZADD', headsKey(scope, queue), 'NX', seq, player)
  end
  if expiresAt ~= '' then redis.call('ZADD', expiryKey(scope, queue), expiresAt, id) end
end

-- The player-head index after `player`'s oldest waiting unrated ticket left: the next one's
-- sequence (`nextSeq`, false when none) becomes the head.
local function moveHead(scope, queue, player, nextSeq)
  if nextSeq then
    redis.call('ZADD', headsKey(scope, queue), nextSeq, player)
  else
    redis.call('ZREM', headsKey(scope, queue), player)
  end
end

-- Takes a waiting ticket out of its queue's indexes (on cancel or expiry): O(log n).
-- `rating` and `seq`: the ticket's stored r (false when unrated) and n.
-- `hasCutoff`: whether the ticket has an expiresAt (only then is it in the cutoff index).
local function leaveQueue(scope, id, queue, player, rating, seq, hasCutoff)
  if rating then
    local tree = RatingTree.open(scope, queue)
    if tree and tree:try(tree.remove, tonumber(rating), tonumber(seq)) and tree.size < RatingTree.TREE_MIN and not tree.always then
      tree:drop()
    end
    redis.call('ZREM', waitingKey(scope, queue), id)
    redis.call('ZREM', ratingKey(scope, queue), id)
    redis.call('ZREM', ownRatingKey(scope, queue, player), id)
    redis.call('ZREM', ownReachUpKey(scope, queue, player), id)
    redis.call('ZREM', ownReachDownKey(scope, queue, player), id)
    if redis.call('ZREM', reachUpKey(scope, queue), id) == 1 then
      redis.call('ZREM', reachDownKey(scope, queue), id)
    else
      -- Moved to qm when its band reached max (pairing.lua moveMatured), or it waited before
      -- qu existed (then it is in neither).
      redis.call('ZREM', matureKey(scope, queue), id)
      redis.call('ZREM', ownMatureKey(scope, queue, player), id)
    end
  else
    local own = ownKey(scope, queue, player)
    local oldest = redis.call('ZRANGE', own, '0', '1', 'WITHSCORES')
    redis.call('ZREM', own, id)
    if oldest[1] == id then moveHead(scope, queue, player, oldest[4] or false) end
  end
  if hasCutoff then redis.call('ZREM', expiryKey(scope, queue), id) end
end

-- The same for an unrated ticket the caller found as its player's head, knowing the sequence
-- of that player's next ticket (pairing.lua findUnratedPartner): no read needed.
local function leaveQueueAsHead(scope, id, queue, player, nextSeq, hasCutoff)
  redis.call('ZREM', ownKey(scope, queue, player), id)
  moveHead(scope, queue, player, nextSeq)
  if hasCutoff then redis.call('ZREM', expiryKey(scope, queue), id) end
end

local function cancelWaiting(scope, id, reason, now)
  local tkey = ticketKey(scope, id)
  local f = redis.call('HMGET', tkey, 'q', 'p', 'r', 'x', 'n')
  redis.call('HSET', tkey, 's', 'c', 'rs', reason, 'ca', int(now))
  leaveQueue(scope, id, f[1], f[2], f[3], f[5], f[4] ~= false)
end

-- Adds n to one of the app's event counters (keys.lua statsKey names the fields).
local function countEvent(scope, field, n)
  redis.call('HINCRBY', statsKey(scope), field, n)
end

-- A read evaluates expiry: a waiting ticket at or past its cutoff becomes cancelled (expired).
local function observeExpiry(scope, id, now)
  local f = redis.call('HMGET', ticketKey(scope, id), 's', 'x')
  if f[1] == 'w' and f[2] and tonumber(f[2]) <= now then
    cancelWaiting(scope, id, 'expired', now)
    countEvent(scope, 'e', 1)
  end
end

-- Retires every waiting ticket of a queue whose cutoff is at or before now (O(log n) each),
-- in chunks: a burst of 100k expired tickets never sits in the Lua heap at once. One counter
-- write per chunk, none when nothing was due.
local RETIRE_CHUNK, RETIRE_CHUNK_TEXT = 500, '500' -- as text too: see createTicket.lua on numbers
local function retireExpired(scope, queue, now)
  local xkey = expiryKey(scope, queue)
  repeat
    local due = redis.call('ZRANGEBYSCORE', xkey, '-inf', int(now), 'LIMIT', '0', RETIRE_CHUNK_TEXT)
    for i = 1, #due do cancelWaiting(scope, due[i], 'expired', now) end
    if #due > 0 then countEvent(scope, 'e', #due) end
  until #due < RETIRE_CHUNK
end

-- Reply for one stored ticket: { id, its fields, the other ticket's fields (matched), queue
-- policy } (src/matchmaking/render.ts). A new admission replies with less (createTicket.lua).
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
  if queue then policy = queuePolicy(scope, queue) or '' end
  return { id, own, partner, policy }
end
