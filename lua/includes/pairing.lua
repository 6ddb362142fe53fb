--[[
  Finds the oldest compatible waiting ticket of a queue for a joining ticket, or nil.
  Expired tickets were retired before this runs. Compatibility (spec "Pairing compatibility"):
  another player; unrated pairs only with unrated; rated pairs when
  |joining - waiting| <= min(max, initial + widenPerSecond * waitingSeconds).
  This is the one boundary the pairing structures live behind (keys.lua names them).
]]
--- @include "keys"
--- @include "clock"
--- @include "ratingtree"

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
local MATURE_CHUNK = 512 -- most tickets readWideWindow's moveMatured reads at a time
-- Tickets the window read reads before counting: enough to pass one run (the joiner's, or a
-- flood after its player's fitting ticket) and finish, which cheap shapes do.
local FIRST_TURN = 4
-- Batches the window read reads after counting before the queue gets its rating tree.
local TREE_AFTER = 4

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

--[[
  A waiting rated ticket's scores in its player's reach indexes (keys.lua ru, rd), as text:
  up = rating + widen * t and down = widen * t - rating, t its createdAt in seconds. Fixed per
  ticket (a queue's policy is fixed), and recomputed bit for bit from the ticket's stored r and
  c (ratedCandidate), which is why `createdAt` is the stored value. Without max, a joiner at
  `r` fits a ticket above it exactly when up <= r + initial + widen * now, and one below it
  exactly when down <= initial + widen * now - r; every ticket below meets the first bound,
  every ticket above the second.
]]
local function reachScores(rating, widen, createdAt)
  local wt = widen * (createdAt / 1000)
  return { scoreBound(rating + wt), scoreBound(wt - rating) }
end

-- One waiting rated ticket: its sequence when it is another player's and compatible (else
-- nil), its player, and, given the joiner's reach bounds, whether its scores meet both (what
-- playerFitting counts; max aside, every compatible ticket does).
local function ratedCandidate(scope, id, player, rating, now, policy, reachUp, reachDown)
  local f = redis.call('HMGET', ticketKey(scope, id), 'p', 'r', 'c', 'n')
  local r, c = tonumber(f[2]), tonumber(f[3])
  local seq = nil
  if f[1] ~= player and math.abs(rating - r) <= tolerance(policy, c, now) then seq = tonumber(f[4]) end
  if not reachUp then return seq, f[1], false end
  local wt = policy.widen * (c / 1000)
  return seq, f[1], r + wt <= reachUp and wt - r <= reachDown
end

--[[
  A joiner's reach bounds (see reachScores) as numbers, widened by a relative 1e-12: rounding
  can make a ticket count as reaching, never drop one. Then r -+ max, the bounds of a ticket
  whose band has reached max, widened the same way (-inf and +inf without max).
]]
local function reachBounds(rating, now, policy)
  local wt = policy.widen * (now / 1000)
  local slack = (math.abs(rating) + policy.initial + math.abs(wt) + 1) * 1e-12
  local low, high = -math.huge, math.huge
  if policy.max then
    local maxSlack = (math.abs(rating) + policy.max) * 1e-12
    low, high = rating - policy.max - maxSlack, rating + policy.max + maxSlack
  end
  return rating + policy.initial + wt + slack, policy.initial + wt - rating + slack, low, high
end

