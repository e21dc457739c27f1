-- schedule.lua — a queue's schedules (runtime.md §4), one atomic call per
-- change and one per firing round, on the queue's own slot.
--
-- KEYS: 1..11 the queue keys of lib.lua (a firing publishes jobs into them),
-- then schedule.lua's own:
-- KEYS[12] K_SDEF  HASH id -> definition: JSON meta (written by package
--                  store; it starts with {"source":"file" or "api") .. "\n"
--                  .. the raw payload bytes, delivered byte for byte.
-- KEYS[13] K_SRUN  HASH id -> run state, JSON {n, p, l, j, spec}:
--                  n next tick (ms, authoritative), p paused (0|1),
--                  l last tick fired (ms, 0: never), j last job id ("" none),
--                  spec the cron and time zone the next tick was computed
--                  from ("<cron>\t<timezone>").
-- KEYS[14] K_SDUE  ZSET id -> next tick (ms), unpaused schedules only: the
--                  queue's earliest tick is one ZRANGE, and a firing round
--                  reads only the due ones (bounded), whatever the number of
--                  idle schedules.
-- (lib.lua reads KEYS[12] as K_CALL; this script never uses the call log.)
-- ARGV[1..19]: queue parameters (lib.lua): a firing uses jobLifetime.
-- ARGV[20]: the operation, then its arguments. Returns what each operation
-- names after its arrow:
--   put id def source next spec
--        create or replace. A definition of the other source is not
--        replaced: "FILE" (an API write to a file schedule) or "TAKEN" (a
--        file schedule whose id an API schedule holds). A replacement with
--        the same spec keeps the stored next tick; the run state (last
--        run, paused) is kept either way.
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
--   due max           -> {now, earliest, id1, next1, spec1, ...}: up to max
--                     schedules whose next tick is due by Redis' clock.
--   fire n, then per schedule 4 values: id, expected next tick, the tick to
--        fire (<= now), the tick after it, the new job's id.
--        A schedule is fired only if its stored next tick is still the
--        expected one (so of daemons racing for the same tick exactly one
--        publishes) and the tick is due by Redis TIME. The job's
--        idempotency key is "schedule:<id>:<tick ms>", so a tick can never
--        publish twice even if its run state were lost.
--        -> {now, earliest, then per schedule: word, job id, tick}
--        word FIRED | DUP (the key named a retained job: recorded as the
--        run, nothing published) | STALE (the next tick moved on, paused
--        or deleted: nothing written) | EARLY (not due yet).
-- earliest: the queue's earliest unpaused next tick in ms, "" for none,
-- which package store writes to the fleet-wide index (schedindex.lua).
local K_SDEF, K_SRUN, K_SDUE = KEYS[KX + 1], KEYS[KX + 2], KEYS[KX + 3]
local op = ARGV[ARG0 + 1]

local function earliest()
  local first = redis.call('ZRANGE', K_SDUE, 0, 0, 'WITHSCORES')
  if first[2] then return first[2] end
  return ''
end

local function run_of(id)
  local raw = redis.call('HGET', K_SRUN, id)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function encode_run(r)
  return fmt('{"n":%d,"p":%d,"l":%d,"j":%s,"spec":%s}', r.n, r.p, r.l, cjson.encode(r.j), cjson.encode(r.spec))
end

local function save_run(id, r)
  local enc = encode_run(r)
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

if op == 'put' then
  local id, def, source, next_ms, spec = ARGV[ARG0 + 2], ARGV[ARG0 + 3], ARGV[ARG0 + 4], tonumber(ARGV[ARG0 + 5]), ARGV[ARG0 + 6]
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
  local r = run_of(id)
  if r then
    if r.spec ~= spec then
      r.n = next_ms
      r.spec = spec
    end
  else
    r = { n = next_ms, p = 0, l = 0, j = '', spec = spec }
  end
  redis.call('HSET', K_SDEF, id, def)
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
  if not def then
    -- A run state without its definition (none should exist) goes too.
    redis.call('HDEL', K_SRUN, id)
    redis.call('ZREM', K_SDUE, id)
    return { 'NONE', earliest() }
  end
  if source == 'api' and source_of(def) == 'file' then return { 'FILE', earliest() } end
  redis.call('HDEL', K_SDEF, id)
  redis.call('HDEL', K_SRUN, id)
  redis.call('ZREM', K_SDUE, id)
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

if op == 'due' then
  local now = now_ms()
  local max = tonumber(ARGV[ARG0 + 2])
  local ids = redis.call('ZRANGEBYSCORE', K_SDUE, '-inf', now, 'LIMIT', 0, max)
  local out = { now, earliest() }
  if #ids == 0 then return out end
  local runs = redis.call('HMGET', K_SRUN, unpack(ids))
  local drop = {}
  for i, id in ipairs(ids) do
    local r = runs[i] and cjson.decode(runs[i])
    if r and r.p == 0 then
      out[#out + 1] = id
      out[#out + 1] = fmt('%d', r.n)
      out[#out + 1] = r.spec
    else
      drop[#drop + 1] = id -- an index entry without a live run state
    end
  end
  if #drop > 0 then redis.call('ZREM', K_SDUE, unpack(drop)) end
  return out
end

-- A firing round reads and writes in batches (a handful of commands per
-- call, not per schedule): a busy queue fires many schedules a second.
if op == 'fire' then
  local now = now_ms()
  local n = tonumber(ARGV[ARG0 + 2])
  local ids = {}
  for i = 1, n do ids[i] = ARGV[ARG0 + 3 + (i - 1) * 5] end
  local runs = redis.call('HMGET', K_SRUN, unpack(ids))
  local defs = redis.call('HMGET', K_SDEF, unpack(ids))
  local words, due, keys = {}, {}, {}
  for i = 1, n do
    local b = ARG0 + 3 + (i - 1) * 5
    local expected, tick = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
    local r = runs[i] and cjson.decode(runs[i])
    words[i] = 'STALE'
    if r and defs[i] and r.p == 0 and r.n == expected then
      if tick > now then
        words[i] = 'EARLY'
      else
        -- The tick is part of the job's idempotency.
        local key = fmt('schedule:%s:%d', ids[i], tick)
        due[#due + 1] = { i = i, r = r, key = key, tick = tick, after = tonumber(ARGV[b + 3]), job = ARGV[b + 4] }
        keys[#keys + 1] = key
      end
    end
  end
  local known = {}
  if #keys > 0 then
    local found = redis.call('HMGET', K_IDEM, unpack(keys))
    for k, key in ipairs(keys) do
      if found[k] then known[key] = found[k] end
    end
  end
  local jobs, waiting, lifetimes, idem, runset, sdue = {}, {}, {}, {}, {}, {}
  local jobids = {}
  for _, f in ipairs(due) do
    local id, def = ids[f.i], defs[f.i]
    local prior = known[f.key]
    if prior and redis.call('HEXISTS', K_JOBS, prior) == 1 then
      words[f.i] = 'DUP'
      jobids[f.i] = prior
      f.r.j = prior
    else
      -- The record is the one publish.lua writes for a job without a
      -- delay (lib.lua's encode_meta), plus its schedule (sid) and the
      -- schedule's priority (control.md §2), which also scores it.
      local m = { c = now, s = now, x = now + P.lifetime, st = 'p', a = 0, d = 0, k = f.key, sid = id }
      local nl = string.find(def, '\n', 1, true)
      local pri = tonumber(string.match(string.sub(def, 1, nl - 1), '"priority":(%d+)') or '0')
      if pri > 0 then m.pri = pri end
      local w = #jobs
      jobs[w + 1] = f.job
      jobs[w + 2] = encode_meta(m) .. '\n' .. string.sub(def, nl + 1)
      waiting[w + 1] = wait_score(now, m.pri)
      waiting[w + 2] = f.job
      lifetimes[w + 1] = fmt('%d', m.x)
      lifetimes[w + 2] = f.job
      idem[w + 1] = f.key
      idem[w + 2] = f.job
      words[f.i] = 'FIRED'
      jobids[f.i] = f.job
      f.r.j = f.job
    end
    f.r.l = f.tick
    f.r.n = f.after
    runset[#runset + 1] = id
    runset[#runset + 1] = encode_run(f.r)
    sdue[#sdue + 1] = fmt('%d', f.after)
    sdue[#sdue + 1] = id
  end
  if #jobs > 0 then
    redis.call('HSET', K_JOBS, unpack(jobs))
    redis.call('ZADD', K_WAITING, unpack(waiting))
    redis.call('ZADD', K_LIFETIMES, unpack(lifetimes))
    redis.call('HSET', K_IDEM, unpack(idem))
    redis.call('HINCRBY', K_STATE, 'n_pending', #jobs / 2)
  end
  if #runset > 0 then
    redis.call('HSET', K_SRUN, unpack(runset))
    redis.call('ZADD', K_SDUE, unpack(sdue))
  end
  local out = { now, earliest() }
  for i = 1, n do
    local b = ARG0 + 3 + (i - 1) * 5
    out[#out + 1] = words[i]
    out[#out + 1] = jobids[i] or ''
    out[#out + 1] = ARGV[b + 2]
  end
  return out
end

return redis.error_reply('schedule.lua: unknown operation ' .. tostring(op))
