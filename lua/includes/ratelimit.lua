--[[
  Per-app rate limits (`versus apps limits`) as GCRA, the token bucket kept as one number: the
  limit's key holds the bucket's "theoretical arrival time" (TAT, µs). A request at `now` is
  allowed when, with it, the TAT stays within `burst` intervals of `now`; an allowed request
  moves the TAT one interval on, a refused one writes nothing. The key expires when the bucket
  is full again (an absent key is a full bucket). With the test clock switch on, time may stand
  still or jump, so the key lives a fixed day instead.
]]
--- @include "clock"

-- Takes one token; returns 0 when taken, else the milliseconds until one is available.
-- `now` in ms (currentTime), `intervalUs` µs between tokens, `burst` the bucket's size.
local function takeToken(key, now, intervalUs, burst, testClock)
  local nowUs = now * 1000
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < nowUs then tat = nowUs end
  local nextTat = tat + intervalUs
  local excess = nextTat - nowUs - burst * intervalUs
  if excess > 0 then return math.ceil(excess / 1000) end
  local ttl = math.ceil((nextTat - nowUs) / 1000)
  if testClock == '1' then ttl = 86400000 end
  redis.call('SET', key, int(nextTat), 'PX', ttl)
  return 0
end