-- Builds the queue's rating tree from its waiting tickets (qr, read in chunks): O(n) once,
-- amortised over the admissions that made the queue that deep since it last had none.
local function buildTree(scope, queue, policy, always)
  local rkey, entries = ratingKey(scope, queue), {}
  local at = 0
  while true do
    local ids = redis.call('ZRANGE', rkey, int(at), int(at + MATURE_CHUNK - 1))
    for i = 1, #ids do
      local f = redis.call('HMGET', ticketKey(scope, ids[i]), 'r', 'c', 'p', 'n')
      entries[#entries + 1] = { ids[i], tonumber(f[1]), tonumber(f[2]), f[3], tonumber(f[4]) }
    end
    if #ids < MATURE_CHUNK then break end
    at = at + MATURE_CHUNK
  end
  local t = redis.call('TIME')
  return RatingTree.build(scope, queue, policy.widen, t[1] .. t[2], entries, always)
end

--[[
  The oldest compatible ticket from the queue's rating tree (ratingtree.lua), O(log n): its ID,
  false when there is none, nil when the tree cannot tell.
    - The farthest fitting ticket above the joiner and the farthest below bound every fitting
      ticket's rating. Found in the tree by its reach summaries: a ticket above the joiner fits
      exactly when its up score meets the up bound (see reachScores) and it lies within max,
      one below likewise. Neither: no ticket fits.
    - Between them, the oldest ticket of another player (the tree's per-subtree oldest two of
      different players) is the answer if it fits: every fitting ticket lies there. It does
      whenever each ticket waited since before the clock last went back, if ever: a ticket that
      does not fit but lies nearer than one that fits (same side) is the same player's, and
      younger (two players' would have paired when the younger was admitted).
    - Else (the clock went back; or the tree failed, ratingtree.lua Tree:try, and was dropped)
      nil, and the window read goes on. A tree that does not hold exactly the waiting tickets
      (other code admitted or removed tickets) was dropped when opened (RatingTree.open), or in
      test mode is rebuilt here.
]]
local function treePartner(scope, queue, tree, player, rating, now, policy)
  if tree.always and not RatingTree.inSync(scope, queue, tree) then
    tree = buildTree(scope, queue, policy, true) -- test mode keeps a tree: a new one
  end
  local upBound, downBound, low, high = reachBounds(rating, now, policy)
  local function fits(n) return math.abs(rating - tree:ratingOf(n)) <= tolerance(policy, tree:createdAtOf(n), now) end
  local ok, answer = tree:try(function()
    local above = tree:farAbove(rating, high, upBound, fits)
    local below = tree:farBelow(low, rating, downBound, fits)
    if not above and not below then return false end
    local oldest = tree:oldestIn(below and tree:ratingOf(below) or rating, above and tree:ratingOf(above) or rating, player)
    if not oldest then return false end
    if fits(oldest) then return tree:ticketOf(oldest) end
    return nil
  end)
  if not ok then return nil end -- the tree was dropped
  if answer == nil and tree.always then redis.call('HINCRBY', tree.key, 'unsure', 1) end -- tests count these
  return answer
end

--[[
  The rank just past a run of one player's tickets in `index` (the queue's qr), read in
  direction `step` (1 up, -1 down) from `rank`, where the member `id` stands. `own` is that
  player's index of the same order (rr: the same members, scores and so order). Both are read
  by rank: index[rank + step*m] is own[j + step*m] (j the rank of `id` in own) exactly while
  the tickets from `rank` to there are all the player's, so the run's end is found by
  galloping and bisection, O(log^2 n) for any length, and at once when the run reaches the
  player's last (or first) ticket. A ticket missing from `own` (it waited before the player
  indexes existed) is passed alone, and ends any run. `ownSize`, when the caller knows it, is
  the size of `own` (one ZCARD fewer).
]]
local function pastRun(index, own, rank, id, ownSize, step)
  local j = redis.call('ZRANK', own, id)
  if not j then return rank + step end
  local function inRun(m)
    local mine = redis.call('ZRANGE', own, int(j + step * m), int(j + step * m))[1]
    return mine ~= nil and redis.call('ZRANGE', index, int(rank + step * m), int(rank + step * m))[1] == mine
  end
  local last = j
  if step == 1 then last = (ownSize or redis.call('ZCARD', own)) - 1 - j end
  if inRun(last) then return rank + step * (last + 1) end
  local lo, hi = 0, 1 -- inRun(lo); not inRun(hi) once galloping stops
  while hi < last and inRun(hi) do lo, hi = hi, hi * 2 end
  if hi > last then hi = last end
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if inRun(mid) then lo = mid else hi = mid end
  end
  return rank + step * (lo + 1)
end

