-- cancel.lua — cancel one job, or a bounded batch of a queue's jobs
-- (control.md §1). A cancelled job is dead / cancelled at once, in this one
-- call, and sits in the dead-letter list (a replay brings it back); a job in
-- flight keeps its delivery's slot until that delivery ends (lib.lua,
-- cancel_job). No history entry: SimpleQ's statuses are fixed.
--
-- KEYS: the queue keys of lib.lua.
-- ARGV[1..19]: queue parameters (lib.lua).
-- ARGV[20]: "one" or "bulk".
-- one: ARGV[21] job id, ARGV[22] lastError to write ("cancelled: <reason>").
--   Returns {word, status, token}:
--     NOTFOUND | TERMINAL <"c"|"d"> | CANCELLED <status it had> <lease
--     token of the delivery under way, "" for none>.
-- bulk: ARGV[21] lastError; ARGV[22] phase, "w" (K_WAITING) or "f"
--   (K_INFLIGHT); ARGV[23] the phase's ZSCAN cursor ("0" to start);
--   ARGV[24] ZSCAN COUNT (the batch); ARGV[25] statuses to match, joined by
--   "," ("" for any); ARGV[26] createdBefore ms ("" for any).
--   One ZSCAN step of the phase's set: at most about COUNT jobs looked at
--   and cancelled, so one call stays within a few milliseconds whatever the
--   backlog (docs/performance.md). A job present for the whole scan is seen
--   at least once; one seen twice is terminal the second time and skipped.
--   Returns {cancelled, next phase ("" when done), next cursor, then per
--   job cancelled in flight: id, token}. Phase w covers pending and
--   waiting processing jobs; f covers deliveries under way and awaiting_ack.
local op = ARGV[ARG0 + 1]
local now = now_ms()

if op == 'one' then
  local id, err = ARGV[ARG0 + 2], ARGV[ARG0 + 3]
  local rec = redis.call('HGET', K_JOBS, id)
  if not rec then return { 'NOTFOUND', '', '' } end
  local m, payload = split_record(rec)
  if m.st == 'c' or m.st == 'd' then return { 'TERMINAL', m.st, '' } end
  local was, token = cancel_job(id, m, payload, now, err)
  return { 'CANCELLED', was, token }
end

if op ~= 'bulk' then return redis.error_reply('cancel: unknown op ' .. tostring(op)) end

local err, phase, cursor = ARGV[ARG0 + 2], ARGV[ARG0 + 3], ARGV[ARG0 + 4]
local count = tonumber(ARGV[ARG0 + 5])
local want = nil
if ARGV[ARG0 + 6] ~= '' then
  want = {}
  for _, s in ipairs(split(ARGV[ARG0 + 6], ',')) do want[s] = true end
end
local before = tonumber(ARGV[ARG0 + 7])

-- Phases that can hold a wanted status: waiting jobs are pending or
-- processing, jobs in the in-flight set processing or awaiting_ack.
local function phase_wanted(ph)
  if not want then return true end
  if ph == 'w' then return want.pending or want.processing end
  return want.processing or want.awaiting_ack
end
local function next_phase(ph)
  if ph == 'w' and phase_wanted('f') then return 'f' end
  return ''
end
if not phase_wanted(phase) then
  phase = next_phase(phase)
  cursor = '0'
  if phase == '' then return { 0, '', '0' } end
end

local key = phase == 'w' and K_WAITING or K_INFLIGHT
local scan
if phase == 'w' and not want and not before then
  -- Every waiting job matches, and every one looked at leaves the set:
  -- take the front, COUNT at a time (cheaper than ZSCAN's dict walk).
  local front = redis.call('ZRANGE', K_WAITING, 0, count - 1, 'WITHSCORES')
  scan = { #front == 0 and '0' or 'front', front }
else
  scan = redis.call('ZSCAN', key, cursor, 'COUNT', count)
end
local ids = {}
for i = 1, #scan[2], 2 do
  local id = scan[2][i]
  if string.sub(id, 1, 1) ~= '~' then ids[#ids + 1] = id end
end
local n, aborted = 0, {}
-- Waiting jobs, the bulk of a big cancel, are written together: one ZREM,
-- HSET and ZADD per set for the whole step, and the record edited as a
-- string (st becomes d; ca, dr and e appended) when it holds none of
-- those members yet; anything else goes through cancel_job.
local gone, recs_out, dead, purge, pend = {}, {}, {}, {}, 0
local now_s = fmt('%d', now)
local tail = fmt(',"ca":%d,"dr":"cancelled","e":%s}', now, cjson.encode(err))
if #ids > 0 then
  local recs = redis.call('HMGET', K_JOBS, unpack(ids))
  for i, id in ipairs(ids) do
    local rec = recs[i]
    if rec then
      local c, st = string.match(rec, '^{"c":(%d+),"s":%d+,"x":%d+,"st":"(%a)"')
      local ok = st ~= 'c' and st ~= 'd'
      if ok and before and tonumber(c) >= before then ok = false end
      if ok and want then
        local status
        if phase == 'w' then
          status = st == 'p' and 'pending' or 'processing'
        else
          status = st == 'w' and 'awaiting_ack' or 'processing'
        end
        ok = want[status]
      end
      if ok then
        n = n + 1
        local nl = string.find(rec, '\n', 1, true)
        local meta = string.sub(rec, 1, nl - 1)
        if phase == 'w' and not is_probe(id) and not string.find(meta, ',"e":', 1, true)
          and not string.find(meta, ',"ca":', 1, true) and not string.find(meta, ',"dr":', 1, true)
          and not string.find(meta, ',"rk":', 1, true) then
          local at = string.find(meta, '"st":"', 1, true)
          gone[#gone + 1] = id
          recs_out[#recs_out + 1] = id
          recs_out[#recs_out + 1] = string.sub(meta, 1, at + 5) .. 'd' .. string.sub(meta, at + 7, -2) .. tail ..
            string.sub(rec, nl)
          dead[#dead + 1] = now_s
          dead[#dead + 1] = id
          purge[#purge + 1] = fmt('%d', purge_at({ c = tonumber(c) }, now))
          purge[#purge + 1] = id
          if st == 'p' then pend = pend + 1 end
        else
          local m, payload = split_record(rec)
          local _, token = cancel_job(id, m, payload, now, err)
          if token and token ~= '' then
            aborted[#aborted + 1] = id
            aborted[#aborted + 1] = token
          end
        end
      end
    end
  end
end
if #gone > 0 then
  redis.call('ZREM', K_WAITING, unpack(gone))
  redis.call('ZREM', K_LIFETIMES, unpack(gone))
  redis.call('HSET', K_JOBS, unpack(recs_out))
  redis.call('ZADD', K_DEAD, unpack(dead))
  redis.call('ZADD', K_PURGE, unpack(purge))
  if pend > 0 then redis.call('HINCRBY', K_STATE, 'n_pending', -pend) end
end
local out = { n }
if scan[1] == '0' then
  out[2] = next_phase(phase)
  out[3] = '0'
else
  out[2] = phase
  out[3] = scan[1]
end
for _, v in ipairs(aborted) do out[#out + 1] = v end
return out
