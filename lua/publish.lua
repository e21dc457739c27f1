-- publish.lua — store new jobs, atomically per call.
--
-- KEYS: the queue keys of lib.lua.
-- ARGV[1..17]: queue parameters (lib.lua).
-- ARGV[18]: n, the number of jobs; then per job 4 values:
--   id, idempotency key ("" for none), delay ms, raw payload bytes.
-- A job id already stored (the same call run again by a client retry) is
-- reported as NEW again and nothing is written.
-- At most 1000 jobs per call (unpack's limit; package store splits larger
-- batches). Reads and writes are batched: a handful of commands per call,
-- not per job.
-- Returns a flat array, per job: word, id, createdAt ms, state.
--   word "NEW": stored, due at createdAt + delay.
--   word "DUP": the idempotency key names a job still retained; its id,
--   createdAt and state are returned and nothing is written.
local now = now_ms()
local n = tonumber(ARGV[ARG0 + 1])
local ids, keys = {}, {}
for i = 1, n do
  local b = ARG0 + 2 + (i - 1) * 4
  ids[i], keys[i] = ARGV[b], ARGV[b + 1]
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

local out, hset, zadd, idem = {}, {}, {}, {}
local fresh = {} -- jobs stored by this call: id -> createdAt
local function emit(word, id, c, st)
  out[#out + 1] = word
  out[#out + 1] = id
  out[#out + 1] = c
  out[#out + 1] = st
end

for i = 1, n do
  local b = ARG0 + 2 + (i - 1) * 4
  local id, key = ids[i], keys[i]
  local dup = nil
  if stored[i] then
    local m = split_record(stored[i])
    dup = { 'NEW', id, m.c, live_state(id, m.st) }
  elseif key ~= '' and known[key] then
    local e = known[key]
    if fresh[e] then
      dup = { 'DUP', e, fresh[e], 'p' }
    else
      local rec = redis.call('HGET', K_JOBS, e)
      if rec then
        local m = split_record(rec)
        dup = { 'DUP', e, m.c, live_state(e, m.st) }
      end
      -- else: a stale key whose job was purged; the key is free again.
    end
  end
  if dup then
    emit(dup[1], dup[2], dup[3], dup[4])
  else
    local due = now + tonumber(ARGV[b + 2])
    -- The meta of a new job has a fixed shape: formatted, not cjson-encoded
    -- (see encode_meta). Its due time goes to ZADD as that same string.
    local due_s = fmt('%d', due)
    local meta = fmt('{"c":%d,"s":%s,"x":%d,"st":"p"', now, due_s, due + P.lifetime)
    if key ~= '' then
      meta = meta .. ',"k":' .. cjson.encode(key)
      idem[#idem + 1] = key
      idem[#idem + 1] = id
      known[key] = id
    end
    hset[#hset + 1] = id
    hset[#hset + 1] = meta .. '}\n' .. ARGV[b + 3]
    zadd[#zadd + 1] = due_s
    zadd[#zadd + 1] = id
    fresh[id] = now
    emit('NEW', id, now, 'p')
  end
end
if #hset > 0 then
  redis.call('HSET', K_JOBS, unpack(hset))
  redis.call('ZADD', K_WAITING, unpack(zadd))
  redis.call('HINCRBY', K_STATE, 'n_pending', #zadd / 2)
end
if #idem > 0 then redis.call('HSET', K_IDEM, unpack(idem)) end
return out
