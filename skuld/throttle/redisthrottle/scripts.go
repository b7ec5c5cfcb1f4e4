package redisthrottle

import "github.com/redis/go-redis/v9"

// The scripts of the Redis driver. Times are microseconds since the Unix
// epoch on Redis's clock (TIME); doubles hold them exactly. A scope is
// four keys: minute buckets (hash: second → sends), hour buckets (hash:
// minute → sends), flights (sorted set: reservation id scored by its
// deadline), and slots (hash: id → slots left, for a reservation of more
// than one, a block of spares; absent: one). The window rule is the ring
// buckets': bucket b of width w counts while b >= floor((now - span) / w),
// a window admits an ask of n slots while its sends plus its flights'
// slots plus n stay within a non-zero limit, and a flight past its
// deadline counts as a send per slot at its deadline.
//
// A missing key reads as an empty one, so a key deleted or evicted would
// silently forget sends. Every key therefore carries a marker of the
// state's generation: the field "_" of each hash, the member "_<gen>"
// (scored +inf, never a deadline) of each flights set. The state key
// holds the generation (field g) and, per inbox, until when its keys are
// live (field i:<inbox>; they expire after an idle hour). A script that
// finds a key of a live scope without its marker records the state as
// incomplete (field lost: the key) and answers {-2, key}; without the
// state key's generation (FLUSHDB, a restart without persistence) it
// answers {-1}. Either way the state is rebuilt from the send record with
// a new generation. An inbox's keys past their registration are stale:
// deleted and begun again with markers when next touched.

// luaCommon is shared by the scripts: the clock, the markers, counting a
// send, and reading a scope.
const luaCommon = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Lua prints numbers with 14 digits; times need 16.
local function str(x)
  return string.format('%.0f', x)
end

-- mark begins a scope's keys m, h, f, n afresh in generation gen.
local function mark(m, h, f, n, gen)
  redis.call('DEL', m, h, f, n)
  for _, k in ipairs({m, h, n}) do
    redis.call('HSET', k, '_', gen)
  end
  redis.call('ZADD', f, '+inf', '_' .. gen)
end

-- open reads the state key st: its generation, or the answer for a state
-- lost ({-1}) or incomplete ({-2, key}).
local function open(st)
  local gen, lost = unpack(redis.call('HMGET', st, 'g', 'lost'))
  if not gen then
    return nil, {-1}
  elseif lost then
    return nil, {-2, lost}
  end
  return gen, nil
end

-- incomplete records in the state key st that key was found without its
-- marker, and answers so.
local function incomplete(st, key)
  redis.call('HSET', st, 'lost', key)
  return {-2, key}
end

-- live reports whether inbox's keys are registered in st as live.
local function live(st, inbox)
  local until_ = tonumber(redis.call('HGET', st, 'i:' .. inbox))
  return until_ ~= nil and until_ > now
end

-- register keeps inbox's keys m, h, f, n live for ttl ms more: the keys
-- outlive their registration by 10 s, so a live one is never expired.
local function register(st, inbox, ttl, m, h, f, n)
  redis.call('HSET', st, 'i:' .. inbox, str(now + tonumber(ttl) * 1000))
  for _, k in ipairs({m, h, f, n}) do
    redis.call('PEXPIRE', k, tonumber(ttl) + 10000)
  end
end

local function count(m, h, at)
  redis.call('HINCRBY', m, str(math.floor(at / 1000000)), 1)
  redis.call('HINCRBY', h, str(math.floor(at / 60000000)), 1)
end

