--[[
  pushAddWithTtl: Adds one member and (re)sets the set's lifetime.

  KEYS[1]  set
  ARGV[1]  member
  ARGV[2]  ttlSeconds
]]

redis.call('SADD', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
