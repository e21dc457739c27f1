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
local scan = redis.call('ZSCAN', key, cursor, 'COUNT', count)
local ids = {}
for i = 1, #scan[2], 2 do
  local id = scan[2][i]
  if string.sub(id, 1, 1) ~= '~' then ids[#ids + 1] = id end
end
local n, aborted = 0, {}
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
        local m, payload = split_record(rec)
        local _, token = cancel_job(id, m, payload, now, err)
        n = n + 1
        if token and token ~= '' then
          aborted[#aborted + 1] = id
          aborted[#aborted + 1] = token
        end
      end
    end
  end
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
