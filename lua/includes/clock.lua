--[[
  The one clock of every replica: Redis TIME in milliseconds. With the test switch on
  (ARGV flag "1", refused by production configuration), a frozen per-app time in the app's
  clock key (keys.lua clockKey, Keys.testClock in TypeScript) wins when it is set.
]]
-- Returns now in ms, and the same as integer text (TIME's digits spliced: no number formatting).
local function currentTime(clockKey, testClock)
  if testClock == '1' then
    local frozen = redis.call('GET', clockKey)
    if frozen then return tonumber(frozen), string.format('%.0f', tonumber(frozen)) end
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t[1] .. string.sub('00000' .. t[2], -6, -4)
end

-- Integers (times, sequences) as decimal text: tostring would switch to exponents.
local function int(n) return string.format('%.0f', n) end
