--[[
  pushAddSubscription: Stores (replaces) the
  subscription of an endpoint; past max the oldest are dropped and returned.

  KEYS[1]  subs
  KEYS[2]  order
  ARGV[1]  endpoint
  ARGV[2]  subscription JSON
  ARGV[3]  nowMs
  ARGV[4]  max
]]

redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local dropped = {}
local n = redis.call('ZCARD', KEYS[2])
local max = tonumber(ARGV[4])
if n > max then
  dropped = redis.call('ZRANGE', KEYS[2], 0, n - max - 1)
  for _, e in ipairs(dropped) do
    redis.call('HDEL', KEYS[1], e)
    redis.call('ZREM', KEYS[2], e)
  end
end
return dropped
