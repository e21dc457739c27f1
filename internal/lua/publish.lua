-- publish.lua — store new jobs, atomically per call.
--
-- KEYS: the queue keys of lib.lua.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: n, the number of jobs; then per job 7 values:
--   id, idempotency key ("" for none), delay ms, priority ("0".."9",
--   control.md §2: stored as pri when not 0, and in the job's K_WAITING
--   score, lib.lua wait_score), replace key ("" for none; control.md §3,
--   below), flow key ("" for none: the default lane; keys.md: a keyed job
--   waits in K_LWAIT, lanes.lua), raw payload bytes;
--   then, for each job published with a W3C trace context (none: nothing
--   more), 3 values: the job's index (1..n), its traceparent (canonical, as
--   package tracing writes it) and tracestate ("" for none). Kept at the
--   end so that a publish without traces sends nothing more.
-- A job id already stored (the same call run again by a client retry) is
-- reported as NEW again and nothing is written.
-- At most 1000 jobs per call (unpack's limit; package store splits larger
-- batches). Reads and writes are batched: a handful of commands per call,
-- not per job.
-- Returns {now ms, then one value per job}: "" for a job stored now (its id
-- as sent, createdAt = now, state p, due at now + delay); otherwise
-- "<word>|<id>|<createdAt ms>|<state>" with word
--   NEW: the id was already stored (this call ran before): reported as stored;
--   DUP: the idempotency key names a job still retained: nothing is written;
--   REP: the replace key names a job never delivered (pending, no lease, not
--        replayed): its payload is now this one, its meta (id, place in
--        line, schedule, priority, trace context) unchanged; the publish's
--        idempotency key, if any, names that job from now on.
-- Replace keys (control.md §3): K_IDEM's field REPLACE_FIELD .. key (lib.lua)
-- names the key's latest job, whose record carries rk; an entry whose job
-- was delivered, or died, since is overwritten by the next new job. The
-- idempotency key is checked first. A publish without replace keys pays
-- one string comparison per job.
-- The common answer is one empty string per job, cheap to build and send.
if not conf_load() then return redis.error_reply(NOCONF) end
local now = now_ms()
local n = tonumber(ARGV[ARG0 + 1])
local STRIDE = 7 -- values per job
local ids, keys = {}, {}
for i = 1, n do
  local b = ARG0 + 2 + (i - 1) * STRIDE
  ids[i], keys[i] = ARGV[b], ARGV[b + 1]
end
-- Trace members per job index; a traceparent of another shape is left out
-- rather than written into the record's JSON unchecked.
local traced = {}
for b = ARG0 + 2 + n * STRIDE, #ARGV - 2, 3 do
  local tp = ARGV[b + 1]
  if string.find(tp, '^%x%x%-%x+%-%x+%-%x%x$') then
    traced[tonumber(ARGV[b])] = trace_members(tp, ARGV[b + 2])
  end
end

-- A job id already stored means this very call ran before: the client lost
-- the reply (a dropped connection, a timeout) and sent it again. Job ids are
-- unique per call, so the job is the one stored then, perhaps delivered
-- since: report it as stored and write nothing, or it would be waiting and
-- in flight at once.
local stored = redis.call('HMGET', K_JOBS, unpack(ids))

