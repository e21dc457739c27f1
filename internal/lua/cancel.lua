-- cancel.lua — cancel one job, or a bounded step of a queue's jobs
-- (control.md §1). A cancelled job is dead / cancelled at once, in this one
-- call, and sits in the dead-letter list (a replay brings it back); a job in
-- flight keeps its delivery's slot until that delivery ends (lib.lua,
-- cancel_job). No history entry: SimpleQ's statuses are fixed.
--
-- KEYS: the queue keys of lib.lua; for bulk, one more key last: the scan's
--   cursor ({queue}:cancelcur:<filter digest>, package store), a string
--   "<phase>\n<position>" kept CURSOR_TTL ms after each step and deleted
--   when the scan is done, so that the same request sent again (done:
--   false) goes on where the last one stopped, on any daemon.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: "one" or "bulk".
-- one: ARGV[ARG0 + 2] job id, ARGV[ARG0 + 3] lastError to write ("cancelled: <reason>").
--   Returns {word, status, token}:
--     NOTFOUND | TERMINAL <"c"|"d"> | CANCELLED <status it had> <lease
--     token of the delivery under way, "" for none>.
-- bulk: ARGV[ARG0 + 2] lastError; ARGV[ARG0 + 3] phase: "w" (K_WAITING), "f"
--   (K_INFLIGHT), or "start" (go on from the stored cursor, or from the
--   start of w without one); ARGV[ARG0 + 4] the phase's position ("" for its
--   start; see take_after); ARGV[ARG0 + 5] at most this many set members looked
--   at in this call; ARGV[ARG0 + 6] this call's time budget in µs of Redis' clock;
--   ARGV[ARG0 + 7] statuses to match, joined by "," ("" for any); ARGV[ARG0 + 8]
--   createdBefore ms ("" for any).
--   One step walks the phase's set in its own order (score, then member),
--   CHUNK members at a time, until ARGV[ARG0 + 5] members were looked at or
--   ARGV[ARG0 + 6] µs have passed (checked after each chunk, its writes
--   included), whichever comes first, then the next phase if both allow.
--   Its work is bounded by members looked at, matching or not, and by time:
--   a few milliseconds per call whatever the backlog or the filter
--   (docs/performance.md). A job present in the set for the whole scan is
--   looked at once.
--   Returns {cancelled, next phase ("" when done), next position, members
--   looked at, then per job cancelled in flight: id, token}. Phase w covers
--   pending and waiting processing jobs; f covers deliveries under way and
--   awaiting_ack.
if not conf_load() then return redis.error_reply(NOCONF) end
local op = ARGV[ARG0 + 1]
local now = now_ms()

if op == 'one' then
  local id, err = ARGV[ARG0 + 2], ARGV[ARG0 + 3]
  local rec = redis.call('HGET', K_JOBS, id)
  if not rec then return { 'NOTFOUND', '', '' } end
  local m, payload = split_record(rec)
  if m.st == 'c' or m.st == 'd' then return { 'TERMINAL', m.st, '' } end
  local was, token = cancel_job(id, m, payload, now, err)
  LANE.flush(now)
  return { 'CANCELLED', was, token }
end

if op ~= 'bulk' then return redis.error_reply('cancel: unknown op ' .. tostring(op)) end

-- Members looked at per chunk: one ZRANGE, one HMGET and one write per set
-- each. Small enough that a chunk of cancels (~30 µs of Redis time a job
-- on the benchmark VM) stays well inside the budget it is checked against.
local CHUNK = 16
-- How long a stored cursor outlives the step that wrote it: the same
-- request sent again within this goes on from it.
local CURSOR_TTL = 60000

