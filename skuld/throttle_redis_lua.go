package skuld

import "github.com/redis/go-redis/v9"

// The scripts of RedisThrottle. Times are microseconds since the Unix epoch
// on Redis's clock (TIME) plus ARGV[1], the tests' offset; doubles hold
// them exactly. A scope is three keys: minute buckets (hash: second →
// sends), hour buckets (hash: minute → sends), reservations (sorted set:
// id scored by deadline). A bucket counts until all of it has left the
// window, as in the in-memory limiter: bucket b of width w counts while
// b >= floor((now - span) / w).

// luaScope is shared by the scripts: now, counting a send, and reading a
// scope (reclaiming expired reservations and dropping old buckets first).
const luaScope = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1])
-- Lua prints numbers with 14 digits; times need 16.
local function str(x)
  return string.format('%.0f', x)
end

local function count(m, h, at)
  redis.call('HINCRBY', m, str(math.floor(at / 1000000)), 1)
  redis.call('HINCRBY', h, str(math.floor(at / 60000000)), 1)
end

-- buckets returns the sends counted in key's buckets from lo on, those
-- buckets (flat), and the oldest of them (-1 if none).
local function buckets(key, lo)
  local kv = redis.call('HGETALL', key)
  local n, keep, oldest = 0, {}, -1
  for i = 1, #kv, 2 do
    local b = tonumber(kv[i])
    if b < lo then
      redis.call('HDEL', key, kv[i])
    else
      n = n + tonumber(kv[i + 1])
      keep[#keep + 1] = kv[i]
      keep[#keep + 1] = kv[i + 1]
      if oldest < 0 or b < oldest then
        oldest = b
      end
    end
  end
  return n, keep, oldest
end

-- scope returns the minute and hour counts (in flight included), the raw
-- state (minute buckets, hour buckets, reservations with scores) and the
-- summary of an admission: {minute sends, hour sends, oldest minute
-- bucket, oldest hour bucket, in flight}.
local function scope(m, h, r)
  local gone = redis.call('ZRANGEBYSCORE', r, '-inf', str(now), 'WITHSCORES')
  for i = 1, #gone, 2 do
    count(m, h, tonumber(gone[i + 1]))
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', r, '-inf', str(now))
  end
  local um, km, om = buckets(m, math.floor((now - 60000000) / 1000000))
  local uh, kh, oh = buckets(h, math.floor((now - 3600000000) / 60000000))
  local flights = redis.call('ZRANGE', r, 0, -1, 'WITHSCORES')
  local inflight = #flights / 2
  return um + inflight, uh + inflight, {km, kh, flights}, {um, uh, om, oh, inflight}
end

local function full(n, limit)
  limit = tonumber(limit)
  return limit > 0 and n >= limit
end
`

// luaVersion reads the version of the inboxes (KEYS[2]), setting it to
// candidate if missing: after Redis lost its data, no copy of an inbox read
// before matches.
const luaVersion = `
local function version(candidate)
  local v = redis.call('GET', KEYS[2])
  if not v then
    v = candidate
    redis.call('SET', KEYS[2], v)
  end
  return v
end
`

// versionScript: KEYS seq, version; ARGV a fresh version to set if there
// is none. The version of the inboxes.
var versionScript = redis.NewScript(luaVersion + `return version(ARGV[1])`)

// reserveScript: KEYS seq, version, global m h r, [inbox m h r]; ARGV
// offset, lease (µs, margin included), global per-minute, per-hour, inbox
// per-minute, per-hour, inbox key TTL (ms), the version the inbox was read
// at ("": read just now), a fresh version. Stale inbox: {2}. Admitted: {1, now, id, global
// summary, [inbox summary]} (in flight includes this send). Refused:
// {0, now, global m, h, r, [inbox m, h, r]}, the raw state for Retry-After.
var reserveScript = redis.NewScript(luaScope + luaVersion + `
if ARGV[8] ~= '' and version(ARGV[9]) ~= ARGV[8] then
  return {2}
end
local gm, gh, graw, gsum = scope(KEYS[3], KEYS[4], KEYS[5])
local refused = full(gm, ARGV[3]) or full(gh, ARGV[4])
local iraw, isum
if #KEYS == 8 then
  local im, ih
  im, ih, iraw, isum = scope(KEYS[6], KEYS[7], KEYS[8])
  refused = refused or full(im, ARGV[5]) or full(ih, ARGV[6])
end
if refused then
  local out = {0, now, graw[1], graw[2], graw[3]}
  if iraw then
    out[6], out[7], out[8] = iraw[1], iraw[2], iraw[3]
  end
  return out
end
local id = redis.call('INCR', KEYS[1])
local deadline = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[5], str(deadline), id)
if #KEYS == 8 then
  redis.call('ZADD', KEYS[8], str(deadline), id)
  for i = 6, 8 do
    redis.call('PEXPIRE', KEYS[i], ARGV[7])
  end
end
gsum[5] = gsum[5] + 1
local out = {1, now, id, gsum}
if isum then
  isum[5] = isum[5] + 1
  out[5] = isum
end
return out
`)

// stateScript: KEYS m h r of one or two scopes; ARGV offset.
// {now, m, h, r, [m, h, r]}.
var stateScript = redis.NewScript(luaScope + `
local out = {now}
for i = 1, #KEYS, 3 do
  local _, _, raw = scope(KEYS[i], KEYS[i + 1], KEYS[i + 2])
  out[#out + 1], out[#out + 2], out[#out + 3] = raw[1], raw[2], raw[3]
end
return out
`)

// settleScript: KEYS global m h r, then m h r of each inbox in the batch;
// ARGV offset, inbox key TTL (ms), then per commit or release: id, age
// (µs), 1 to commit or 0 to release, index in KEYS of its inbox's first key
// (0: none). A commit counts at now minus its age in every scope it is
// still in flight in; one reclaimed after its lease was counted then.
var settleScript = redis.NewScript(luaScope + `
for i = 3, #ARGV, 4 do
  local id, commit, ik = ARGV[i], ARGV[i + 2] == '1', tonumber(ARGV[i + 3])
  local at = now - math.max(tonumber(ARGV[i + 1]), 0)
  if redis.call('ZREM', KEYS[3], id) == 1 and commit then
    count(KEYS[1], KEYS[2], at)
  end
  if ik > 0 then
    if redis.call('ZREM', KEYS[ik + 2], id) == 1 and commit then
      count(KEYS[ik], KEYS[ik + 1], at)
    end
    for k = ik, ik + 2 do
      redis.call('PEXPIRE', KEYS[k], ARGV[2])
    end
  end
end
return 1
`)
