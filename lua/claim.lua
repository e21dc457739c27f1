-- claim.lua — hand out due jobs for delivery, atomically enforcing, fleet-wide:
-- pause, the backpressure hold, the single probe, concurrency and the sliding
-- rate-limit window. Runs bounded housekeeping (lib.lua maintain) first.
--
-- KEYS: the queue keys of lib.lua.
-- ARGV[1..17]: queue parameters (lib.lua).
-- ARGV[18]: max, the most jobs this caller can take now (its free local slots).
--           0: housekeeping only (a caller whose slots are all busy); the
--           reply is BUSY with the time the housekeeping is next needed.
-- ARGV[19]: token prefix, unique per call (from Go); job i's lease token is prefix..":"..i.
-- Returns {word, wake_ms, jobs...}:
--   wake_ms: milliseconds (Redis clock) until this queue next needs a claim
--            (a job falls due, the hold releases, a lease or lifetime ends, the
--            rate window frees a slot), or -1 when only a wake-up message can
--            change anything.
--   word: CLAIMED (jobs follow), EMPTY (nothing due), PAUSED, HELD (hold not yet
--         released), PROBING (the probe is in flight; nothing else may go),
--         BUSY (concurrency reached), RATE (rate window full).
--   jobs: per job 7 values: id, attempt (1-based, current), deferCount,
--         createdAt ms, lease token, probe ("1"|"0"), raw payload.
local max = tonumber(ARGV[ARG0 + 1])
local prefix = ARGV[ARG0 + 2]
local now = now_ms()
local wake = maintain(now)

local function earlier(t)
  if t and (wake == nil or t < wake) then wake = t end
end
local function reply(word)
  if wake == nil then return { word, -1 } end
  local w = wake - now
  if w < 0 then w = 0 end
  return { word, w }
end

-- No free slot: only the housekeeping above was wanted, so that lifetimes,
-- retention purges and expired leases are handled on time even while every
-- slot of the caller is busy. Its own freed slot wakes it for the rest.
if max <= 0 then return reply('BUSY') end

local st = redis.call('HMGET', K_STATE, 'paused', 'hold', 'hold_until', 'probe_job')
if st[1] == '1' then return reply('PAUSED') end

local probing = false
if st[2] == '1' then
  local until_ms = tonumber(st[3] or '0')
  if now < until_ms then
    earlier(until_ms)
    return reply('HELD')
  end
  local probe = st[4]
  if probe and probe ~= '' then
    local lease = redis.call('ZSCORE', K_INFLIGHT, probe)
    if lease then
      return reply('PROBING')
    end
    -- The probe left the in-flight set without an outcome that cleared it.
    set_probe('')
  end
  probing = true
  max = 1
end

local busy = redis.call('ZCARD', K_INFLIGHT)
local free = P.concurrency - busy
if free <= 0 then return reply('BUSY') end
if max > free then max = free end

if P.rate_max > 0 then
  redis.call('ZREMRANGEBYSCORE', K_STARTS, '-inf', now - P.rate_window)
  local used = redis.call('ZCARD', K_STARTS)
  if used >= P.rate_max then
    local oldest = redis.call('ZRANGE', K_STARTS, 0, 0, 'WITHSCORES')
    earlier(tonumber(oldest[2]) + P.rate_window + 1)
    return reply('RATE')
  end
  if max > P.rate_max - used then max = P.rate_max - used end
end

local due = redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
if #due == 0 then
  local first = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
  if first[2] then earlier(tonumber(first[2])) end
  return reply('EMPTY')
end

local ids, scores = {}, {}
for i = 1, #due, 2 do
  ids[#ids + 1] = due[i]
  scores[#scores + 1] = tonumber(due[i + 1])
end
redis.call('ZREM', K_WAITING, unpack(ids))
redis.call('ZREM', K_LIFETIMES, unpack(ids))
local recs = redis.call('HMGET', K_JOBS, unpack(ids))

local out = { 'CLAIMED', 0 }
local hset, inflight, starts = {}, {}, {}
local was_pending = 0
for i, id in ipairs(ids) do
  local rec = recs[i]
  if rec then
    local m, payload = split_record(rec)
    if m.st == 'p' then was_pending = was_pending + 1 end
    if m.x <= now then
      to_dead(id, m, payload, now, 'lifetime_exceeded')
    else
      local token = prefix .. ':' .. i
      m.st = 'f'
      m.t = token
      m.o = scores[i]
      if probing then m.pr = 1 else m.pr = nil end
      hset[#hset + 1] = id
      hset[#hset + 1] = encode_meta(m) .. '\n' .. payload
      inflight[#inflight + 1] = now + P.lease
      inflight[#inflight + 1] = id
      starts[#starts + 1] = now
      starts[#starts + 1] = token
      local n = #out
      out[n + 1] = id
      out[n + 2] = m.a + 1
      out[n + 3] = m.d
      out[n + 4] = m.c
      out[n + 5] = token
      out[n + 6] = probing and '1' or '0'
      out[n + 7] = payload
      if probing then
        set_probe(id)
      end
    end
  end
end
if was_pending > 0 then redis.call('HINCRBY', K_STATE, 'n_pending', -was_pending) end
if #hset == 0 then
  earlier(now) -- every job taken had outlived its lifetime: look again now
  return reply('EMPTY')
end
redis.call('HSET', K_JOBS, unpack(hset))
redis.call('ZADD', K_INFLIGHT, unpack(inflight))
if P.rate_max > 0 then redis.call('ZADD', K_STARTS, unpack(starts)) end
earlier(now + P.lease)
local r = reply('CLAIMED')
out[2] = r[2]
return out
