--[[
  The rating tree of one rated queue (keys.lua treeKey): a treap of its waiting tickets ordered
  by (rating, sequence), each node summing up its children's subtrees, so that the oldest
  compatible ticket is found in O(log n) whatever the queue holds (pairing.lua treePartner says
  how). It costs every join and leave of the queue O(log n) node reads, so a queue has one only
  while it needs it: pairing.lua builds it when its cheaper reads do not finish, leaveQueue
  drops it once the queue holds fewer than TREE_MIN tickets, and RatingTree.open drops one that
  scripts unaware of it (an older version) left out of sync with the queue.

  One hash:
    m       cmsgpack of { root, size, salt, widen, always, newest, layout }:
              root    sequence of the root node, 0 when the tree is empty
              size    number of nodes (= waiting rated tickets of the queue)
              salt    text whose SHA-1 keys the node priorities, fixed when the tree is built
              widen   the queue's widenPerSecond (the reach scores of the summaries need it)
              always  test-only: 1 keeps the tree, and lets it answer every admission it can
              newest  the highest sequence the tree ever held (RatingTree.inSync)
              layout  RatingTree.LAYOUT of the nodes
    unsure  test-only: how many times a tree with `always` could not tell (pairing.lua treePartner)
    <seq>   one node, keyed by its ticket's sequence: cmsgpack of the array indexed below
]]
--- @include "keys"
--- @include "clock"

