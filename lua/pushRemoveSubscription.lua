--[[
  pushRemoveSubscription: Removes the endpoint's subscription (only
  when it still is the expected one, if given). Returns 1 when removed.

  KEYS[1]  subs
  KEYS[2]  order
  ARGV[1]  endpoint
  ARGV[2]  expected subscription JSON (optional)
]]

if ARGV[2] and ARGV[2] ~= '' then
  if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
end
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return removed