-- a sorts after b in a sorted set's order of members with equal scores:
-- bytewise, a prefix first (Redis' memcmp order; Lua's < follows the
-- locale's collation, which need not be bytewise).
local function member_after(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- The rank of the first member of sorted set key that comes after pos (a
-- {score string, member} pair, nil for the set's start) in the set's order,
-- whether or not pos's member is still there: O(log n) for the score, and a
-- binary search over the members sharing pos's score (a publish batch, or
-- jobs delayed to the same millisecond), O(log² n) at worst.
local function rank_after(key, pos)
  if not pos then return 0 end
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. pos[1])
  local hi = redis.call('ZCOUNT', key, '-inf', pos[1])
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local at = redis.call('ZRANGE', key, mid, mid)[1]
    if not at then break end
    if member_after(at, pos[2]) then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- Takes up to n members of sorted set key after pos, in the set's order:
-- a flat list of member, score (string), and the rank it started at. This
-- is the one place a bulk cancel reads a set, so a phase over another
-- sorted set of waiting jobs (a flow key's lane) is this function pointed
-- at that set. from, when given, is that rank already known (see the main
-- loop) and saves the search. Scores come back as Redis prints them
-- (integers exactly), and so go back into ZCOUNT unchanged.
local function take_after(key, pos, n, from)
  from = from or rank_after(key, pos)
  return redis.call('ZRANGE', key, from, from + n - 1, 'WITHSCORES'), from
end

local function encode_pos(pos)
  if not pos then return '' end
  return pos[1] .. '\n' .. pos[2]
end

local function decode_pos(s)
  if not s or s == '' then return nil end
  local nl = string.find(s, '\n', 1, true)
  return { string.sub(s, 1, nl - 1), string.sub(s, nl + 1) }
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local K_CURSOR = KEYS[#KEYS]
local err, phase, pos = ARGV[ARG0 + 2], ARGV[ARG0 + 3], decode_pos(ARGV[ARG0 + 4])
local max_look, budget = tonumber(ARGV[ARG0 + 5]), tonumber(ARGV[ARG0 + 6])
local want = nil
if ARGV[ARG0 + 7] ~= '' then
  want = {}
  for _, s in ipairs(split(ARGV[ARG0 + 7], ',')) do want[s] = true end
end
local before = tonumber(ARGV[ARG0 + 8])
-- A flow key filter (keys.md): only that lane's jobs. Its waiting jobs are
-- one range of K_LWAIT (phase l); in flight, each record's key is compared.
local want_fk = ARGV[ARG0 + 9] or ''
local lane_lo = want_fk .. '\0'
local started = now_us()

if phase == 'start' then
  local stored = redis.call('GET', K_CURSOR)
  phase, pos = 'w', nil
  if stored then
    local nl = string.find(stored, '\n', 1, true)
    phase, pos = string.sub(stored, 1, nl - 1), decode_pos(string.sub(stored, nl + 1))
  elseif want_fk ~= '' then
    phase = 'l' -- the default lane holds no keyed job
  end
end

-- Phases that can hold a wanted status: waiting jobs are pending or
-- processing, jobs in the in-flight set processing or awaiting_ack.
-- Phases: w the default lane's waiting jobs (K_WAITING), l the keyed
-- waiting jobs (K_LWAIT, lexicographic; one lane's range with a flow key
-- filter), f the in-flight set.
local function phase_wanted(ph)
  if ph == 'w' and want_fk ~= '' then return false end
  if not want then return true end
  if ph == 'w' or ph == 'l' then return want.pending or want.processing end
  return want.processing or want.awaiting_ack
end
local function next_phase(ph)
  if ph == 'w' and phase_wanted('l') then return 'l' end
  if (ph == 'w' or ph == 'l') and phase_wanted('f') then return 'f' end
  return ''
end
if phase ~= '' and not phase_wanted(phase) then phase, pos = next_phase(phase), nil end

local tail = record_cancel_tail(now, err)
local now_s = fmt('%d', now)

-- Looks at one chunk of phase ph's set (members, scores from take_after):
-- cancels the jobs that match and returns how many, and the position after
-- the chunk. The position moves only past members left in the set (not
-- matching, not jobs): every member cancelled leaves, so what follows the
-- last one left is the first not looked at yet, and a job that comes back
-- behind cancelled ones (a retry) is still ahead of the cursor.
-- Waiting jobs, the bulk of a big cancel, are written together: one ZREM,
-- HSET and ZADD per set for the chunk, and the record edited as a string
-- (record.lua record_cancel_fast) when it allows (no replace key or flow
-- key, whose indexes cancel_job keeps);
-- anything else goes through cancel_job, and deliveries under way it
-- cancelled are added to aborted (id, token).
local function cancel_chunk(ph, batch, at, aborted)
  local ids = {}
  for i = 1, #batch, 2 do
    local id = batch[i]
    if ph == 'l' then id = string.match(id, '%z([^%z]*)$') end -- a lane member's job id
    ids[#ids + 1] = id
  end
  local recs = redis.call('HMGET', K_JOBS, unpack(ids))
  local n, pend = 0, 0
  local gone, recs_out, dead, purge = {}, {}, {}, {}
  for i, id in ipairs(ids) do
    local rec = string.sub(id, 1, 1) ~= '~' and recs[i]
    local ok, c, st = false, nil, nil
    if rec then
      c, st = record_created_state(rec)
      ok = st ~= 'c' and st ~= 'd'
      if ok and before and tonumber(c) >= before then ok = false end
      if ok and want_fk ~= '' and ph ~= 'l' then ok = split_record(rec).fk == want_fk end
      if ok and want then
        local status
        if ph == 'w' or ph == 'l' then
          status = st == 'p' and 'pending' or 'processing'
        else
          status = st == 'w' and 'awaiting_ack' or 'processing'
        end
        ok = want[status]
      end
    end
    if not ok then
      at = { batch[2 * i], batch[2 * i - 1] }
    else
      n = n + 1
      local edited = ph == 'w' and not is_probe(id) and record_cancel_fast(rec, tail)
      if edited then
        gone[#gone + 1] = id
        recs_out[#recs_out + 1] = id
        recs_out[#recs_out + 1] = edited
        dead[#dead + 1] = now_s
        dead[#dead + 1] = id
        purge[#purge + 1] = fmt('%d', purge_at({ c = tonumber(c) }, now))
        purge[#purge + 1] = id
        if st == 'p' then pend = pend + 1 end
      else
        local m, payload = split_record(rec)
        if ph == 'l' and m.fk then
          -- The member names the job's place in its lane exactly.
          m.wd = LANE.member_due(batch[2 * i - 1], m.fk)
        end
        local _, token = cancel_job(id, m, payload, now, err)
        if token and token ~= '' then
          aborted[#aborted + 1] = id
          aborted[#aborted + 1] = token
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
  return n, at
end

-- Within one call nothing else writes the sets, so after a chunk of the
-- waiting set the rank of the next member is known: the chunk's start, plus
-- its length, less the jobs it cancelled (each left the set; were one to
-- stay, the next chunk would look at it again, never skip one). A cancel in
-- flight adds a "~cancelled|" member to K_INFLIGHT, so there the position
-- is searched again.
local cancelled, looked, aborted, from = 0, 0, {}, nil
while phase ~= '' and looked < max_look do
  local key = K_INFLIGHT
  if phase == 'w' then key = K_WAITING elseif phase == 'l' then key = K_LWAIT end
  local batch
  if phase == 'l' and want_fk ~= '' and not pos and not from then
    from = redis.call('ZLEXCOUNT', K_LWAIT, '-', '(' .. lane_lo) -- the lane's first member
  end
  batch, from = take_after(key, pos, math.min(CHUNK, max_look - looked), from)
  if phase == 'l' and want_fk ~= '' then
    -- The lane's range ends where members stop starting with its key.
    for i = 1, #batch, 2 do
      if string.sub(batch[i], 1, #lane_lo) ~= lane_lo then
        for j = #batch, i, -1 do batch[j] = nil end
        break
      end
    end
  end
  if #batch == 0 then
    phase, pos, from = next_phase(phase), nil, nil
  else
    looked = looked + #batch / 2
    local n
    n, pos = cancel_chunk(phase, batch, pos, aborted)
    cancelled = cancelled + n
    from = (phase == 'w' or phase == 'l') and from + #batch / 2 - n or nil
  end
  if now_us() - started >= budget then break end
end

LANE.flush(now)
if phase == '' then
  redis.call('DEL', K_CURSOR)
else
  redis.call('SET', K_CURSOR, phase .. '\n' .. encode_pos(pos), 'PX', CURSOR_TTL)
end
local out = { cancelled, phase, encode_pos(pos), looked }
for _, v in ipairs(aborted) do out[#out + 1] = v end
return out
