--[[
  pushChunkDone: A chunk finished: once every chunk
  has, the snapshot and the delivered set expire after a grace period. Returns chunks left.

  KEYS[1]  fanout state
  KEYS[2]  snapshot
  KEYS[3]  settled
  ARGV[1]  graceSeconds
]]

local left = redis.call('HINCRBY', KEYS[1], 'left', -1)
if left <= 0 then
  redis.call('EXPIRE', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[3], ARGV[1])
  redis.call('HSET', KEYS[1], 'finished', '1')
end
return left
