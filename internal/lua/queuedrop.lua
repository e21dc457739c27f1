-- queuedrop.lua — delete a queue created over the API, one bounded batch
-- of its jobs per call; the caller repeats until DONE.
--
-- KEYS: the queue keys of lib.lua, then KEYS[KX + 1] K_META (queuedef.lua) and
--   KEYS[KX + 2] the queue's statistics hash (lib.lua stats_flush), removed with
--   the rest.
-- ARGV[1]: "1" to purge (remove jobs that are not terminal too), "0" not.
-- ARGV[2]: "1" on the first call of a delete, "0" on the calls after it.
-- ARGV[3]: the most jobs removed per call.
-- The first call decides: without purge, a queue with a job waiting, in
-- flight or awaiting ack is refused (BUSY) and nothing changes; otherwise
-- the definition is marked deleting (queuedef.lua then refuses writes),
-- the limits are dropped and, with purge, the queue is paused, so no
-- daemon claims from it while its jobs go.
-- Each call then removes up to a batch of jobs: terminal ones (dead, and
-- completed awaiting their retention purge) and, with purge, waiting and
-- in-flight ones (a delivery in flight finishes at its webhook; its
-- outcome then finds no job and is dropped). Without purge, a job that
-- appeared after the first call (published by a daemon that had not yet
-- heard of the delete) is kept, with the keys it needs, and the rest goes.
-- Returns {"BUSY", jobs not terminal} (first call, no purge);
--   {"MORE", removed} while jobs remain; {"DONE", removed} when the queue's
--   keys are gone; {"KEPT", removed, kept} when only jobs that appeared
--   since the first call remain (without purge), which stay.
local K_META, K_QSTATS = KEYS[KX + 1], KEYS[KX + 2]
local purge, first = ARGV[ARG0 + 1] == '1', ARGV[ARG0 + 2] == '1'
local batch = tonumber(ARGV[ARG0 + 3])

local function live()
  return redis.call('ZCARD', K_WAITING) + redis.call('ZCARD', K_LWAIT) + in_flight()
end

if first then
  if not purge then
    local n = live()
    if n > 0 then return { 'BUSY', n } end
  end
  redis.call('HSET', K_META, 'deleting', '1')
  redis.call('HDEL', K_STATE, 'lim_conc', 'lim_rmax', 'lim_rwin')
  if purge then redis.call('HSET', K_STATE, 'paused', '1', 'pause_reason', 'deleting') end
end

local removed = 0
local function remove(id, member)
  if member then
    -- A keyed job's K_LWAIT member (lanes.lua): "fk \0 level due \0 id".
    redis.call('ZREM', K_LWAIT, member)
    id = string.match(member, '%z([^%z]*)$')
  end
  local rec = redis.call('HGET', K_JOBS, id)
  if rec then
    local m = split_record(rec)
    if m.k and redis.call('HGET', K_IDEM, m.k) == id then redis.call('HDEL', K_IDEM, m.k) end
  end
  redis.call('HDEL', K_JOBS, id)
  redis.call('HDEL', K_HIST, id)
  redis.call('HDEL', K_LEASES, id)
  redis.call('ZREM', K_WAITING, id)
  redis.call('ZREM', K_INFLIGHT, id)
  redis.call('ZREM', K_LIFETIMES, id)
  redis.call('ZREM', K_DEAD, id)
  redis.call('ZREM', K_PURGE, id)
  removed = removed + 1
end

local sets = { K_DEAD, K_PURGE }
if purge then
  sets = { K_WAITING, K_INFLIGHT, K_DEAD, K_PURGE, K_LWAIT }
  local members = redis.call('ZRANGE', K_LWAIT, 0, batch - 1)
  for _, mem in ipairs(members) do
    if removed < batch then remove(nil, mem) end
  end
end
for _, key in ipairs(sets) do
  if key ~= K_LWAIT and removed < batch then
    local ids = redis.call('ZRANGE', key, 0, batch - removed)
    for _, id in ipairs(ids) do
      if id ~= PLACEHOLDER and removed < batch then remove(id) end
    end
  end
end

for _, key in ipairs(sets) do
  local left = redis.call('ZCARD', key)
  if key == K_INFLIGHT and redis.call('ZSCORE', K_INFLIGHT, PLACEHOLDER) then left = left - 1 end
  if left > 0 then return { 'MORE', removed } end
end

local kept = live()
if kept > 0 then
  -- Jobs published since the first call: keep them and what they need.
  redis.call('DEL', K_META, K_STARTS)
  return { 'KEPT', removed, kept }
end
redis.call('DEL', K_WAITING, K_INFLIGHT, K_JOBS, K_HIST, K_STATE, K_LIFETIMES, K_DEAD, K_PURGE,
  K_IDEM, K_STARTS, K_LEASES, K_META, K_QSTATS,
  K_LWAIT, K_LANES, K_LREADY, K_LTIMED, K_LHELD, K_LSTARTS)
return { 'DONE', removed }