-- Idempotency keys already known, read in one round.
local keyed = {}
for i = 1, n do
  if keys[i] ~= '' then keyed[#keyed + 1] = keys[i] end
end
local known = {}
if #keyed > 0 then
  local found = redis.call('HMGET', K_IDEM, unpack(keyed))
  for j, k in ipairs(keyed) do
    if found[j] then known[k] = found[j] end
  end
end

-- Replace keys' current jobs, read in one round (only when some are given).
local rks, rk_known = {}, {}
do
  local want, fields = {}, {}
  for i = 1, n do
    local rk = ARGV[ARG0 + 2 + (i - 1) * STRIDE + 4]
    rks[i] = rk
    if rk ~= '' and not want[rk] then
      want[rk] = true
      fields[#fields + 1] = REPLACE_FIELD .. rk
    end
  end
  if #fields > 0 then
    local found = redis.call('HMGET', K_IDEM, unpack(fields))
    for j, f in ipairs(fields) do
      if found[j] then rk_known[string.sub(f, #REPLACE_FIELD + 1)] = found[j] end
    end
  end
end
local rk_fresh = {} -- replace key -> index in hset of the record stored by this call
local swaps = {}    -- stored jobs whose payload a replace key swapped: id, record
local rk_set = {}   -- K_IDEM entries for new jobs with a replace key

local out, hset, zadd, life, idem = { now }, {}, {}, {}, {}
local lwait, lane_n, lane_order = {}, {}, {} -- keyed jobs: K_LWAIT members, count per lane
local fresh = {} -- keyed jobs stored by this call: id -> true
-- Jobs without a delay share one meta prefix and one due time, formatted once.
local now_s = fmt('%d', now)
local plain_x = fmt('%d', now + P.lifetime)
local plain = record_head_new(now_s, now_s, plain_x)

for i = 1, n do
  local b = ARG0 + 2 + (i - 1) * STRIDE
  local id, key = ids[i], keys[i]
  local dup = nil
  if stored[i] then
    local m = split_record(stored[i])
    dup = fmt('NEW|%s|%d|%s', id, m.c, live_state(id, m.st))
  elseif key ~= '' and known[key] then
    local e = known[key]
    if fresh[e] then
      dup = fmt('DUP|%s|%s|p', e, now_s)
    else
      local rec = redis.call('HGET', K_JOBS, e)
      if rec then
        local m = split_record(rec)
        dup = fmt('DUP|%s|%d|%s', e, m.c, live_state(e, m.st))
      end
      -- else: a stale key whose job was purged; the key is free again.
    end
  end
  local rk = rks[i]
  if not dup and rk ~= '' then
    local payload = ARGV[b + 6]
    local at = rk_fresh[rk]
    local target, c = nil, nil
    if at then
      -- Published by this very call, not yet written: swap its payload.
      hset[at + 1] = record_with_payload(hset[at + 1], payload)
      target, c = hset[at], now_s
    elseif rk_known[rk] then
      local e = rk_known[rk]
      local rec = redis.call('HGET', K_JOBS, e)
      local created = record_untouched(rec)
      if created and redis.call('HEXISTS', K_LEASES, e) == 0 then
        swaps[#swaps + 1] = e
        swaps[#swaps + 1] = record_with_payload(rec, payload)
        target, c = e, created
      end
    end
    if target then
      if key ~= '' then
        idem[#idem + 1] = key
        idem[#idem + 1] = target
        known[key] = target
      end
      dup = fmt('REP|%s|%s|p', target, c)
    end
  end
  if dup then
    out[i + 1] = dup
  else
    -- The meta of a new job has a fixed shape: formatted, not cjson-encoded
    -- (record.lua record_new). Its due time goes to ZADD as that same string.
    local delay, due_s, x_s = ARGV[b + 2], now_s, plain_x
    local head = plain
    local pri = ARGV[b + 3]
    local fk = ARGV[b + 5]
    local members = record_new_members(fk, traced[i] or '', (pri ~= '0' and pri ~= '') and tonumber(pri) or 0)
    if rk ~= '' then
      rk_fresh[rk] = #hset + 1
      fresh[id] = true
      rk_set[#rk_set + 1] = REPLACE_FIELD .. rk
      rk_set[#rk_set + 1] = id
    end
    if delay ~= '0' then
      local due = now + tonumber(delay)
      due_s = fmt('%d', due)
      x_s = fmt('%d', due + P.lifetime)
      head = record_head_new(now_s, due_s, x_s)
    end
    local rec = record_new(head, members, key, rk, ARGV[b + 6])
    if key ~= '' then
      idem[#idem + 1] = key
      idem[#idem + 1] = id
      known[key] = id
      fresh[id] = true
    end
    local h = #hset
    hset[h + 1] = id
    hset[h + 2] = rec
    if fk ~= '' then
      lwait[#lwait + 1] = '0'
      lwait[#lwait + 1] = LANE.member(fk, pri, tonumber(due_s), id)
      if not lane_n[fk] then
        lane_n[fk] = 0
        lane_order[#lane_order + 1] = fk
      end
      lane_n[fk] = lane_n[fk] + 1
    else
      zadd[#zadd + 1] = (pri ~= '0' and pri ~= '') and wait_score(due_s, pri) or due_s
      zadd[#zadd + 1] = id
    end
    life[h + 1] = x_s
    life[h + 2] = id
    out[i + 1] = ''
  end
end
if #hset > 0 then
  redis.call('HSET', K_JOBS, unpack(hset))
  if #zadd > 0 then redis.call('ZADD', K_WAITING, unpack(zadd)) end
  redis.call('ZADD', K_LIFETIMES, unpack(life))
  redis.call('HINCRBY', K_STATE, 'n_pending', #hset / 2)
end
-- The loop above only read: every write comes after it, so a job of the
-- batch that fails (a bad delay or priority) fails the call with nothing
-- written.
if #swaps > 0 then redis.call('HSET', K_JOBS, unpack(swaps)) end
if #lwait > 0 then
  redis.call('ZADD', K_LWAIT, unpack(lwait))
  LANE.published_members(lwait, now)
  LANE.flush(now)
end
if #idem > 0 then redis.call('HSET', K_IDEM, unpack(idem)) end
if #rk_set > 0 then redis.call('HSET', K_IDEM, unpack(rk_set)) end
return out
