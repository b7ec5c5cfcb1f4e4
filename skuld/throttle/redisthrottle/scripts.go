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
// deadline counts as a send per slot at its deadline. The key present
// marks the state as there: without it (FLUSHDB, a restart without
// persistence) every script answers {-1} and the state is rebuilt from
// the send record.

// luaCommon is shared by the scripts: the clock, counting a send, and
// reading a scope.
const luaCommon = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Lua prints numbers with 14 digits; times need 16.
local function str(x)
  return string.format('%.0f', x)
end

local function count(m, h, at)
  redis.call('HINCRBY', m, str(math.floor(at / 1000000)), 1)
  redis.call('HINCRBY', h, str(math.floor(at / 60000000)), 1)
end

-- buckets returns the sends counted in key's buckets from lo on, and those
-- buckets (flat); with prune it deletes the older ones.
local function buckets(key, lo, prune)
  local kv = redis.call('HGETALL', key)
  local n, keep = 0, {}
  for i = 1, #kv, 2 do
    if tonumber(kv[i]) < lo then
      if prune then
        redis.call('HDEL', key, kv[i])
      end
    else
      n = n + tonumber(kv[i + 1])
      keep[#keep + 1] = kv[i]
      keep[#keep + 1] = kv[i + 1]
    end
  end
  return n, keep
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

-- scope reads the scope of keys m, h, f, n: with reclaim it first counts
-- each slot of the flights past their deadline and removes them, and drops
-- old buckets. It returns the minute and hour sends, the slots in flight,
-- and the raw state {minute, hour, flights, slots}.
local function scope(m, h, f, n, reclaim)
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
  local um, km = buckets(m, math.floor((now - 60000000) / 1000000), reclaim)
  local uh, kh = buckets(h, math.floor((now - 3600000000) / 60000000), reclaim)
  local flights = redis.call('ZRANGE', f, 0, -1, 'WITHSCORES')
  local ns, inflight = slotsOf(n, flights)
  return um, uh, inflight, {km, kh, flights, ns}
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

// reserveScript: KEYS seq, present, global m h f n, then m h f n of each
// inbox of the batch; ARGV global per-minute, per-hour, then per ask: its
// inbox's index among the inbox quadruples (0: none), lease (µs), the
// inbox's per-minute, per-hour, its keys' TTL (ms), its slots. Lost: {-1}.
// Else {now, the global raw state (4 items), each inbox's (4 items each),
// the ids (0 for a refusal)}: the state as read before the first ask.
var reserveScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {-1}
end
local gm, gh, gf, graw = scope(KEYS[3], KEYS[4], KEYS[5], KEYS[6], true)
local out = {now, graw[1], graw[2], graw[3], graw[4]}
local ins = {}
for i = 7, #KEYS, 4 do
  local m, h, f, raw = scope(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], true)
  ins[#ins + 1] = {m = m, h = h, f = f}
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = raw[1], raw[2], raw[3], raw[4]
end
local ids = {}
for a = 3, #ARGV, 6 do
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
      for x = j, j + 3 do
        redis.call('PEXPIRE', KEYS[x], ARGV[a + 4])
      end
      s.f = s.f + k
    end
    ids[#ids + 1] = id
  end
end
out[#out + 1] = ids
return out
`)

// settleScript: KEYS global m h f n, then m h f n of each inbox of the
// batch; ARGV per settlement: id, age (µs), 1 to commit or 0 to release,
// its inbox's index among the quadruples (0: none), the inbox keys' TTL
// (ms). Each settles one slot of its flight. A commit counts at now minus
// its age whether or not its flight is still there (reclaimed, or lost
// with the state): twice errs on the safe side.
var settleScript = redis.NewScript(luaCommon + `
for a = 1, #ARGV, 5 do
  local id, commit, idx = ARGV[a], ARGV[a + 2] == '1', tonumber(ARGV[a + 3])
  local at = now - math.max(tonumber(ARGV[a + 1]), 0)
  settleOne(KEYS[3], KEYS[4], id)
  if commit then
    count(KEYS[1], KEYS[2], at)
  end
  if idx > 0 then
    local j = 5 + (idx - 1) * 4
    settleOne(KEYS[j + 2], KEYS[j + 3], id)
    if commit then
      count(KEYS[j], KEYS[j + 1], at)
    end
    for x = j, j + 3 do
      redis.call('PEXPIRE', KEYS[x], ARGV[a + 4])
    end
  end
end
return 1
`)

// readScript: KEYS present, global m h f n, [inbox m h f n]. Lost: {-1}.
// Else {now, global raw (4 items), [inbox raw (4 items)]}. It changes
// nothing.
var readScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1}
end
local out = {now}
for i = 2, #KEYS, 4 do
  local _, _, _, raw = scope(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], false)
  out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = raw[1], raw[2], raw[3], raw[4]
end
return out
`)

// restoreScript: KEYS seq, present, global m h f n, then m h f n of each
// inbox of the record; ARGV the inbox keys' TTL (ms), the number of sends,
// then per send its inbox's index (0: none) and time (µs), then per
// pending send its inbox's index and deadline (µs). Only while the state
// is lost: 1 if it wrote it, 0 if another server had. Slots left over from
// the state that was lost are dropped: the ids start again.
var restoreScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
for i = 6, #KEYS, 4 do
  redis.call('DEL', KEYS[i])
end
local n = tonumber(ARGV[2])
for a = 3, 2 + 2 * n, 2 do
  local idx, at = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  count(KEYS[3], KEYS[4], at)
  if idx > 0 then
    local j = 7 + (idx - 1) * 4
    count(KEYS[j], KEYS[j + 1], at)
  end
end
for a = 3 + 2 * n, #ARGV, 2 do
  local idx, deadline = tonumber(ARGV[a]), ARGV[a + 1]
  local id = redis.call('INCR', KEYS[1])
  redis.call('ZADD', KEYS[5], deadline, id)
  if idx > 0 then
    redis.call('ZADD', KEYS[7 + (idx - 1) * 4 + 2], deadline, id)
  end
end
for x = 7, #KEYS do
  redis.call('PEXPIRE', KEYS[x], ARGV[1])
end
redis.call('SET', KEYS[2], '1')
return 1
`)
