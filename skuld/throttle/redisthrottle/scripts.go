package redisthrottle

import "github.com/redis/go-redis/v9"

// The scripts of the Redis driver. Times are microseconds since the Unix
// epoch on Redis's clock (TIME); doubles hold them exactly. A scope is
// three keys: minute buckets (hash: second → sends), hour buckets (hash:
// minute → sends), flights (sorted set: reservation id scored by its
// deadline). The window rule is the ring buckets': bucket b of width w
// counts while b >= floor((now - span) / w), a window is full when its
// sends plus its flights reach a non-zero limit, and a flight past its
// deadline counts as a send at its deadline. The key present marks the
// state as there: without it (FLUSHDB, a restart without persistence)
// every script answers {-1} and the state is rebuilt from the send record.

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

-- scope reads a scope: with reclaim it first counts the flights past their
-- deadline and removes them, and drops old buckets. It returns the minute
-- and hour sends, the flights, and the raw state {minute, hour, flights}.
local function scope(m, h, f, reclaim)
  if reclaim then
    local gone = redis.call('ZRANGEBYSCORE', f, '-inf', str(now), 'WITHSCORES')
    for i = 1, #gone, 2 do
      count(m, h, tonumber(gone[i + 1]))
    end
    if #gone > 0 then
      redis.call('ZREMRANGEBYSCORE', f, '-inf', str(now))
    end
  end
  local um, km = buckets(m, math.floor((now - 60000000) / 1000000), reclaim)
  local uh, kh = buckets(h, math.floor((now - 3600000000) / 60000000), reclaim)
  local flights = redis.call('ZRANGE', f, 0, -1, 'WITHSCORES')
  return um, uh, #flights / 2, {km, kh, flights}
end

local function full(n, limit)
  limit = tonumber(limit)
  return limit > 0 and n >= limit
end
`

// reserveScript: KEYS seq, present, global m h f, then m h f of each
// inbox of the batch; ARGV global per-minute, per-hour, then per ask: its
// inbox's index among the inbox triples (0: none), lease (µs), the inbox's
// per-minute, per-hour, its keys' TTL (ms). Lost: {-1}. Else {now, the
// global raw state (3 items), each inbox's (3 items each), the ids (0 for
// a refusal)}: the state as read before the first ask.
var reserveScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {-1}
end
local gm, gh, gf, graw = scope(KEYS[3], KEYS[4], KEYS[5], true)
local out = {now, graw[1], graw[2], graw[3]}
local ins = {}
for i = 6, #KEYS, 3 do
  local m, h, f, raw = scope(KEYS[i], KEYS[i + 1], KEYS[i + 2], true)
  ins[#ins + 1] = {m = m, h = h, f = f}
  out[#out + 1], out[#out + 2], out[#out + 3] = raw[1], raw[2], raw[3]
end
local ids = {}
for a = 3, #ARGV, 5 do
  local idx = tonumber(ARGV[a])
  local refused = full(gm + gf, ARGV[1]) or full(gh + gf, ARGV[2])
  local s = ins[idx]
  if s then
    refused = refused or full(s.m + s.f, ARGV[a + 2]) or full(s.h + s.f, ARGV[a + 3])
  end
  if refused then
    ids[#ids + 1] = 0
  else
    local id = redis.call('INCR', KEYS[1])
    local deadline = str(now + tonumber(ARGV[a + 1]))
    redis.call('ZADD', KEYS[5], deadline, id)
    gf = gf + 1
    if s then
      local k = 6 + (idx - 1) * 3
      redis.call('ZADD', KEYS[k + 2], deadline, id)
      for j = k, k + 2 do
        redis.call('PEXPIRE', KEYS[j], ARGV[a + 4])
      end
      s.f = s.f + 1
    end
    ids[#ids + 1] = id
  end
end
out[#out + 1] = ids
return out
`)

// settleScript: KEYS global m h f, then m h f of each inbox of the batch;
// ARGV per settlement: id, age (µs), 1 to commit or 0 to release, its
// inbox's index among the triples (0: none), the inbox keys' TTL (ms). A
// commit counts at now minus its age whether or not its flight is still
// there (reclaimed, or lost with the state): twice errs on the safe side.
var settleScript = redis.NewScript(luaCommon + `
for a = 1, #ARGV, 5 do
  local id, commit, idx = ARGV[a], ARGV[a + 2] == '1', tonumber(ARGV[a + 3])
  local at = now - math.max(tonumber(ARGV[a + 1]), 0)
  redis.call('ZREM', KEYS[3], id)
  if commit then
    count(KEYS[1], KEYS[2], at)
  end
  if idx > 0 then
    local k = 4 + (idx - 1) * 3
    redis.call('ZREM', KEYS[k + 2], id)
    if commit then
      count(KEYS[k], KEYS[k + 1], at)
    end
    for j = k, k + 2 do
      redis.call('PEXPIRE', KEYS[j], ARGV[a + 4])
    end
  end
end
return 1
`)

// readScript: KEYS present, global m h f, [inbox m h f]. Lost: {-1}. Else
// {now, global raw (3 items), [inbox raw (3 items)]}. It changes nothing.
var readScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1}
end
local out = {now}
for i = 2, #KEYS, 3 do
  local _, _, _, raw = scope(KEYS[i], KEYS[i + 1], KEYS[i + 2], false)
  out[#out + 1], out[#out + 2], out[#out + 3] = raw[1], raw[2], raw[3]
end
return out
`)

// restoreScript: KEYS seq, present, global m h f, then m h f of each inbox
// of the record; ARGV the inbox keys' TTL (ms), the number of sends, then
// per send its inbox's index (0: none) and time (µs), then per pending
// send its inbox's index and deadline (µs). Only while the state is lost:
// 1 if it wrote it, 0 if another server had.
var restoreScript = redis.NewScript(luaCommon + `
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local n = tonumber(ARGV[2])
for a = 3, 2 + 2 * n, 2 do
  local idx, at = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  count(KEYS[3], KEYS[4], at)
  if idx > 0 then
    local k = 6 + (idx - 1) * 3
    count(KEYS[k], KEYS[k + 1], at)
  end
end
for a = 3 + 2 * n, #ARGV, 2 do
  local idx, deadline = tonumber(ARGV[a]), ARGV[a + 1]
  local id = redis.call('INCR', KEYS[1])
  redis.call('ZADD', KEYS[5], deadline, id)
  if idx > 0 then
    redis.call('ZADD', KEYS[6 + (idx - 1) * 3 + 2], deadline, id)
  end
end
for k = 6, #KEYS do
  redis.call('PEXPIRE', KEYS[k], ARGV[1])
end
redis.call('SET', KEYS[2], '1')
return 1
`)
