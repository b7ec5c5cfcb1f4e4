package redisthrottle

import "github.com/redis/go-redis/v9"

// The scripts of the Redis driver. Times are microseconds since the Unix
// epoch on Redis's clock (TIME); doubles hold them exactly. A scope is
// six keys, passed in this order: second buckets (hash: 100 ms → sends),
// minute buckets (hash: second → sends), hour buckets (hash: minute →
// sends), day buckets (hash: 15 min → sends), flights (sorted set:
// reservation id scored by its deadline), and slots (hash: id → slots
// left, for a reservation of more than one, a block of spares; absent:
// one). A script holds a scope's keys as a table k: k.s, k.m, k.h, k.d,
// k.f, k.n. The window rule is the ring buckets': bucket b of width w
// counts while b >= floor((now - span) / w), a window admits an ask of n
// slots while its sends plus its flights' slots plus n stay within a
// non-zero limit, and a flight past its deadline counts as a send per
// slot at its deadline.
//
// A missing key reads as an empty one, so a key deleted or evicted would
// silently forget sends. Every key therefore carries a marker of the
// state's generation: the field "_" of each hash, the member "_<gen>"
// (scored +inf, never a deadline) of each flights set. The state key
// holds the generation (field g) and, per inbox, until when its keys are
// live (field i:<inbox>; they expire after an idle day). A script that
// finds a key of a live scope without its marker records the state as
// incomplete (field lost: the key) and answers {-2, key}; without the
// state key's generation (FLUSHDB, a restart without persistence) it
// answers {-1}. Either way the state is rebuilt from the send record with
// a new generation. An inbox's keys past their registration are stale:
// deleted and begun again with markers when next touched. (A state
// written before the second and the day were kept lacks their keys: it
// reads as incomplete once, and is rebuilt from the send record, which
// holds the day.)

// luaCommon is shared by the scripts: the clock, the markers, counting a
// send, and reading a scope.
const luaCommon = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Lua prints numbers with 14 digits; times need 16.
local function str(x)
  return string.format('%.0f', x)
end

-- keysAt returns the scope whose six keys begin at KEYS[j].
local function keysAt(j)
  return {s = KEYS[j], m = KEYS[j + 1], h = KEYS[j + 2], d = KEYS[j + 3], f = KEYS[j + 4], n = KEYS[j + 5]}
end

-- mark begins scope k's keys afresh in generation gen.
local function mark(k, gen)
  redis.call('DEL', k.s, k.m, k.h, k.d, k.f, k.n)
  for _, key in ipairs({k.s, k.m, k.h, k.d, k.n}) do
    redis.call('HSET', key, '_', gen)
  end
  redis.call('ZADD', k.f, '+inf', '_' .. gen)
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

-- register keeps inbox's keys (scope k) live for ttl ms more: the keys
-- outlive their registration by 10 s, so a live one is never expired.
local function register(st, inbox, ttl, k)
  redis.call('HSET', st, 'i:' .. inbox, str(now + tonumber(ttl) * 1000))
  for _, key in ipairs({k.s, k.m, k.h, k.d, k.f, k.n}) do
    redis.call('PEXPIRE', key, tonumber(ttl) + 10000)
  end
end

-- count counts one send at at (µs) in every window of scope k.
local function count(k, at)
  redis.call('HINCRBY', k.s, str(math.floor(at / 100000)), 1)
  redis.call('HINCRBY', k.m, str(math.floor(at / 1000000)), 1)
  redis.call('HINCRBY', k.h, str(math.floor(at / 60000000)), 1)
  redis.call('HINCRBY', k.d, str(math.floor(at / 900000000)), 1)
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

