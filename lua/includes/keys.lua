--[[
  Key layout of one app's matchmaking data, below the app's scope `<prefix>:{<appId>}:`
  (the TypeScript half is src/redis/keys.ts; the hash tag keeps an app in one slot).
    seq            string   per-app sequence: creation order of tickets and tombstones (one INCR each)
    all            zset     every ticket and tombstone, score = sequence
    qp             hash     queue key -> canonical JSON of its fixed policy {rating?, size},
                            marked while no ticket with a cutoff waited in it (ticket.lua NO_CUTOFFS)
    clock          string   test-only frozen clock (ms)
    t:<id>         hash     one ticket (fields in ticket.lua)
    p:<player>     zset     one player's tickets, score = sequence (tombstones have no player)
    qw:<queue>     zset     waiting RATED tickets of one queue, score = sequence
    qr:<queue>     zset     the same tickets, score = rating (pairing.lua's rating window)
    qu:<queue>     zset     the same tickets while their band is below max (all of them without
                            max), score = rating + widen * createdAt (s), as ru below
    qv:<queue>     zset     the same as qu, score = widen * createdAt (s) - rating, as rd below
    qm:<queue>     zset     the other ones: tickets whose band has reached max, score = rating.
                            qu/qv and qm count every other player's fitting ticket in O(log n)
                            (pairing.lua countFitting); qm holds the first ZCARD(qm) tickets of qw
    qt:<queue>     hash     the queue's rating tree while it has one (ratingtree.lua): nodes by sequence
    qh:<queue>     zset     "player heads": player -> sequence of that player's oldest waiting
                            UNRATED ticket in the queue (finds another player's oldest in O(log n))
    qo:<n>:<queue><player>  zset  one player's waiting unrated tickets in one queue, score =
                            sequence (<n> is the queue key's length, so the name is unambiguous)
    rr:<n>:<queue><player>  zset  one player's waiting RATED tickets in one queue, score = rating:
                            pairing.lua passes a run of one player's tickets in qr in O(log^2 n)
    ru:<n>:<queue><player>  zset  the same tickets, score = rating + widen * createdAt (s)
    rd:<n>:<queue><player>  zset  the same tickets, score = widen * createdAt (s) - rating: two
                            ZCOUNTs count the player's tickets that reach a joiner (pairing.lua playerFitting)
    rm:<n>:<queue><player>  zset  one player's tickets of qm (ru/rd then no longer hold them),
                            score = rating
    qx:<queue>     zset     waiting tickets of one queue that have a cutoff, score = expiresAt
    rl:admissions  string   state of the app's admission limit (ratelimit.lua); absent: bucket full
    stats          hash     the app's matchmaking event counters, each HINCRBY'd by the script
                            that makes the event (src/matchmaking/stats.ts reads them):
                              am  admissions that matched at once (one per match)
                              ax  admissions already past their cutoff (recorded expired)
                              c   waiting tickets cancelled at a client's request
                              e   waiting tickets expired (retired by an admission, read or cancel)
                              tb  tombstones (cancels of unknown IDs)
                            `seq` is INCR'd once per admission and once per tombstone, nothing else,
                            so admissions = seq - tb, and an admission that waits writes no counter:
                            waiting = seq - tb - 2 * am - ax - c - e, matched tickets = 2 * am.
]]
local function clockKey(scope) return scope .. 'clock' end
local function queuePoliciesKey(scope) return scope .. 'qp' end
local function ticketKey(scope, id) return scope .. 't:' .. id end
local function playerKey(scope, player) return scope .. 'p:' .. player end
local function waitingKey(scope, queue) return scope .. 'qw:' .. queue end
local function ratingKey(scope, queue) return scope .. 'qr:' .. queue end
local function reachUpKey(scope, queue) return scope .. 'qu:' .. queue end
local function reachDownKey(scope, queue) return scope .. 'qv:' .. queue end
local function matureKey(scope, queue) return scope .. 'qm:' .. queue end
local function treeKey(scope, queue) return scope .. 'qt:' .. queue end
local function expiryKey(scope, queue) return scope .. 'qx:' .. queue end
local function headsKey(scope, queue) return scope .. 'qh:' .. queue end
local function admissionLimitKey(scope) return scope .. 'rl:admissions' end
local function statsKey(scope) return scope .. 'stats' end
local function ownKey(scope, queue, player) return scope .. 'qo:' .. #queue .. ':' .. queue .. player end
local function ownRatingKey(scope, queue, player) return scope .. 'rr:' .. #queue .. ':' .. queue .. player end
local function ownReachUpKey(scope, queue, player) return scope .. 'ru:' .. #queue .. ':' .. queue .. player end
local function ownReachDownKey(scope, queue, player) return scope .. 'rd:' .. #queue .. ':' .. queue .. player end
local function ownMatureKey(scope, queue, player) return scope .. 'rm:' .. #queue .. ':' .. queue .. player end
