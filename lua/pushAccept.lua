--[[
  pushAccept: the last step of accepting a notification of an app with a notification limit
  (`versus apps limits --notifications`): takes a token and, for an idempotent send, stores its
  first answer, in one step. An idempotent send whose key already has an answer (a retry, or a
  concurrent twin that won) takes no token and gets that answer.

  KEYS[1]  the app's notification limit (Keys.notificationLimit)
  KEYS[2]  clock
  KEYS[3]  the idempotency record (Keys.pushIdempotency); absent for a send without a key
  ARGV[1]  µs between notifications
  ARGV[2]  burst, the bucket's size
  ARGV[3]  testClock
  ARGV[4]  the idempotency record to store (JSON; "" without KEYS[3])
  ARGV[5]  its lifetime in seconds ("" without KEYS[3])

  Returns { "ok" } | { "answered", recordJson } | { "rate_limited", msUntilAToken }.
  A refusal writes nothing.
]]
--- @include "clock"
--- @include "ratelimit"

if KEYS[3] then
  local first = redis.call('GET', KEYS[3])
  if first then return { 'answered', first } end
end
local wait = takeToken(KEYS[1], currentTime(KEYS[2], ARGV[3]), tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
if wait > 0 then return { 'rate_limited', wait } end
if KEYS[3] then redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5]) end
return { 'ok' }
