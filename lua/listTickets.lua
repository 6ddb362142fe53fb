--[[
  listTickets: one page of an app's tickets in creation order, evaluating expiry of each.

  KEYS[1]  the app's scope, `<prefix>:{<appId>}:`
  ARGV[1]  player filter, or ""
  ARGV[2]  ticket ID filter, or ""
  ARGV[3]  snapshot bound (highest sequence of the traversal), or "" on a first page
  ARGV[4]  sequence after which this page starts ("0" on a first page)
  ARGV[5]  page size
  ARGV[6]  "1" to honour the test clock

  Returns { snapshot, { ticketReply... }, nextAfter or "" }.
  A traversal covers the tickets whose sequence is at most the snapshot, so later
  admissions need a new traversal; each ticket's state is read when its page is.
  A ticket found expired counts under e in the app's stats hash (keys.lua statsKey).
]]
--- @include "clock"
--- @include "ticket"

local scope = KEYS[1]
local player, id = ARGV[1], ARGV[2]
local snapshot = ARGV[3]
local after = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local now = currentTime(clockKey(scope), ARGV[6])
if snapshot == '' then snapshot = redis.call('GET', scope .. 'seq') or '0' end
local bound = tonumber(snapshot)

local ids
if id ~= '' then
  ids = {}
  local f = redis.call('HMGET', ticketKey(scope, id), 'n', 'p')
  if f[1] and tonumber(f[1]) <= bound and tonumber(f[1]) > after and (player == '' or f[2] == player) then
    ids = { id }
  end
else
  local index = scope .. 'all'
  if player ~= '' then index = playerKey(scope, player) end
  ids = redis.call('ZRANGEBYSCORE', index, '(' .. int(after), bound, 'LIMIT', 0, limit + 1)
end

local nextAfter = ''
if #ids > limit then
  ids[#ids] = nil
  nextAfter = redis.call('HGET', ticketKey(scope, ids[#ids]), 'n')
end

local page = {}
for i = 1, #ids do
  observeExpiry(scope, ids[i], now)
  page[i] = ticketReply(scope, ids[i])
end
return { snapshot, page, nextAfter }
