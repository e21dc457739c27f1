-- schedule.lua — a queue's schedules (runtime.md §4), one atomic call per
-- change and one per firing batch, on the queue's own slot.
--
-- KEYS: the queue keys of lib.lua (a firing publishes jobs into them), then
-- this script's own four, always the last four (a key added to lib.lua's
-- list moves nothing here):
-- K_SDEF  HASH id -> definition: JSON meta (written by package store; it
--         starts with {"source":"file" or "api") .. "\n" .. the raw payload
--         bytes, delivered byte for byte.
-- K_SRUN  HASH id -> run state, flat (no JSON): "<p>|<n>|<l>|<j>": p paused
--         (0|1), n next tick (ms), l last tick fired (ms, 0: never), j last
--         job id ("": none). A firing writes it whole without reading it.
-- K_SDUE  ZSET id -> next tick (ms, the same n), unpaused schedules only:
--         what a firing reads (the due ones, bounded, with their next tick
--         as the score), whatever the number of idle schedules; the queue's
--         earliest tick is one ZRANGE.
-- K_SFIRE HASH id -> what a firing needs, prepared when the schedule is
--         written (put): "<iv>|<pri><head>\n<tail>": iv the interval of an
--         @every schedule in ms (0: a cron schedule, whose ticks package
--         schedule computes with robfig/cron), pri its priority (one
--         digit), and the job record around the tick (job_parts): a tick's
--         record is the call's record_head_new(...) .. head ..
--         tick .. tail, one string join, no JSON encoding per tick.
-- K_SRUN, K_SDUE and K_SFIRE also hold lib.lua's PLACEHOLDER (a field
-- with value "", a member with score +inf) from a queue's first schedule to
-- its last: Redis keeps a hash of up to 512 small entries and a sorted set
-- of up to 128 as a listpack, where every entry read or written scans the
-- whole list, so a firing of a queue's 100 schedules in one call cost O(n²);
-- an entry longer than 64 bytes makes the key a hash table or skiplist. It is
-- never a schedule (ids are [A-Za-z0-9._-]) and never due.
-- (lib.lua reads KEYS[12] as K_CALL; this script never uses the call log.)
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: the operation, then its arguments. Returns what each operation
-- names after its arrow:
--   put id def source next iv
--        create or replace; iv: the interval of an @every cron in ms, 0 for
--        any other. A definition of the other source is not replaced:
--        "FILE" (an API write to a file schedule) or "TAKEN" (a file
--        schedule whose id an API schedule holds). A replacement with the
--        same cron and time zone keeps the stored next tick; the run state
--        (last run, paused) is kept either way.
--        -> {"CREATED"|"REPLACED"|"FILE"|"TAKEN", run, earliest}
--   get id            -> {def, run} or {} (unknown)
--   list              -> {id1, def1, run1, ...}
--   del id source     source "api" refuses a file schedule ("FILE"); "file"
--                     and "any" delete any.
--                     -> {"DELETED"|"NONE"|"FILE", earliest}
--   pause id          -> {"OK"|"NONE", run, earliest}
--   resume id next    next: the tick after now, computed by Go (a paused
--                     schedule's ticks are skipped, not caught up)
--                     -> {"OK"|"NONE", run, earliest}
--   tick max job1..jobmax
--        the firing round's batch: up to max schedules due by Redis TIME,
--        earliest tick first. Each @every one fires here, for its latest
--        due tick (ticks missed are caught up as one: n + k*iv <= now), its
--        next tick the one after; job1.. are fresh job ids, used in turn.
--        Cron ones are returned for package schedule to compute their tick
--        and fire them with "fire".
--        -> {now, earliest, taken, fired, then per fired tick: word, id,
--            job id, tick; then per cron schedule due: id, next, meta}
--        taken: the due schedules read (max: there may be more); word FIRED
--        or DUP (below); meta the definition's JSON line.
--   fire n, then per schedule 5 values: id, expected next tick, the tick to
--        fire (<= now), the tick after it, the new job's id.
--        A schedule is fired only if its stored next tick is still the
--        expected one (so of daemons racing for the same tick exactly one
--        publishes) and the tick is due by Redis TIME.
--        -> {now, earliest, then per schedule: word, job id, tick}
--        word FIRED | DUP | STALE (the next tick moved on, paused or
--        deleted: nothing written) | EARLY (not due yet).
-- Every tick's job has the idempotency key "schedule:<id>:<tick ms>", so a
-- tick can never publish twice even if its run state were lost: DUP, the
-- key named a retained job, which is recorded as the run; nothing published.
-- earliest: the queue's earliest unpaused next tick in ms, "" for none,
-- which package store writes to the fleet-wide index (schedindex.lua).
local K_SDEF, K_SRUN, K_SDUE, K_SFIRE = KEYS[#KEYS - 3], KEYS[#KEYS - 2], KEYS[#KEYS - 1], KEYS[#KEYS]
local op = ARGV[ARG0 + 1]
-- Only a firing reads a setting (jobLifetime): the other operations work on
-- a queue whatever Redis holds of its settings.
if (op == 'tick' or op == 'fire') and not conf_load() then return redis.error_reply(NOCONF) end

local function earliest()
  local first = redis.call('ZRANGE', K_SDUE, 0, 0, 'WITHSCORES')
  if first[2] and first[1] ~= PLACEHOLDER then return first[2] end
  return ''
end

-- See the header: the keys a firing reads and writes in bulk stay hash
-- tables and skiplists.
local function keep_tables()
  redis.call('HSETNX', K_SRUN, PLACEHOLDER, '')
  redis.call('HSETNX', K_SFIRE, PLACEHOLDER, '')
  redis.call('ZADD', K_SDUE, 'NX', '+inf', PLACEHOLDER)
end

-- Run state: "<p>|<n>|<l>|<j>" (K_SRUN).
local function run_of(id)
  local raw = redis.call('HGET', K_SRUN, id)
  if not raw then return nil end
  local p, n, l, j = string.match(raw, '^(%d)|(%d+)|(%d+)|(.*)$')
  if not p then return nil end
  return { p = tonumber(p), n = tonumber(n), l = tonumber(l), j = j }
end

local function save_run(id, r)
  local enc = fmt('%d|%d|%d|%s', r.p, r.n, r.l, r.j)
  redis.call('HSET', K_SRUN, id, enc)
  if r.p == 1 then
    redis.call('ZREM', K_SDUE, id)
  else
    redis.call('ZADD', K_SDUE, fmt('%d', r.n), id)
  end
  return enc
end

local function source_of(def)
  if string.sub(def, 1, 17) == '{"source":"file",' then return 'file' end
  return 'api'
end

-- The definition's meta (decoded) and payload.
local function split_def(def)
  local nl = string.find(def, '\n', 1, true)
  return cjson.decode(string.sub(def, 1, nl - 1)), string.sub(def, nl + 1)
end

local function spec_of(meta)
  return tostring(meta.cron) .. '\t' .. tostring(meta.timezone)
end

-- The job record of a tick, around the tick (record.lua
-- record_tick_parts): head ends inside the idempotency key, before the
-- tick; tail closes it and ends with the payload.
local function job_parts(id, meta, payload)
  local fk = ''
  if type(meta.flowKey) == 'string' then fk = meta.flowKey end
  return record_tick_parts(id, fk, tonumber(meta.priority) or 0, payload)
end

-- K_SFIRE's value for a definition (see the header).
local function fire_record(id, def, iv)
  local meta, payload = split_def(def)
  local pri = tonumber(meta.priority) or 0
  if pri < 0 or pri > 9 or pri % 1 ~= 0 then error('schedule.lua: priority out of 0-9: ' .. tostring(meta.priority)) end
  local head, tail = job_parts(id, meta, payload)
  return fmt('%d|%d', iv, pri) .. head .. '\n' .. tail
end

-- The flow key of a fire record whose job members start at i (nil:
-- none), read once per schedule and call (false: none).
local fk_cache = {}
local function fire_flow_key(v, i)
  local k = fk_cache[v]
  if k == nil then
    k = record_flow_key_at(v, i) or false
    fk_cache[v] = k
  end
  return k or nil
end

-- Millisecond times as strings, formatted once per call (a round's ticks
-- mostly share one second).
local tstr = {}
local function ms_str(t)
  local s = tstr[t]
  if not s then
    s = fmt('%d', t)
    tstr[t] = s
  end
  return s
end

-- A batch of ticks to fire, in parallel arrays (no table per tick): T.id,
-- T.v (K_SFIRE's value), T.bar (the "|" in it), T.tick, T.after (ms), T.job
-- (a fresh job id); publish_ticks adds T.ts (the tick as a string) and
-- T.dup (true: the tick's job existed, T.job is that job).
local function new_ticks()
  return { n = 0, id = {}, v = {}, bar = {}, tick = {}, after = {}, job = {}, ts = {}, dup = {} }
end

local function add_tick(T, id, v, bar, tick, after, job)
  local k = T.n + 1
  T.n = k
  T.id[k], T.v[k], T.bar[k], T.tick[k], T.after[k], T.job[k] = id, v, bar, tick, after, job
  return k
end

-- Publishes the job of each tick of T unless its idempotency key names a
-- retained job (DUP), and stores every schedule's run state and next tick.
-- A few commands per call, not per tick.
local function publish_ticks(now, T)
  local n = T.n
  if n == 0 then return end
  local ids, vs, bars, jobs_of, tss = T.id, T.v, T.bar, T.job, T.ts
  local keys = {}
  for i = 1, n do
    local ts = ms_str(T.tick[i])
    tss[i] = ts
    keys[i] = 'schedule:' .. ids[i] .. ':' .. ts
  end
  local found = redis.call('HMGET', K_IDEM, unpack(keys))
  local lwait, lane_n, lane_order = {}, {}, {} -- keyed ticks (flow keys, lanes.lua)
  local life = fmt('%d', now + P.lifetime)
  local head = record_head_new(fmt('%d', now), fmt('%d', now), life)
  local scores = {}
  local jobs, waiting, lifetimes, idem, runs, due = {}, {}, {}, {}, {}, {}
  local w, r = 0, 0
  for i = 1, n do
    local prior = found[i]
    local job = jobs_of[i]
    if prior and redis.call('HEXISTS', K_JOBS, prior) == 1 then
      T.dup[i] = true
      job = prior
      jobs_of[i] = prior
    else
      local v, bar = vs[i], bars[i]
      local nl = string.find(v, '\n', bar, true)
      local pri = string.byte(v, bar + 1) - 48
      local score = scores[pri]
      if not score then
        score = wait_score(now, pri)
        scores[pri] = score
      end
      jobs[w + 1] = job
      jobs[w + 2] = head .. string.sub(v, bar + 2, nl - 1) .. tss[i] .. string.sub(v, nl + 1)
      local fk = fire_flow_key(v, bar + 2)
      if fk then
        -- A schedule with a flow key: its jobs wait in their lane.
        lwait[#lwait + 1] = '0'
        lwait[#lwait + 1] = LANE.member(fk, pri, now, job)
        if not lane_n[fk] then
          lane_n[fk] = 0
          lane_order[#lane_order + 1] = fk
        end
        lane_n[fk] = lane_n[fk] + 1
      else
        waiting[#waiting + 1] = score
        waiting[#waiting + 1] = job
      end
      lifetimes[w + 1] = life
      lifetimes[w + 2] = job
      idem[w + 1] = keys[i]
      idem[w + 2] = job
      w = w + 2
    end
    local after = ms_str(T.after[i])
    runs[r + 1] = ids[i]
    runs[r + 2] = '0|' .. after .. '|' .. tss[i] .. '|' .. job
    due[r + 1] = after
    due[r + 2] = ids[i]
    r = r + 2
  end
  if w > 0 then
    redis.call('HSET', K_JOBS, unpack(jobs))
    if #waiting > 0 then redis.call('ZADD', K_WAITING, unpack(waiting)) end
    if #lwait > 0 then
      redis.call('ZADD', K_LWAIT, unpack(lwait))
      LANE.published_members(lwait, now)
      LANE.flush(now)
    end
    redis.call('ZADD', K_LIFETIMES, unpack(lifetimes))
    redis.call('HSET', K_IDEM, unpack(idem))
    redis.call('HINCRBY', K_STATE, 'n_pending', w / 2)
  end
  redis.call('HSET', K_SRUN, unpack(runs))
  redis.call('ZADD', K_SDUE, unpack(due))
end

if op == 'put' then
  local id, def, source, next_ms, iv = ARGV[ARG0 + 2], ARGV[ARG0 + 3], ARGV[ARG0 + 4], tonumber(ARGV[ARG0 + 5]), tonumber(ARGV[ARG0 + 6])
  local old = redis.call('HGET', K_SDEF, id)
  local word = 'CREATED'
  if old then
    local was = source_of(old)
    if was ~= source then
      if was == 'file' then return { 'FILE', '', earliest() } end
      return { 'TAKEN', '', earliest() }
    end
    word = 'REPLACED'
  end
  local fire = fire_record(id, def, iv)
  local r = run_of(id)
  if r then
    if not old or spec_of((split_def(old))) ~= spec_of((split_def(def))) then r.n = next_ms end
  else
    r = { n = next_ms, p = 0, l = 0, j = '' }
  end
  keep_tables()
  redis.call('HSET', K_SDEF, id, def)
  redis.call('HSET', K_SFIRE, id, fire)
  local enc = save_run(id, r)
  return { word, enc, earliest() }
end

if op == 'get' then
  local id = ARGV[ARG0 + 2]
  local def = redis.call('HGET', K_SDEF, id)
  local run = redis.call('HGET', K_SRUN, id)
  if not def or not run then return {} end
  return { def, run }
end

if op == 'list' then
  local out = {}
  local defs = redis.call('HGETALL', K_SDEF)
  for i = 1, #defs, 2 do
    local run = redis.call('HGET', K_SRUN, defs[i])
    if run then
      out[#out + 1] = defs[i]
      out[#out + 1] = defs[i + 1]
      out[#out + 1] = run
    end
  end
  return out
end

if op == 'del' then
  local id, source = ARGV[ARG0 + 2], ARGV[ARG0 + 3]
  local def = redis.call('HGET', K_SDEF, id)
  if def and source == 'api' and source_of(def) == 'file' then return { 'FILE', earliest() } end
  -- Without its definition (none should exist), a run state goes too.
  redis.call('HDEL', K_SDEF, id)
  redis.call('HDEL', K_SRUN, id)
  redis.call('HDEL', K_SFIRE, id)
  redis.call('ZREM', K_SDUE, id)
  if redis.call('HLEN', K_SDEF) == 0 then
    -- The queue's last schedule: no placeholders left behind.
    redis.call('DEL', K_SRUN, K_SFIRE, K_SDUE)
  end
  if not def then return { 'NONE', earliest() } end
  return { 'DELETED', earliest() }
end

if op == 'pause' or op == 'resume' then
  local id = ARGV[ARG0 + 2]
  local r = run_of(id)
  if not r or redis.call('HEXISTS', K_SDEF, id) == 0 then return { 'NONE', '', earliest() } end
  if op == 'pause' then
    r.p = 1
  elseif r.p == 1 then
    r.p = 0
    r.n = tonumber(ARGV[ARG0 + 3])
  end
  local enc = save_run(id, r)
  return { 'OK', enc, earliest() }
end

if op == 'tick' then
  local now = now_ms()
  local max = tonumber(ARGV[ARG0 + 2])
  local due = redis.call('ZRANGEBYSCORE', K_SDUE, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
  local taken = #due / 2
  if taken == 0 then return { now, earliest(), 0, 0 } end
  local ids = {}
  for i = 1, taken do ids[i] = due[2 * i - 1] end
  local vals = redis.call('HMGET', K_SFIRE, unpack(ids))
  local T = new_ticks()
  local cron, drop = {}, {}
  local ivs = {}
  for i = 1, taken do
    local id, v = ids[i], vals[i]
    if not v then
      drop[#drop + 1] = id -- a due entry without its schedule
    else
      local bar = string.find(v, '|', 1, true)
      local ivs_s = string.sub(v, 1, bar - 1)
      local iv = ivs[ivs_s]
      if not iv then
        iv = tonumber(ivs_s)
        ivs[ivs_s] = iv
      end
      if iv > 0 then
        local n = tonumber(due[2 * i])
        local tick = n + math.floor((now - n) / iv) * iv
        -- The next tick as robfig/cron's @every counts it: from the tick's
        -- whole second.
        add_tick(T, id, v, bar, tick, tick - tick % 1000 + iv, ARGV[ARG0 + 3 + T.n])
      else
        cron[#cron + 1] = i
      end
    end
  end
  if #drop > 0 then redis.call('ZREM', K_SDUE, unpack(drop)) end
  publish_ticks(now, T)
  local out = { now, earliest(), taken, T.n }
  local o = 4
  for k = 1, T.n do
    out[o + 1] = T.dup[k] and 'DUP' or 'FIRED'
    out[o + 2] = T.id[k]
    out[o + 3] = T.job[k]
    out[o + 4] = T.ts[k]
    o = o + 4
  end
  if #cron > 0 then
    local cids = {}
    for k, i in ipairs(cron) do cids[k] = ids[i] end
    local defs = redis.call('HMGET', K_SDEF, unpack(cids))
    for k, i in ipairs(cron) do
      local def = defs[k] or ''
      local nl = string.find(def, '\n', 1, true) or (#def + 1)
      out[o + 1] = ids[i]
      out[o + 2] = due[2 * i]
      out[o + 3] = string.sub(def, 1, nl - 1)
      o = o + 3
    end
  end
  return out
end

if op == 'fire' then
  local now = now_ms()
  local n = tonumber(ARGV[ARG0 + 2])
  local ids = {}
  for i = 1, n do ids[i] = ARGV[ARG0 + 3 + (i - 1) * 5] end
  local vals = redis.call('HMGET', K_SFIRE, unpack(ids))
  local T = new_ticks()
  local words, at = {}, {}
  for i = 1, n do
    local b = ARG0 + 3 + (i - 1) * 5
    local expected, tick = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
    local score = redis.call('ZSCORE', K_SDUE, ids[i])
    local v = vals[i]
    words[i] = 'STALE'
    if v and score and tonumber(score) == expected then
      if tick > now then
        words[i] = 'EARLY'
      else
        at[i] = add_tick(T, ids[i], v, string.find(v, '|', 1, true), tick, tonumber(ARGV[b + 3]), ARGV[b + 4])
      end
    end
  end
  publish_ticks(now, T)
  local out = { now, earliest() }
  for i = 1, n do
    local k = at[i]
    if k then
      out[#out + 1] = T.dup[k] and 'DUP' or 'FIRED'
      out[#out + 1] = T.job[k]
    else
      out[#out + 1] = words[i]
      out[#out + 1] = ''
    end
    out[#out + 1] = ARGV[ARG0 + 3 + (i - 1) * 5 + 2]
  end
  return out
end

return redis.error_reply('schedule.lua: unknown operation ' .. tostring(op))