--[[
  The window read of findRatedPartner for a window of more than one batch (ranks windowAt to
  windowEnd of qr), in turns with the queue read. Its helpers are defined here, not at the top
  of the script, so that admissions that never get here do not create them.
]]
local function readWideWindow(scope, queue, player, rating, now, policy, windowAt, windowEnd, tree)
  local wkey, rkey = waitingKey(scope, queue), ratingKey(scope, queue)

  local reachUp, reachDown, maxLow, maxHigh = reachBounds(rating, now, policy)
  local upBound, downBound = scoreBound(reachUp), scoreBound(reachDown)
  local matureLow, matureHigh
  if policy.max then matureLow, matureHigh = scoreBound(maxLow), scoreBound(maxHigh) end

  --[[
    The counts below rest on every ticket meeting at least one of the two reach bounds: those
    below the joiner the first, those above the second. That holds while no band is negative:
    checked on the newest ticket's (the smallest, as long as the clock never went back between
    admissions, which the window assumes too; Redis TIME does not), once, when first needed.
  ]]
  local countable = nil
  local function canCount()
    if countable == nil then
      local newest = redis.call('ZRANGE', wkey, '-1', '-1')[1]
      local newestAt = tonumber(redis.call('HGET', ticketKey(scope, newest), 'c'))
      countable = policy.initial + policy.widen * ((now - newestAt) / 1000) >= 0
    end
    return countable
  end

  local joinerBound = scoreBound(rating)
  --[[
    How many tickets may fit among `total` tickets in the reach indexes `up`/`down` and `moved`
    in the max index `mature`, O(log n), never fewer than fit. A ticket still in the reach
    indexes fits only if it meets both reach bounds; one in `mature` fits exactly when it lies
    within max. With `byRating` (the same tickets by rating), counted for each side of the
    joiner: every ticket below it meets the up bound, so up minus those below counts the ones
    above meeting both, and likewise down; returns (above, below). Without, returns one count:
    up + down - total meet both.
  ]]
  local function countFitting(up, down, total, mature, moved, byRating)
    if not byRating then
      local n = 0
      if total > 0 then
        n = redis.call('ZCOUNT', up, '-inf', upBound) + redis.call('ZCOUNT', down, '-inf', downBound) - total
      end
      if moved > 0 then n = n + redis.call('ZCOUNT', mature, matureLow, matureHigh) end
      return n
    end
    local movedBelow = moved > 0 and redis.call('ZCOUNT', mature, '-inf', '(' .. joinerBound) or 0
    local reachBelow = redis.call('ZCOUNT', byRating, '-inf', '(' .. joinerBound) - movedBelow
    local above, below = 0, 0
    if total > 0 then
      above = redis.call('ZCOUNT', up, '-inf', upBound) - reachBelow
      below = redis.call('ZCOUNT', down, '-inf', downBound) - (total - reachBelow)
    end
    if moved > 0 then
      above = above + redis.call('ZCOUNT', mature, joinerBound, matureHigh)
      below = below + redis.call('ZCOUNT', mature, matureLow, '(' .. joinerBound)
    end
    return above, below
  end

  --[[
    One player's waiting tickets in the queue (ru/rd/rm, by rating rr), counted as countFitting
    does (by side with `bySide`), and last the player's ticket count. False when the player has
    none, or tickets outside those indexes (they waited before ru/rd existed), or the clock went
    back: such a player is never passed. Once as many of the player's counted tickets have been
    read, the rest need no reading.
  ]]
  local function playerFitting(who, bySide)
    local upKey, movedKey, ratingKey = ownReachUpKey(scope, queue, who), ownMatureKey(scope, queue, who), ownRatingKey(scope, queue, who)
    local total = redis.call('ZCARD', upKey)
    local moved = policy.max and redis.call('ZCARD', movedKey) or 0
    local size = total + moved
    if size == 0 or not canCount() or redis.call('ZCARD', ratingKey) ~= size then
      if bySide then return false, false, size end
      return false, size
    end
    local a, b = countFitting(upKey, ownReachDownKey(scope, queue, who), total, movedKey, moved, bySide and ratingKey)
    if bySide then return a, b, size end
    return a, size
  end

  --[[
    Moves the tickets whose band has reached max out of the reach indexes (qu/qv, ru/rd) into
    the max indexes (qm, rm), oldest first. Bands reach max in admission order, so qm is always
    the first ZCARD(qm) tickets of qw and the next one to move is the one after them. Each
    ticket moves once (amortised O(log n) each, as retiring expired tickets); until it has, it
    only makes the counts looser.
  ]]
  local function moveMatured()
    local qm = matureKey(scope, queue)
    local at, chunk = redis.call('ZCARD', qm), 1 -- mostly none is due: read one first
    while true do
      local nextOnes = redis.call('ZRANGE', wkey, int(at), int(at + chunk - 1))
      for i = 1, #nextOnes do
        local id = nextOnes[i]
        local f = redis.call('HMGET', ticketKey(scope, id), 'p', 'r', 'c')
        if tolerance(policy, tonumber(f[3]), now) < policy.max then return end
        redis.call('ZREM', reachUpKey(scope, queue), id)
        redis.call('ZREM', reachDownKey(scope, queue), id)
        redis.call('ZREM', ownReachUpKey(scope, queue, f[1]), id)
        redis.call('ZREM', ownReachDownKey(scope, queue, f[1]), id)
        redis.call('ZADD', qm, f[2], id)
        redis.call('ZADD', ownMatureKey(scope, queue, f[1]), f[2], id)
      end
      if #nextOnes < chunk then return end
      at, chunk = at + chunk, math.min(chunk * 8, MATURE_CHUNK)
    end
  end

  --[[
    Indexes the waiting tickets that are in neither qu nor qm (they waited before those
    existed) there and in their player's reach and rating indexes, so that counting works from
    then on: once per ticket, O(log n) each, as moving matured ones. A ticket whose band has
    reached max goes to qu too, and moves with the next count.
  ]]
  local function indexOlderTickets()
    local qu, qv, qm = reachUpKey(scope, queue), reachDownKey(scope, queue), matureKey(scope, queue)
    local at = 0
    while true do
      local ids = redis.call('ZRANGE', wkey, int(at), int(at + MATURE_CHUNK - 1))
      if #ids == 0 then return end
      local inReach = redis.call('ZMSCORE', qu, unpack(ids))
      local inMature = policy.max and redis.call('ZMSCORE', qm, unpack(ids)) or {}
      for i = 1, #ids do
        if not inReach[i] and not inMature[i] then
          local id = ids[i]
          local f = redis.call('HMGET', ticketKey(scope, id), 'p', 'r', 'c')
          local reach = reachScores(tonumber(f[2]), policy.widen, tonumber(f[3]))
          redis.call('ZADD', qu, reach[1], id)
          redis.call('ZADD', qv, reach[2], id)
          redis.call('ZADD', ownReachUpKey(scope, queue, f[1]), reach[1], id)
          redis.call('ZADD', ownReachDownKey(scope, queue, f[1]), reach[2], id)
          redis.call('ZADD', ownRatingKey(scope, queue, f[1]), f[2], id)
        end
      end
      if #ids < MATURE_CHUNK then return end
      at = at + MATURE_CHUNK
    end
  end

  --[[
    At least how many waiting tickets of other players fit the joiner above it and below it:
    all of the queue's counted tickets less the joiner's own, counted alike (the same tickets
    are in both). Tickets that waited before qu/qv existed are indexed first. Nil when the
    clock went back, or the indexes disagree otherwise (never expected).
  ]]
  local function othersFitting()
    if not canCount() then return nil end
    if policy.max then moveMatured() end
    local qu, qm = reachUpKey(scope, queue), matureKey(scope, queue)
    local total = redis.call('ZCARD', qu)
    local moved = policy.max and redis.call('ZCARD', qm) or 0
    local waiting = redis.call('ZCARD', rkey)
    if total + moved < waiting then
      indexOlderTickets()
      total = redis.call('ZCARD', qu)
    end
    if total + moved ~= waiting then return nil end
    local above, below = countFitting(qu, reachDownKey(scope, queue), total, qm, moved, rkey)
    if above + below == 0 then return 0, 0 end
    local ownAbove, ownBelow = playerFitting(player, true)
    if ownAbove then return above - ownAbove, below - ownBelow end
    return above, below
  end

  --[[
    Whether the window read may pass a run of `owner`'s tickets: every ticket of theirs that
    reaches the joiner has been read. `known[owner]` holds `ids`, the owner's reaching tickets
    read so far, and once asked, `fit` and `size` from playerFitting (asked once per player).
  ]]
  local known = {}
  local function entry(owner)
    if not known[owner] then known[owner] = { ids = {} } end
    return known[owner]
  end
  local function passable(owner)
    local k = entry(owner)
    if k.fit == nil then k.fit, k.size = playerFitting(owner, false) end
    if not k.fit or #k.ids < k.fit then return false end
    if #k.ids == 0 then return true end
    -- Only indexed tickets are counted: one that waited before ru existed may be among those read.
    local function indexedIn(key)
      local n = 0
      for _, score in ipairs(redis.call('ZMSCORE', key, unpack(k.ids))) do
        if score then n = n + 1 end
      end
      return n
    end
    local indexed = indexedIn(ownReachUpKey(scope, queue, owner))
    if policy.max then indexed = indexed + indexedIn(ownMatureKey(scope, queue, owner)) end
    return indexed == k.fit
  end

  --[[
    One side of the window read, from the joining rating outward:
      step      1 up the rating index, -1 down
      at, stop  the next rank to fetch, and the last rank of the window that way
      got       the last fetched batch as ZRANGE returned it, in rank order, `width` entries a
                ticket: 2 with scores (the ratings, for nearest first), 1 without
      from, k   the rank of got's first ticket, and the index of the side's next ticket in it
      batch     the next fetch's size: the first is small (the nearest tickets often start a
                run that is passed), the rest RATED_BATCH
      last      the owner of the unfit ticket just read on this side
      found     the other players' fitting tickets read on this side
      fits      how many there are (countSides), nil until counted
      empty     true once the side has no ticket left (see fillSide), or has read all `fits`
  ]]
  local NO_TICKETS = {} -- shared, never written
  local function newSide(step, at, stop)
    return { step = step, at = at, stop = stop, got = NO_TICKETS, width = 1, from = 0, k = 0, batch = 2, last = nil, empty = false, found = 0, fits = nil }
  end

  -- Whether `side` has a next ticket, fetching a batch when its last one is used up; a side
  -- found without one is marked `empty` for good. Scores are fetched only while the other side
  -- is not empty: alone, a side needs no distances.
  local function fillSide(side, other)
    if side.empty then return false end
    if side.k >= 1 and side.k <= #side.got / side.width then return true end
    if (side.at - side.stop) * side.step > 0 then side.empty = true; return false end
    local from, to = side.at, math.min(side.stop, side.at + side.batch - 1)
    if side.step < 0 then from, to = math.max(side.stop, side.at - side.batch + 1), side.at end
    if other.empty then
      side.got, side.width = redis.call('ZRANGE', rkey, int(from), int(to)), 1
    else
      side.got, side.width = redis.call('ZRANGE', rkey, int(from), int(to), 'WITHSCORES'), 2
    end
    side.from, side.batch = from, RATED_BATCH
    side.k = side.step > 0 and 1 or #side.got / side.width
    side.at = side.step > 0 and to + 1 or from - 1
    return side.k >= 1
  end

  -- The distance from the joining rating of the side's next ticket (a batch with scores).
  local function headDistance(side)
    return math.abs(tonumber(side.got[2 * side.k]) - rating)
  end

  local best, bestSeq = nil, nil
  local split = redis.call('ZCOUNT', rkey, '-inf', '(' .. joinerBound)
  split = math.max(windowAt, math.min(windowEnd + 1, split))
  local below, above = newSide(-1, split - 1, windowAt), newSide(1, split, windowEnd)

  --[[
    After a first turn of FIRST_TURN tickets (it answers the cheap shapes), the other players'
    fitting tickets are counted on each side. None at all: no partner, whatever the window
    holds. Else a side is done once it has read that many (a looser count only ends it later):
    a side without any is not read, and tickets that do not fit are read only where they lie
    nearer than a fitting ticket on the same side.
  ]]
  local function countSides()
    local fitsAbove, fitsBelow = othersFitting()
    if fitsAbove == nil then return true end
    if fitsAbove + fitsBelow <= 0 then return false end
    above.fits, below.fits = fitsAbove, fitsBelow
    for _, side in ipairs({ above, below }) do
      if side.found >= side.fits then side.empty = true end
    end
    return true
  end

  local queueAt, counted, treeDue = 0, false, TREE_AFTER
  while true do
    for _ = 1, counted and RATED_BATCH or FIRST_TURN do
      local hasBelow, hasAbove = fillSide(below, above), fillSide(above, below)
      if not hasBelow and not hasAbove then return best end
      local side = above
      if hasBelow and (not hasAbove or headDistance(below) < headDistance(above)) then side = below end
      local id, rank = side.got[side.width * (side.k - 1) + 1], side.from + side.k - 1
      side.k = side.k + side.step
      local seq, owner, reaches = ratedCandidate(scope, id, player, rating, now, policy, reachUp, reachDown)
      if reaches and owner ~= player then
        local ids = entry(owner).ids
        ids[#ids + 1] = id
      end
      if seq then
        if bestSeq == nil or seq < bestSeq then best, bestSeq = id, seq end
        side.found = side.found + 1
        if side.found == side.fits then side.empty = true end
        side.last = nil
      elseif owner == player or (owner == side.last and passable(owner)) then
        -- A run of the joiner's own tickets, or of a player all of whose reaching ones are read.
        local size = owner ~= player and known[owner].size or nil
        side.at = pastRun(rkey, ownRatingKey(scope, queue, owner), rank, id, size, side.step)
        side.got, side.k, side.last = NO_TICKETS, 0, nil
      else
        side.last = owner
      end
    end

    if not counted then
      counted = true
      if not countSides() then return nil end
      if above.empty and below.empty then return best end
    end

    -- A queue with a rating tree asks it now; one without gets one after TREE_AFTER more
    -- batches. `tree` is false once it could not tell (then the reads go on).
    if tree ~= false then
      if tree or treeDue == 0 then
        tree = tree or buildTree(scope, queue, policy, false)
        local answer = treePartner(scope, queue, tree, player, rating, now, policy)
        if answer ~= nil then return answer or nil end
        tree = false
      end
      treeDue = treeDue - 1
    end

    -- The queue read passes nothing: it only ever reads as many batches as the window read,
    -- which answers.
    local inOrder = redis.call('ZRANGE', wkey, int(queueAt), int(queueAt + RATED_BATCH - 1))
    for i = 1, #inOrder do
      if ratedCandidate(scope, inOrder[i], player, rating, now, policy) then return inOrder[i] end
    end
    if #inOrder < RATED_BATCH then return nil end
    queueAt = queueAt + RATED_BATCH
  end
end

--[[
  Rated: the oldest waiting rated ticket of another player within its band.
  Two indexes of the queue's waiting rated tickets: qw (admission order) and qr (rating).
  No band is wider than the oldest waiting ticket's (bands only widen with waiting time), so
  every compatible ticket has a rating within that band of the joining rating: the "window".
    - An empty window (ZCOUNT, O(log n)) means no partner: the common case of a queue of
      incompatible ratings costs O(log n) whatever its depth. A window of one batch is read
      whole.
    - Otherwise two exact searches run in turns, a batch each, and the first to finish answers:
      the window read outward from the joining rating, nearest first (the answer is its oldest
      compatible ticket, known once the window is read to both ends), and the queue read in
      admission order (the answer is the first compatible ticket met).
    - The window read passes a run of one player's tickets (pastRun) when the player is the
      joiner, or every ticket of theirs that reaches the joiner has been read already (playerFitting;
      a player with none is passed at once). Reading nearest first is what makes that come
      early: of one player's tickets, one that fits and one older that does not, the fitting one
      is the nearer (its distance <= its band <= the older band < the older distance).
    - After FIRST_TURN tickets, the other players' fitting tickets are counted on each side of
      the joiner (countSides, O(log n) with the reach indexes qu/qv and qm): none means no
      partner; a side is done once it has read that many. On one side, a ticket that does not
      fit but lies nearer than one that fits is that ticket's player's, younger (two players'
      would have paired when the younger was admitted), so only such tickets, and the joiner's,
      are read in vain.
    - A queue whose window read has not finished TREE_AFTER batches after counting gets a
      rating tree (ratingtree.lua, built once, O(n)); from then on its admissions ask the tree
      after counting (treePartner, O(log n)).
      Cost: O(log n) without a partner; with one, O(log n + min(window read, tickets older
      than the answer, TREE_AFTER batches)) ticket reads, where a run in the window of the
      joiner's or of a passed player's tickets counts O(log^2 n), and O(log n) node reads.
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

  local tree, dropped = RatingTree.open(scope, queue)
  if dropped then tree = false end -- out of sync: built again by a later admission, not this one
  if tree and tree.always then
    local answer = treePartner(scope, queue, tree, player, rating, now, policy)
    if answer ~= nil then return answer or nil end
    tree = false
  end

  -- Both reads go by rank (O(log n + batch) each), never by a growing LIMIT offset.
  local windowAt = redis.call('ZCOUNT', rkey, '-inf', '(' .. low)
  local windowEnd = windowAt + windowSize - 1
  if windowSize <= RATED_BATCH then
    local best, bestSeq = nil, nil
    local window = redis.call('ZRANGE', rkey, int(windowAt), int(windowEnd))
    for i = 1, #window do
      local seq = ratedCandidate(scope, window[i], player, rating, now, policy)
      if seq and (bestSeq == nil or seq < bestSeq) then best, bestSeq = window[i], seq end
    end
    return best
  end
  return readWideWindow(scope, queue, player, rating, now, policy, windowAt, windowEnd, tree)
end

-- Returns the partner's ID, or nil; for an unrated partner also its player and the sequence of
-- that player's next waiting ticket (a rated partner's player comes from its hash, which the
-- caller reads anyway).
local function findPartner(scope, queue, player, rating, now, policy)
  if rating == nil then return findUnratedPartner(scope, queue, player) end
  return findRatedPartner(scope, queue, player, rating, now, policy)
end