-- scope reads scope k of generation gen: with reclaim it first counts
-- each slot of the flights past their deadline and removes them, and
-- drops old buckets. It returns the sends of each window {s, m, h, d},
-- the slots in flight, the raw state {second, minute, hour, day, flights,
-- slots}, and the first of its keys found without its marker (nil:
-- none). What it wrote before finding one is of no matter: an incomplete
-- state is rebuilt whole.
local function scope(k, reclaim, gen)
  if reclaim then
    local gone = redis.call('ZRANGEBYSCORE', k.f, '-inf', str(now), 'WITHSCORES')
    local ns = slotsOf(k.n, gone)
    for i = 1, #gone, 2 do
      for _ = 1, ns[(i + 1) / 2] do
        count(k, tonumber(gone[i + 1]))
      end
      redis.call('HDEL', k.n, gone[i])
    end
    if #gone > 0 then
      redis.call('ZREMRANGEBYSCORE', k.f, '-inf', str(now))
    end
  end
  local us, ks, sok = buckets(k.s, math.floor((now - 1000000) / 100000), reclaim, gen)
  local um, km, mok = buckets(k.m, math.floor((now - 60000000) / 1000000), reclaim, gen)
  local uh, kh, hok = buckets(k.h, math.floor((now - 3600000000) / 60000000), reclaim, gen)
  local ud, kd, dok = buckets(k.d, math.floor((now - 86400000000) / 900000000), reclaim, gen)
  local all = redis.call('ZRANGEBYSCORE', k.f, '-inf', '+inf', 'WITHSCORES')
  -- The marker scores +inf: the last member, if there.
  local fok = #all >= 2 and all[#all - 1] == '_' .. gen
  if fok then
    all[#all], all[#all - 1] = nil, nil
  end
  local ns, inflight = slotsOf(k.n, all)
  local bad = nil
  if not sok then
    bad = k.s
  elseif not mok then
    bad = k.m
  elseif not hok then
    bad = k.h
  elseif not dok then
    bad = k.d
  elseif not fok then
    bad = k.f
  elseif redis.call('HGET', k.n, '_') ~= gen then
    bad = k.n
  end
  return {s = us, m = um, h = uh, d = ud}, inflight, {ks, km, kh, kd, all, ns}, bad
end

-- settleOne takes one slot of flight id from scope k: the flight goes
-- when none is left.
local function settleOne(k, id)
  if redis.call('HEXISTS', k.n, id) == 1 and redis.call('HINCRBY', k.n, id, -1) > 0 then
    return
  end
  redis.call('HDEL', k.n, id)
  redis.call('ZREM', k.f, id)
end

-- lacks reports whether a window of the sends u (by window) and inflight
-- slots lacks room for n more under the limits lim {s, m, h, d} (a
-- limit of 0, or none, is no limit).
local function lacks(u, inflight, n, lim)
  for _, w in ipairs({'s', 'm', 'h', 'd'}) do
    local l = tonumber(lim[w]) or 0
    if l > 0 and u[w] + inflight + n > l then
      return true
    end
  end
  return false
end

-- The number of keys of a scope.
local K = 6
`

// reserveScript: KEYS seq, state, the global scope's six keys, then the
// six of each inbox of the batch; ARGV global per-second, per-minute,
// per-hour, per-day, the number of inboxes, each inbox's name and its
// keys' TTL (ms), then per ask: its inbox's index among the inbox scopes
// (0: none), lease (µs), the inbox's per-minute, per-hour, per-day, its
// keys' TTL (ms), its slots. Lost: {-1}; incomplete: {-2, key}. Else
// {now, the global raw state (6 items), each inbox's (6 items each), the
// ids (0 for a refusal)}: the state as read before the first ask.
var reserveScript = redis.NewScript(luaCommon + `
local st = KEYS[2]
local gen, answer = open(st)
if answer then
  return answer
elseif redis.call('EXISTS', KEYS[1]) == 0 then
  return incomplete(st, KEYS[1])
end
local glim = {s = ARGV[1], m = ARGV[2], h = ARGV[3], d = ARGV[4]}
local nin = tonumber(ARGV[5])
local g = keysAt(3)
local function inboxKeys(i)
  return keysAt(3 + i * K)
end
for i = 1, nin do
  local name, ttl = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  if not live(st, name) then
    local k = inboxKeys(i)
    mark(k, gen)
    register(st, name, ttl, k)
  end
end
local gu, gf, graw, bad = scope(g, true, gen)
if bad then
  return incomplete(st, bad)
end
local out = {now}
for _, x in ipairs(graw) do
  out[#out + 1] = x
end
local ins = {}
for i = 1, nin do
  local u, f, raw, bad = scope(inboxKeys(i), true, gen)
  if bad then
    return incomplete(st, bad)
  end
  ins[i] = {u = u, f = f}
  for _, x in ipairs(raw) do
    out[#out + 1] = x
  end
end
local ids = {}
for a = 6 + 2 * nin, #ARGV, 7 do
  local idx, n = tonumber(ARGV[a]), tonumber(ARGV[a + 6])
  local refused = lacks(gu, gf, n, glim)
  local s = ins[idx]
  if s then
    refused = refused or lacks(s.u, s.f, n, {m = ARGV[a + 2], h = ARGV[a + 3], d = ARGV[a + 4]})
  end
  if refused then
    ids[#ids + 1] = 0
  else
    local id = redis.call('INCR', KEYS[1])
    local deadline = str(now + tonumber(ARGV[a + 1]))
    redis.call('ZADD', g.f, deadline, id)
    if n > 1 then
      redis.call('HSET', g.n, id, n)
    end
    gf = gf + n
    if s then
      local k = inboxKeys(idx)
      redis.call('ZADD', k.f, deadline, id)
      if n > 1 then
        redis.call('HSET', k.n, id, n)
      end
      register(st, ARGV[4 + 2 * idx], ARGV[a + 5], k)
      s.f = s.f + n
    end
    ids[#ids + 1] = id
  end
end
out[#out + 1] = ids
return out
`)

// settleScript: KEYS state, the global scope's six keys, then the six of
// each inbox of the batch; ARGV the number of inboxes and each inbox's
// name, then per settlement: id, age (µs), 1 to commit or 0 to release,
// its inbox's index among the inbox scopes (0: none), the inbox keys' TTL
// (ms). Each settles one slot of its flight. A commit counts at now minus
// its age, in every window, whether or not its flight is still there
// (reclaimed, or lost with the state): twice errs on the safe side. A
// state lost or incomplete takes nothing: it is rebuilt from the send
// record, which holds these sends. It does not look for missing keys: one
// it writes to again lacks its marker, and the next admission or read
// finds it so.
var settleScript = redis.NewScript(luaCommon + `
local st = KEYS[1]
local gen, answer = open(st)
if answer then
  return answer
end
local g = keysAt(2)
local function inboxKeys(i)
  return keysAt(2 + i * K)
end
local nin = tonumber(ARGV[1])
for i = 1, nin do
  if not live(st, ARGV[1 + i]) then
    mark(inboxKeys(i), gen)
  end
end
for a = 2 + nin, #ARGV, 5 do
  local id, commit, idx = ARGV[a], ARGV[a + 2] == '1', tonumber(ARGV[a + 3])
  local at = now - math.max(tonumber(ARGV[a + 1]), 0)
  settleOne(g, id)
  if commit then
    count(g, at)
  end
  if idx > 0 then
    local k = inboxKeys(idx)
    settleOne(k, id)
    if commit then
      count(k, at)
    end
    register(st, ARGV[1 + idx], ARGV[a + 4], k)
  end
end
return {1}
`)

// readScript: KEYS state, the global scope's six keys, [the inbox's
// six]; ARGV [the inbox's name]. Lost: {-1}; incomplete: {-2, key}. Else
// {now, global raw (6 items), [inbox raw (6 items)]}. It changes nothing
// but, when it finds a key missing, the record of that.
var readScript = redis.NewScript(luaCommon + `
local st = KEYS[1]
local gen, answer = open(st)
if answer then
  return answer
end
local out = {now}
local _, _, raw, bad = scope(keysAt(2), false, gen)
if bad then
  return incomplete(st, bad)
end
for _, x in ipairs(raw) do
  out[#out + 1] = x
end
if #KEYS > 1 + K then
  if live(st, ARGV[1]) then
    _, _, raw, bad = scope(keysAt(2 + K), false, gen)
    if bad then
      return incomplete(st, bad)
    end
  else
    raw = {{}, {}, {}, {}, {}, {}}
  end
  for _, x in ipairs(raw) do
    out[#out + 1] = x
  end
end
return out
`)

// restoreScript: KEYS seq, state, the global scope's six keys, then the
// six of each inbox of the record; ARGV the new generation, the inbox
// keys' TTL (ms), the number of inboxes and each inbox's name, the number
// of sends, then per send its inbox's index (0: none) and time (µs), then
// per pending send its inbox's index and deadline (µs). Only while the
// state is lost or incomplete: 1 if it wrote it, 0 if another server had.
// It begins the global keys and the record's inboxes' afresh in the new
// generation (the other inboxes' keys are stale from now on), counts each
// send in every window, and keeps the reservation ids growing: a commit
// for a reservation of the state that was lost must not take a slot of a
// new one.
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
local g = keysAt(3)
local function inboxKeys(i)
  return keysAt(3 + i * K)
end
mark(g, gen)
for i = 1, nin do
  local k = inboxKeys(i)
  mark(k, gen)
  register(st, ARGV[3 + i], ttl, k)
end
local a0 = 5 + nin
local n = tonumber(ARGV[a0 - 1])
for a = a0, a0 + 2 * n - 1, 2 do
  local idx, at = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  count(g, at)
  if idx > 0 then
    count(inboxKeys(idx), at)
  end
end
for a = a0 + 2 * n, #ARGV, 2 do
  local idx, deadline = tonumber(ARGV[a]), ARGV[a + 1]
  local id = redis.call('INCR', KEYS[1])
  redis.call('ZADD', g.f, deadline, id)
  if idx > 0 then
    redis.call('ZADD', inboxKeys(idx).f, deadline, id)
  end
end
return 1
`)
