--[[
  pushSnapshotStep: One step of a broadcast's audience snapshot.
  Copies the next page of the app's visitors (by visit time, from the window's start, fixed at
  the first step) into the snapshot. The cursor is a score: members tied with a page's last
  score are copied with it, and the next page starts after it, so a wallet that visits again
  during the copy moves forward and is copied later, never skipped. Returns {1, count} once
  the copy is complete (a short page), else {0, copied}. Each step is bounded, so a large
  audience never blocks Redis for long; the finished snapshot never changes again.

  KEYS[1]  visitors
  KEYS[2]  snapshot
  KEYS[3]  fanout state
  KEYS[4]  clock
  ARGV[1]  windowMs
  ARGV[2]  pageSize
  ARGV[3]  testClock
  ARGV[4]  ttlSeconds
]]
--- @include "clock"

local st = redis.call('HMGET', KEYS[3], 'cursor', 'count')
local ttl = tonumber(ARGV[4])
if st[2] then return {1, tonumber(st[2])} end
local min
if st[1] then
  min = '(' .. st[1]
else
  min = int(currentTime(KEYS[4], ARGV[3]) - tonumber(ARGV[1]))
end
local pageSize = tonumber(ARGV[2])
local items = redis.call('ZRANGE', KEYS[1], min, '+inf', 'BYSCORE', 'LIMIT', 0, pageSize, 'WITHSCORES')
local n = #items / 2
if n > 0 then
  local last = items[#items]
  local args = {}
  for i = 1, #items, 2 do
    args[#args + 1] = items[i + 1]
    args[#args + 1] = items[i]
  end
  if n == pageSize then
    for _, m in ipairs(redis.call('ZRANGE', KEYS[1], last, last, 'BYSCORE')) do
      args[#args + 1] = last
      args[#args + 1] = m
    end
  end
  for i = 1, #args, 2000 do
    redis.call('ZADD', KEYS[2], unpack(args, i, math.min(i + 1999, #args)))
  end
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('HSET', KEYS[3], 'cursor', last)
end
redis.call('EXPIRE', KEYS[3], ttl)
if n < pageSize then
  local count = redis.call('ZCARD', KEYS[2])
  redis.call('HSET', KEYS[3], 'count', count)
  return {1, count}
end
return {0, n}
