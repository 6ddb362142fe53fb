--[[
  pushVisitedWithin: 1 when the wallet visited within the window.

  KEYS[1]  visitors
  KEYS[2]  clock
  ARGV[1]  wallet
  ARGV[2]  windowMs
  ARGV[3]  testClock
]]
--- @include "clock"

local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) >= currentTime(KEYS[2], ARGV[3]) - tonumber(ARGV[2]) then return 1 end
return 0
