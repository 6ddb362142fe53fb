--[[
  pushVisit: Records a visit now; prunes old ones.

  KEYS[1]  visitors
  KEYS[2]  clock
  ARGV[1]  wallet
  ARGV[2]  testClock
  ARGV[3]  retentionMs
]]
--- @include "clock"

local now = currentTime(KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[1], int(now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. int(now - tonumber(ARGV[3])))
return int(now)