-- buckets returns the sends counted in key's buckets from lo on, those
-- buckets (flat), and whether key has the marker of generation gen; with
-- prune it deletes the older ones.
local function buckets(key, lo, prune, gen)
  local kv = redis.call('HGETALL', key)
  local n, keep, marked = 0, {}, false
  for i = 1, #kv, 2 do
    if kv[i] == '_' then
      marked = kv[i + 1] == gen
    elseif tonumber(kv[i]) < lo then
      if prune then
        redis.call('HDEL', key, kv[i])
      end
    else
      n = n + tonumber(kv[i + 1])
      keep[#keep + 1] = kv[i]
      keep[#keep + 1] = kv[i + 1]
    end
  end
  return n, keep, marked
end

-- slotsOf returns the slots left of each flight in the flat list {id,
-- score, ...}, by the slots hash n, and their sum.
local function slotsOf(n, flights)
  local ns, sum = {}, 0
  if #flights == 0 then
    return ns, 0
  end
  local ids = {}
  for i = 1, #flights, 2 do
    ids[#ids + 1] = flights[i]
  end
  local got = redis.call('HMGET', n, unpack(ids))
  for i = 1, #ids do
    ns[i] = tonumber(got[i]) or 1
    sum = sum + ns[i]
  end
  return ns, sum
end

-- scope reads the scope of keys m, h, f, n of generation gen: with
-- reclaim it first counts each slot of the flights past their deadline and
-- removes them, and drops old buckets. It returns the minute and hour
-- sends, the slots in flight, the raw state {minute, hour, flights,
-- slots}, and the first of its keys found without its marker (nil: none).
-- What it wrote before finding one is of no matter: an incomplete state is
-- rebuilt whole.
local function scope(m, h, f, n, reclaim, gen)
  if reclaim then
    local gone = redis.call('ZRANGEBYSCORE', f, '-inf', str(now), 'WITHSCORES')
    local ns = slotsOf(n, gone)
    for i = 1, #gone, 2 do
      for _ = 1, ns[(i + 1) / 2] do
        count(m, h, tonumber(gone[i + 1]))
      end
      redis.call('HDEL', n, gone[i])
    end
    if #gone > 0 then
      redis.call('ZREMRANGEBYSCORE', f, '-inf', str(now))
    end
  end
  local um, km, mok = buckets(m, math.floor((now - 60000000) / 1000000), reclaim, gen)
  local uh, kh, hok = buckets(h, math.floor((now - 3600000000) / 60000000), reclaim, gen)
  local all = redis.call('ZRANGEBYSCORE', f, '-inf', '+inf', 'WITHSCORES')
  -- The marker scores +inf: the last member, if there.
  local fok = #all >= 2 and all[#all - 1] == '_' .. gen
  if fok then
    all[#all], all[#all - 1] = nil, nil
  end
  local ns, inflight = slotsOf(n, all)
  local bad = nil
  if not mok then
    bad = m
  elseif not hok then
    bad = h
  elseif not fok then
    bad = f
  elseif redis.call('HGET', n, '_') ~= gen then
    bad = n
  end
  return um, uh, inflight, {km, kh, all, ns}, bad
end

-- settleOne takes one slot of flight id from the scope of keys f, n: the
-- flight goes when none is left.
local function settleOne(f, n, id)
  if redis.call('HEXISTS', n, id) == 1 and redis.call('HINCRBY', n, id, -1) > 0 then
    return
  end
  redis.call('HDEL', n, id)
  redis.call('ZREM', f, id)
end

-- lacks reports a window of count sends without room for k more.
local function lacks(count, k, limit)
  limit = tonumber(limit)
  return limit > 0 and count + k > limit
end
`

// reserveScript: KEYS seq, state, global m h f n, then m h f n of each
// inbox of the batch; ARGV global per-minute, per-hour, the number of
// inboxes, each inbox's name and its keys' TTL (ms), then per ask: its
// inbox's index among the inbox quadruples (0: none), lease (µs), the
// inbox's per-minute, per-hour, its keys' TTL (ms), its slots. Lost: {-1};
// incomplete: {-2, key}. Else {now, the global raw state (4 items), each
// inbox's (4 items each), the ids (0 for a refusal)}: the state as read
// before the first ask.
var reserveScript = redis.NewScript(luaCommon + `
local st = KEYS[2]
local gen, answer = open(st)
if answer then
  return answer
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return incomplete(st, KEYS[1])
end
local nin = tonumber(ARGV[3])
for i = 1, nin do
  local j = 7 + (i - 1) * 4
  local name, ttl = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  if not live(st, name) then
    mark(KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3], gen)
    register(st, name, ttl, KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3])
  end
end
local gm, gh, gf, graw, bad = scope(KEYS[3], KEYS[4], KEYS[5], KEYS[6], true, gen)
if bad then
  return incomplete(st, bad)
end
local out = {now, graw[1], graw[2], graw[3], graw[4]}
local ins = {}
for i = 7, #KEYS, 4 do
  local m, h, f, raw, bad = scope(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], true, gen)
  if bad then
    return incomplete(st, bad)
  end
  ins[#ins + 1] = {m = m, h = h, f = f}
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = raw[1], raw[2], raw[3], raw[4]
end
local ids = {}
for a = 4 + 2 * nin, #ARGV, 6 do
  local idx, k = tonumber(ARGV[a]), tonumber(ARGV[a + 5])
  local refused = lacks(gm + gf, k, ARGV[1]) or lacks(gh + gf, k, ARGV[2])
  local s = ins[idx]
  if s then
    refused = refused or lacks(s.m + s.f, k, ARGV[a + 2]) or lacks(s.h + s.f, k, ARGV[a + 3])
  end
  if refused then
    ids[#ids + 1] = 0
  else
    local id = redis.call('INCR', KEYS[1])
    local deadline = str(now + tonumber(ARGV[a + 1]))
    redis.call('ZADD', KEYS[5], deadline, id)
    if k > 1 then
      redis.call('HSET', KEYS[6], id, k)
    end
    gf = gf + k
    if s then
      local j = 7 + (idx - 1) * 4
      redis.call('ZADD', KEYS[j + 2], deadline, id)
      if k > 1 then
        redis.call('HSET', KEYS[j + 3], id, k)
      end
      register(st, ARGV[2 + 2 * idx], ARGV[a + 4], KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3])
      s.f = s.f + k
    end
    ids[#ids + 1] = id
  end
end
out[#out + 1] = ids
return out
`)

// settleScript: KEYS state, global m h f n, then m h f n of each inbox of
// the batch; ARGV the number of inboxes and each inbox's name, then per
// settlement: id, age (µs), 1 to commit or 0 to release, its inbox's index
// among the quadruples (0: none), the inbox keys' TTL (ms). Each settles
// one slot of its flight. A commit counts at now minus its age whether or
// not its flight is still there (reclaimed, or lost with the state): twice
// errs on the safe side. A state lost or incomplete takes nothing: it is
// rebuilt from the send record, which holds these sends. It does not look
// for missing keys: one it writes to again lacks its marker, and the next
// admission or read finds it so.
var settleScript = redis.NewScript(luaCommon + `
local st = KEYS[1]
local gen, answer = open(st)
if answer then
  return answer
end
local nin = tonumber(ARGV[1])
for i = 1, nin do
  local j = 6 + (i - 1) * 4
  if not live(st, ARGV[1 + i]) then
    mark(KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3], gen)
  end
end
for a = 2 + nin, #ARGV, 5 do
  local id, commit, idx = ARGV[a], ARGV[a + 2] == '1', tonumber(ARGV[a + 3])
  local at = now - math.max(tonumber(ARGV[a + 1]), 0)
  settleOne(KEYS[4], KEYS[5], id)
  if commit then
    count(KEYS[2], KEYS[3], at)
  end
  if idx > 0 then
    local j = 6 + (idx - 1) * 4
    settleOne(KEYS[j + 2], KEYS[j + 3], id)
    if commit then
      count(KEYS[j], KEYS[j + 1], at)
    end
    register(st, ARGV[1 + idx], ARGV[a + 4], KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3])
  end
end
return {1}
`)

// readScript: KEYS state, global m h f n, [inbox m h f n]; ARGV [the
// inbox's name]. Lost: {-1}; incomplete: {-2, key}. Else {now, global raw
// (4 items), [inbox raw (4 items)]}. It changes nothing but, when it finds
// a key missing, the record of that.
var readScript = redis.NewScript(luaCommon + `
local st = KEYS[1]
local gen, answer = open(st)
if answer then
  return answer
end
local out = {now}
local _, _, _, raw, bad = scope(KEYS[2], KEYS[3], KEYS[4], KEYS[5], false, gen)
if bad then
  return incomplete(st, bad)
end
out[2], out[3], out[4], out[5] = raw[1], raw[2], raw[3], raw[4]
if #KEYS > 5 then
  if live(st, ARGV[1]) then
    _, _, _, raw, bad = scope(KEYS[6], KEYS[7], KEYS[8], KEYS[9], false, gen)
    if bad then
      return incomplete(st, bad)
    end
  else
    raw = {{}, {}, {}, {}}
  end
  out[6], out[7], out[8], out[9] = raw[1], raw[2], raw[3], raw[4]
end
return out
`)

// restoreScript: KEYS seq, state, global m h f n, then m h f n of each
// inbox of the record; ARGV the new generation, the inbox keys' TTL (ms),
// the number of inboxes and each inbox's name, the number of sends, then
// per send its inbox's index (0: none) and time (µs), then per pending
// send its inbox's index and deadline (µs). Only while the state is lost
// or incomplete: 1 if it wrote it, 0 if another server had. It begins the
// global keys and the record's inboxes' afresh in the new generation (the
// other inboxes' keys are stale from now on), and keeps the reservation
// ids growing: a commit for a reservation of the state that was lost must
// not take a slot of a new one.
var restoreScript = redis.NewScript(luaCommon + `
local st = KEYS[2]
local old, lost = unpack(redis.call('HMGET', st, 'g', 'lost'))
if old and not lost then
  return 0
end
local gen, ttl, nin = ARGV[1], ARGV[2], tonumber(ARGV[3])
redis.call('DEL', st)
redis.call('HSET', st, 'g', gen)
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], str(now))
end
mark(KEYS[3], KEYS[4], KEYS[5], KEYS[6], gen)
for i = 1, nin do
  local j = 7 + (i - 1) * 4
  mark(KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3], gen)
  register(st, ARGV[3 + i], ttl, KEYS[j], KEYS[j + 1], KEYS[j + 2], KEYS[j + 3])
end
local a0 = 5 + nin
local n = tonumber(ARGV[a0 - 1])
for a = a0, a0 + 2 * n - 1, 2 do
  local idx, at = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  count(KEYS[3], KEYS[4], at)
  if idx > 0 then
    local j = 7 + (idx - 1) * 4
    count(KEYS[j], KEYS[j + 1], at)
  end
end
for a = a0 + 2 * n, #ARGV, 2 do
  local idx, deadline = tonumber(ARGV[a]), ARGV[a + 1]
  local id = redis.call('INCR', KEYS[1])
  redis.call('ZADD', KEYS[5], deadline, id)
  if idx > 0 then
    redis.call('ZADD', KEYS[7 + (idx - 1) * 4 + 2], deadline, id)
  end
end
return 1
`)