-- TREE_MIN: a queue keeps its tree while it holds at least this many tickets. STEP_LIMIT: node
-- visits one operation may take (O(log n) of them, a few hundred at 1M tickets).
-- LAYOUT: the node layout (below); a tree of another one is dropped when opened and built anew.
local RatingTree = { TREE_MIN = 64, STEP_LIMIT = 5000, LAYOUT = 2 }
do
  local opened = {} -- per script run: tree key -> Tree, or false when the queue has none

  --[[
    The tree's code, made on first use: most script runs never need it, and defining its
    functions would cost each of them (Redis runs a script's whole body on every call).
  ]]
  local made = nil
  local function methods()
    if made then return made end
    --[[
      A node: its ticket's rating, createdAt (ms), player, ID, sequence and priority; its
      children (sequences, 0 for none); and for each child the summary of that child's subtree,
      six fields from SIDE[L] and SIDE[R] (all 0 and '' without a child): the least reach scores
      (+MU: rating + widen * t, +MV: widen * t - rating, t in seconds, as pairing.lua
      reachScores), the oldest ticket (+S1, of player +P1) and the oldest of any other player
      (+S2 of +P2; 0 and '' if none). Keeping a child's summary in its parent, not in the child,
      lets a change on one path recompute every summary on it without reading the siblings, and
      lets a query judge a subtree without reading its root.
    ]]
    local X, T, PL, ID, SEQ, PR, L, R = 1, 2, 3, 4, 5, 6, 7, 8
    local SIDE = { [L] = 9, [R] = 15 }
    local MU, MV, S1, P1, S2, P2 = 0, 1, 2, 3, 4, 5

    local Tree = {}
    Tree.__index = Tree
    local function newTree(key, root, size, salt, widen, always, newest)
      return setmetatable({ key = key, root = root, size = size, salt = salt, widen = widen, always = always, newest = newest or 0, nodes = {}, dirty = {}, gone = {}, steps = 0, limit = math.huge }, Tree)
    end

    --[[
      Runs one operation, fn(tree, ...). On any error (a tree left inconsistent, never expected:
      a node missing, or more steps than any operation takes, as in a cycle) the tree is
      dropped and false returned: the tree only ever speeds pairing up, the queue's sorted sets
      decide, and a later admission builds a new one.
    ]]
    function Tree:try(fn, ...)
      self.steps, self.limit = 0, RatingTree.STEP_LIMIT -- a build, O(n), runs without the limit
      local ok, result = pcall(fn, self, ...)
      if ok then return true, result end
      self:drop()
      return false
    end

    function Tree:node(seq)
      if seq == 0 then return nil end
      self.steps = self.steps + 1
      if self.steps > self.limit then error('rating tree: too many steps') end
      local n = self.nodes[seq]
      if not n then
        n = cmsgpack.unpack(redis.call('HGET', self.key, int(seq)))
        self.nodes[seq] = n
      end
      return n
    end

    -- Adds ticket s of player p to a summary's oldest two: s1 of p1, the oldest of all, and s2
    -- of p2, the oldest of any player but p1's (0 and '' while there is none).
    local function addOldest(s1, p1, s2, p2, s, p)
      if p == p1 then
        if s < s1 then s1 = s end
      elseif s < s1 then
        s2, p2, s1, p1 = s1, p1, s, p
      elseif s2 == 0 or s < s2 then
        s2, p2 = s, p
      end
      return s1, p1, s2, p2
    end

    -- The summary of the subtree at node n: its ticket's, with its children's from its sides.
    -- (It allocates nothing: a build calls it for every node.)
    function Tree:whole(n)
      local wt = self.widen * (n[T] / 1000)
      local mu, mv = n[X] + wt, wt - n[X]
      local s1, p1, s2, p2 = n[SEQ], n[PL], 0, ''
      for side = L, R do
        if n[side] ~= 0 then
          local b = SIDE[side]
          if n[b + MU] < mu then mu = n[b + MU] end
          if n[b + MV] < mv then mv = n[b + MV] end
          s1, p1, s2, p2 = addOldest(s1, p1, s2, p2, n[b + S1], n[b + P1])
          if n[b + S2] ~= 0 then s1, p1, s2, p2 = addOldest(s1, p1, s2, p2, n[b + S2], n[b + P2]) end
        end
      end
      return mu, mv, s1, p1, s2, p2
    end

    -- Points n's child `side` at the subtree `c` (0 for none) and keeps that subtree's summary
    -- there. n is written only if that changed anything: a change deep down that leaves a
    -- subtree's summary as it was stops there.
    function Tree:attach(n, side, c)
      local mu, mv, s1, p1, s2, p2 = 0, 0, 0, '', 0, ''
      if c ~= 0 then mu, mv, s1, p1, s2, p2 = self:whole(self:node(c)) end
      local b = SIDE[side]
      if n[side] ~= c or n[b + MU] ~= mu or n[b + MV] ~= mv or n[b + S1] ~= s1 or n[b + P1] ~= p1 or n[b + S2] ~= s2 or n[b + P2] ~= p2 then
        n[side], n[b + MU], n[b + MV], n[b + S1], n[b + P1], n[b + S2], n[b + P2] = c, mu, mv, s1, p1, s2, p2
        self.dirty[n[SEQ]] = n
      end
    end

    local function before(a, b) return a[X] < b[X] or (a[X] == b[X] and a[SEQ] < b[SEQ]) end

    -- Splits the subtree at `seq` into the nodes before `key` and the rest: two subtree roots.
    function Tree:split(seq, key)
      if seq == 0 then return 0, 0 end
      local n = self:node(seq)
      if before(n, key) then
        local a, b = self:split(n[R], key)
        self:attach(n, R, a)
        return seq, b
      end
      local a, b = self:split(n[L], key)
      self:attach(n, L, b)
      return a, seq
    end

    -- Joins two subtrees, every node of `a` before every node of `b`.
    function Tree:merge(a, b)
      if a == 0 then return b end
      if b == 0 then return a end
      local na, nb = self:node(a), self:node(b)
      if na[PR] >= nb[PR] then
        self:attach(na, R, self:merge(na[R], b))
        return a
      end
      self:attach(nb, L, self:merge(a, nb[L]))
      return b
    end

    function Tree:insertAt(seq, n)
      if seq == 0 then return n[SEQ] end
      local at = self:node(seq)
      if n[PR] > at[PR] then
        local a, b = self:split(seq, n)
        self:attach(n, L, a)
        self:attach(n, R, b)
        return n[SEQ]
      end
      if before(n, at) then self:attach(at, L, self:insertAt(at[L], n)) else self:attach(at, R, self:insertAt(at[R], n)) end
      return seq
    end

    function Tree:removeAt(seq, key)
      if seq == 0 then return 0, false end
      local at = self:node(seq)
      if at[SEQ] == key[SEQ] then
        self.gone[seq], self.dirty[seq], self.nodes[seq] = true, nil, nil
        return self:merge(at[L], at[R]), true
      end
      local side = before(key, at) and L or R
      local child, removed = self:removeAt(at[side], key)
      if removed then self:attach(at, side, child) end
      return seq, removed
    end

    --[[
      Node priorities: murmur3's 32-bit finaliser (a bijection that scatters neighbouring
      inputs) of the sequence mixed with a 32-bit key taken once from the tree's salt. A SHA-1
      per node cost a build at 100k tickets about 0.4 s; this is bit operations and exact
      double arithmetic (Redis's Lua has LuaBitOp as `bit`).
    ]]
    local TWO32 = 4294967296
    local function mul32(a, b) -- a * b mod 2^32, a and b below 2^32: every partial product below 2^53
      return ((a % 65536) * b + (math.floor(a / 65536) * b % 65536) * 65536) % TWO32
    end
    local function mix32(h)
      h = bit.bxor(h, bit.rshift(h, 16)) % TWO32
      h = mul32(h, 0x85ebca6b)
      h = bit.bxor(h, bit.rshift(h, 13)) % TWO32
      h = mul32(h, 0xc2b2ae35)
      return bit.bxor(h, bit.rshift(h, 16)) % TWO32
    end
    local function scatterKey(salt)
      return tonumber(string.sub(redis.sha1hex(salt), 1, 8), 16)
    end
    local function priority(scatter, seq)
      local h = mix32(bit.bxor(seq % TWO32, scatter) % TWO32)
      local high = math.floor(seq / TWO32)
      if high > 0 then h = mix32(bit.bxor(h, high) % TWO32) end
      return h
    end

    local function newNode(scatter, rating, createdAt, player, id, seq)
      return { rating, createdAt, player, id, seq, priority(scatter, seq), 0, 0, 0, 0, 0, '', 0, '', 0, 0, 0, '', 0, '' }
    end

    -- Writes the changed nodes and the meta field.
    function Tree:flush()
      local meta = cmsgpack.pack({ self.root, self.size, self.salt, self.widen, self.always and 1 or 0, self.newest, RatingTree.LAYOUT })
      local args, n = { 'm', meta }, 2
      for seq, node in pairs(self.dirty) do
        args[n + 1], args[n + 2], n = int(seq), cmsgpack.pack(node), n + 2
        if n >= 400 then
          redis.call('HSET', self.key, unpack(args))
          args, n = {}, 0
        end
      end
      if n > 0 then redis.call('HSET', self.key, unpack(args)) end
      local gone, g = {}, 0
      for seq in pairs(self.gone) do
        g = g + 1
        gone[g] = int(seq)
        if g >= 200 then redis.call('HDEL', self.key, unpack(gone)); gone, g = {}, 0 end
      end
      if g > 0 then redis.call('HDEL', self.key, unpack(gone)) end
      self.dirty, self.gone = {}, {}
    end

    -- A new waiting ticket (its rating and createdAt as numbers).
    function Tree:insert(rating, createdAt, player, id, seq)
      self.scatter = self.scatter or scatterKey(self.salt)
      local n = newNode(self.scatter, rating, createdAt, player, id, seq)
      self.nodes[seq], self.dirty[seq] = n, n
      self.root = self:insertAt(self.root, n)
      self.size = self.size + 1
      if seq > self.newest then self.newest = seq end
      self:flush()
    end

    -- A ticket that left the queue; false when the tree did not hold it.
    function Tree:remove(rating, seq)
      local removed
      self.root, removed = self:removeAt(self.root, { [X] = rating, [SEQ] = seq })
      if removed then self.size = self.size - 1 end
      self:flush()
      return removed
    end

    function Tree:drop()
      redis.call('DEL', self.key)
      opened[self.key] = false
    end

    --[[
      Builds the queue's tree from its waiting tickets, `entries` in rating order: { id, rating
      (number), createdAt (number), player, seq } each. O(n) (plus sorting runs of equal ratings
      by sequence): the classic stack construction of a treap from sorted keys. `always` is for
      tests (see the hash above).
    ]]
    local function build(scope, queue, widen, salt, entries, always)
      local key = treeKey(scope, queue)
      redis.call('DEL', key)
      local tree = newTree(key, 0, #entries, salt, widen, always)
      local nodes, scatter = {}, scatterKey(salt)
      tree.scatter = scatter
      for i, e in ipairs(entries) do
        nodes[i] = newNode(scatter, e[2], e[3], e[4], e[1], e[5])
        if e[5] > tree.newest then tree.newest = e[5] end
      end
      -- Runs of one rating come in ID order from qr: put them in sequence order (sorting the
      -- numbers, not the nodes by a Lua comparator: a run of 50k took that 0.3 s).
      local i = 1
      while i <= #nodes do
        local j = i
        while j < #nodes and nodes[j + 1][X] == nodes[i][X] do j = j + 1 end
        if j > i then
          local seqs, bySeq = {}, {}
          for k = i, j do
            seqs[k - i + 1] = nodes[k][SEQ]
            bySeq[nodes[k][SEQ]] = nodes[k]
          end
          table.sort(seqs)
          for k = i, j do nodes[k] = bySeq[seqs[k - i + 1]] end
        end
        i = j + 1
      end
      local stack = {}
      for _, n in ipairs(nodes) do
        tree.nodes[n[SEQ]] = n
        local last = 0
        while #stack > 0 and stack[#stack][PR] < n[PR] do
          last = stack[#stack][SEQ]
          stack[#stack] = nil
        end
        n[L] = last
        if #stack > 0 then stack[#stack][R] = n[SEQ] end
        stack[#stack + 1] = n
      end
      if #stack > 0 then tree.root = stack[1][SEQ] end
      local function summarizeAll(seq)
        if seq == 0 then return end
        local n = tree.nodes[seq]
        summarizeAll(n[L])
        summarizeAll(n[R])
        tree:attach(n, L, n[L])
        tree:attach(n, R, n[R])
        tree.dirty[seq] = n
      end
      summarizeAll(tree.root)
      tree:flush()
      opened[key] = tree
      return tree
    end

    --[[
      Queries. `fits(node)` is the exact compatibility test of a node's ticket (any player);
      the bounds are the joiner's reach bounds (pairing.lua), widened for rounding, so that a
      summary prunes only subtrees where nothing fits.
    ]]
    function Tree:ticketOf(n) return n[ID] end

    --[[
      The farthest fitting ticket on one side of the joiner, within [low, high] (the joiner's
      rating is `low` above it, `high` below): the last node of the range (the first, below)
      whose reach score (MU above, MV below) meets `bound` and that fits. `least` is the least
      such score in the subtree at `seq`: a subtree where it misses the bound is never read.
      O(log n): only subtrees along the range's two edges are entered without holding such a node.
    ]]
    local function farthest(tree, seq, least, low, high, bound, fits, score, far, near)
      while seq ~= 0 and least <= bound do
        local n = tree:node(seq)
        if n[X] > high then
          seq, least = n[L], n[SIDE[L] + score]
        elseif n[X] < low then
          seq, least = n[R], n[SIDE[R] + score]
        else
          local found = farthest(tree, n[far], n[SIDE[far] + score], low, high, bound, fits, score, far, near)
          if found then return found end
          if fits(n) then return n end
          seq, least = n[near], n[SIDE[near] + score]
        end
      end
      return nil
    end

    -- farthest from the root, whose least score no parent keeps: the root's whole summary.
    local function farthestFromRoot(tree, low, high, bound, fits, score, far, near)
      local root = tree:node(tree.root)
      if not root then return nil end
      local mu, mv = tree:whole(root)
      return farthest(tree, tree.root, score == MU and mu or mv, low, high, bound, fits, score, far, near)
    end

    function Tree:farAbove(low, high, upBound, fits) return farthestFromRoot(self, low, high, upBound, fits, MU, R, L) end
    function Tree:farBelow(low, high, downBound, fits) return farthestFromRoot(self, low, high, downBound, fits, MV, L, R) end

    -- The node of the oldest ticket of a player other than `player` whose rating is in [low,
    -- high], or nil: two paths down, each taking whole subtrees by their summaries (kept in
    -- their parents: those subtrees are not read).
    function Tree:oldestIn(low, high, player)
      local best = nil
      local function take(n)
        if n[PL] ~= player and (best == nil or n[SEQ] < best) then best = n[SEQ] end
      end
      local function takeSide(n, side) -- the whole subtree of n's child `side`, by its summary
        if n[side] == 0 then return end
        local b = SIDE[side]
        local s = n[b + S1]
        if n[b + P1] == player then s = n[b + S2] end
        if s ~= 0 and (best == nil or s < best) then best = s end
      end
      local seq = self.root
      while seq ~= 0 do
        local n = self:node(seq)
        if n[X] < low then seq = n[R] elseif n[X] > high then seq = n[L] else break end
      end
      if seq == 0 then return nil end
      local top = self:node(seq)
      take(top)
      seq = top[L]
      while seq ~= 0 do
        local n = self:node(seq)
        if n[X] >= low then take(n); takeSide(n, R); seq = n[L] else seq = n[R] end
      end
      seq = top[R]
      while seq ~= 0 do
        local n = self:node(seq)
        if n[X] <= high then take(n); takeSide(n, L); seq = n[R] else seq = n[L] end
      end
      return best and self:node(best) or nil
    end

    function Tree:ratingOf(n) return n[X] end
    function Tree:createdAtOf(n) return n[T] end
    made = { newTree = newTree, build = build }
    return made
  end

  --[[
    Whether `tree` holds exactly the queue's waiting rated tickets, given that it did when it
    was last written: scripts that know no tree (an older version, as in a rolling upgrade)
    change the queue without it. Any such change shows as another number of tickets or, when
    admissions and removals balance, as a waiting ticket newer than the newest the tree ever
    held (sequences only grow), since a ticket missing from the tree can only have been admitted
    after it was last written. O(log n).
  ]]
  function RatingTree.inSync(scope, queue, tree)
    if redis.call('ZCARD', ratingKey(scope, queue)) ~= tree.size then return false end
    if tree.size == 0 then return true end
    local newest = redis.call('ZRANGE', waitingKey(scope, queue), -1, -1, 'WITHSCORES')
    return tonumber(newest[2]) <= tree.newest
  end

  --[[
    The queue's tree, or nil. Every caller in one script run shares one object (and its cache of
    read nodes), and every change is written before the changing call returns. A tree that is
    not in sync (RatingTree.inSync; checked here, before the script changes anything) is dropped:
    then nil, true. A test-mode tree is kept: pairing.lua rebuilds it when it asks it.
  ]]
  function RatingTree.open(scope, queue)
    local key = treeKey(scope, queue)
    local tree = opened[key]
    if tree == nil then
      local blob = redis.call('HGET', key, 'm')
      tree = false
      if blob then
        local m = cmsgpack.unpack(blob)
        tree = methods().newTree(key, m[1], m[2], m[3], m[4], m[5] == 1, m[6])
        if m[7] ~= RatingTree.LAYOUT or (not tree.always and not RatingTree.inSync(scope, queue, tree)) then
          tree:drop()
          return nil, true
        end
      end
      opened[key] = tree
    end
    return tree or nil
  end

  --[[
    Builds the queue's tree from its waiting tickets, `entries` in rating order: { id, rating
    (number), createdAt (number), player, seq } each (see build above).
  ]]
  function RatingTree.build(scope, queue, widen, salt, entries, always)
    return methods().build(scope, queue, widen, salt, entries, always)
  end
end
