--[[
  Finds the oldest compatible waiting ticket of a queue for a joining ticket, or nil.
  Expired tickets were retired before this runs. Compatibility (spec "Pairing compatibility"):
  another player; unrated pairs only with unrated; rated pairs when
  |joining - waiting| <= min(max, initial + widenPerSecond * waitingSeconds).
  This is the one boundary the pairing structures live behind.
]]
--- @include "keys"

local PAIRING_BATCH = 100

local function findPartner(scope, queue, player, rating, now, policy)
  local wkey = waitingKey(scope, queue)
  local start = 0
  while true do
    local batch = redis.call('ZRANGE', wkey, start, start + PAIRING_BATCH - 1)
    if #batch == 0 then return nil end
    for i = 1, #batch do
      local candidate = batch[i]
      local f = redis.call('HMGET', ticketKey(scope, candidate), 'p', 'r', 'c')
      if f[1] ~= player then
        if rating == nil then
          if not f[2] then return candidate end
        elseif f[2] then
          local tolerance = policy.initial + policy.widen * ((now - tonumber(f[3])) / 1000)
          if policy.max and tolerance > policy.max then tolerance = policy.max end
          if math.abs(rating - tonumber(f[2])) <= tolerance then return candidate end
        end
      end
    end
    start = start + PAIRING_BATCH
  end
end
