--[[
  pushDeleteIf: Deletes the key only while it holds the value.

  KEYS[1]  key
  ARGV[1]  value
]]

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
