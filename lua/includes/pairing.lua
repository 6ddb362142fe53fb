--[[
  Finds the oldest compatible waiting ticket of a queue for a joining ticket, or nil.
  Expired tickets were retired before this runs. Compatibility (spec "Pairing compatibility"):
  another player; unrated pairs only with unrated; rated pairs when
  |joining - waiting| <= min(max, initial + widenPerSecond * waitingSeconds).
  This is the one boundary the pairing structures live behind. Unrated tickets are found in
  O(log n) through the player-head index (keys.lua); rated ones by a scan in admission order.
]]
--- @include "keys"

local PAIRING_BATCH = 100

-- Unrated: the oldest waiting ticket of another player, from the player-head index. At most
-- two heads are read: the oldest, and the next when the oldest is the joining player's own.
local function findUnratedPartner(scope, queue, player)
  local heads = redis.call('ZRANGE', headsKey(scope, queue), 0, 1)
  for i = 1, #heads do
    if heads[i] ~= player then return redis.call('ZRANGE', ownKey(scope, queue, heads[i]), 0, 0)[1] end
  end
  return nil
end

-- Rated: the oldest waiting rated ticket of another player within the tolerance band.
-- (A scan in admission order over the queue's rated waiting tickets.)
local function findRatedPartner(scope, queue, player, rating, now, policy)
  local wkey = waitingKey(scope, queue)
  local start = 0
  while true do
    local batch = redis.call('ZRANGE', wkey, start, start + PAIRING_BATCH - 1)
    if #batch == 0 then return nil end
    for i = 1, #batch do
      local candidate = batch[i]
      local f = redis.call('HMGET', ticketKey(scope, candidate), 'p', 'r', 'c')
      if f[1] ~= player then
        local tolerance = policy.initial + policy.widen * ((now - tonumber(f[3])) / 1000)
        if policy.max and tolerance > policy.max then tolerance = policy.max end
        if math.abs(rating - tonumber(f[2])) <= tolerance then return candidate end
      end
    end
    start = start + PAIRING_BATCH
  end
end

local function findPartner(scope, queue, player, rating, now, policy)
  if rating == nil then return findUnratedPartner(scope, queue, player) end
  return findRatedPartner(scope, queue, player, rating, now, policy)
end
