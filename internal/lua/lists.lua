-- lists.lua — one page of a queue's jobs of one status (control.md §4), read
-- in one script call so the page is a consistent snapshot: the range of a
-- sorted set, the records, leases and histories of the jobs in it.
-- Read-only: it never writes.
--
-- Each status is read from the sorted sets that hold it (lib.lua's KEYS), in
-- phases; a phase walks one set by rank from the cursor:
--   pending       W  K_WAITING ascending, records in state p
--   processing    I  K_INFLIGHT ascending (lease deadline), not awaiting ack;
--                 then W K_WAITING ascending, records in state r
--   awaiting_ack  I  K_INFLIGHT ascending (ack deadline), records in state w
--   completed     P  K_PURGE descending (purge time: createdAt + retention),
--                 records in state c
--   dead          D  K_DEAD descending (death time)
-- K_WAITING's order is the delivery order (lib.lua wait_score: highest
-- priority first, then due time).
-- Keyed jobs (flow keys, keys.md) wait in K_LWAIT instead: pending and
-- processing walk it after K_WAITING (phase L, lexicographic: by flow key,
-- then the lane's delivery order). With a flow key filter (ARGV[ARG0 + 8])
-- pending and retries read only that lane's range of K_LWAIT, O(log n +
-- limit); the other sets are walked as without it and each record's flow
-- key is compared, within the same bounded scan.
--
-- A page costs O(log n + scan) whatever the backlog: the cursor's position is
-- one ZRANK (or, when its job has moved, one ZCOUNT of the cursor's score),
-- and the page reads at most `scan` entries of the set and `bytes` of stored
-- records. Entries of another state in the same set are skipped but count
-- against scan, so a page can hold fewer than limit jobs (even none) and
-- still carry a cursor; the next page continues after the last entry read.
--
-- KEYS: the queue keys of lib.lua.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1] status; + 2 phase ("" for the first page); + 3 cursor
--   score; + 4 cursor member; + 5 limit; + 6 scan; + 7 bytes; + 8 flow key
--   ("" for every lane).
-- Returns {next phase ("" after the last page), next score, next member,
--   then per job 4 values: id, record, lease token ("" if none), history}.
local status, phase = ARGV[ARG0 + 1], ARGV[ARG0 + 2]
local cur_score, cur_member = ARGV[ARG0 + 3], ARGV[ARG0 + 4]
local limit, scan, bytes = tonumber(ARGV[ARG0 + 5]), tonumber(ARGV[ARG0 + 6]), tonumber(ARGV[ARG0 + 7])
local want_fk = ARGV[ARG0 + 8] or ''
local lane_lo = want_fk .. '\0' -- the filtered lane's members start with it

local SETS = { W = K_WAITING, I = K_INFLIGHT, P = K_PURGE, D = K_DEAD, L = K_LWAIT }
local PHASES = {
  pending = { { 'W', 'p' }, { 'L', 'p' } },
  processing = { { 'I', 'f' }, { 'W', 'r' }, { 'L', 'r' } },
  awaiting_ack = { { 'I', 'w' } },
  completed = { { 'P', 'c' } },
  dead = { { 'D', 'd' } },
}
if want_fk ~= '' then
  -- A lane's waiting jobs are all in K_LWAIT.
  PHASES.pending = { { 'L', 'p' } }
  PHASES.processing = { { 'I', 'f' }, { 'L', 'r' } }
end
local DESC = { P = true, D = true }

local phases = PHASES[status]
if not phases then return redis.error_reply('lists: unknown status ' .. tostring(status)) end
local pi = 1
if phase ~= '' then
  pi = nil
  for i, p in ipairs(phases) do
    if p[1] == phase then pi = i end
  end
  if not pi then return redis.error_reply('lists: unknown phase ' .. tostring(phase)) end
end

-- The rank to start at in set key after the cursor (score, member), and
-- whether entries at that rank may still be at or before the cursor (the
-- cursor's job has moved: skip those of its score up to its member).
local function start_rank(key, desc)
  if key == K_LWAIT then
    -- All scores 0: positions are lexicographic.
    if cur_member == '' then
      if want_fk == '' then return 0, false end
      return redis.call('ZLEXCOUNT', K_LWAIT, '-', '(' .. lane_lo), false
    end
    local r = redis.call('ZRANK', K_LWAIT, cur_member)
    if r then return r + 1, false end
    return redis.call('ZLEXCOUNT', K_LWAIT, '-', '(' .. cur_member), false
  end
  if cur_member == '' then return 0, false end
  local s = redis.call('ZSCORE', key, cur_member)
  if s and s == cur_score then
    local r
    if desc then r = redis.call('ZREVRANK', key, cur_member) else r = redis.call('ZRANK', key, cur_member) end
    return r + 1, false
  end
  if desc then return redis.call('ZCOUNT', key, '(' .. cur_score, '+inf'), true end
  return redis.call('ZCOUNT', key, '-inf', '(' .. cur_score), true
end

local out = { '', '', '' }
local found, used, read = 0, 0, 0
local last_score, last_member = nil, nil
while pi <= #phases do
  local set, want = phases[pi][1], phases[pi][2]
  local key, desc = SETS[set], DESC[set]
  local from, skipping = start_rank(key, desc)
  local want_n = scan - read
  local entries
  if desc then
    entries = redis.call('ZREVRANGE', key, from, from + want_n - 1, 'WITHSCORES')
  else
    entries = redis.call('ZRANGE', key, from, from + want_n - 1, 'WITHSCORES')
  end
  local stopped = false
  local lane_end = false
  for i = 1, #entries, 2 do
    local id, score = entries[i], entries[i + 1]
    local member = id
    if set == 'L' then
      if want_fk ~= '' and string.sub(id, 1, #lane_lo) ~= lane_lo then
        lane_end = true -- past the filtered lane
        break
      end
      id = string.match(id, '%z([^%z]*)$')
    end
    local before = false
    if skipping then
      if score == cur_score and ((desc and id >= cur_member) or (not desc and id <= cur_member)) then
        before = true
      else
        skipping = false
      end
    end
    if found >= limit then
      stopped = true
      break
    end
    local size = 0
    if not before and id ~= PLACEHOLDER then size = redis.call('HSTRLEN', K_JOBS, id) end
    if found > 0 and used + size > bytes then
      stopped = true
      break
    end
    read = read + 1
    last_score, last_member = score, member
    if not before and id ~= PLACEHOLDER then
      local rec = redis.call('HGET', K_JOBS, id)
      if rec then
        local st = record_state(rec)
        local lease = ''
        if set == 'I' and st ~= 'w' then
          lease = redis.call('HGET', K_LEASES, id) or ''
          if lease ~= '' then st = 'f' end
        end
        if st == want and want_fk ~= '' and set ~= 'L' then
          -- Another set than the lane's own: compare the record's flow key.
          local m = split_record(rec)
          if m.fk ~= want_fk then st = '' end
        end
        if st == want then
          used = used + size
          found = found + 1
          out[#out + 1] = id
          out[#out + 1] = rec
          out[#out + 1] = lease
          out[#out + 1] = redis.call('HGET', K_HIST, id) or ''
        end
      end
    end
  end
  if lane_end then stopped = false end
  if (stopped or read >= scan) and not lane_end then
    if last_member then
      out[1], out[2], out[3] = set, last_score, last_member
    else
      out[1], out[2], out[3] = set, cur_score, cur_member
    end
    return out
  end
  -- This set is read to its end: the next phase starts at its beginning.
  pi = pi + 1
  cur_score, cur_member = '', ''
  last_score, last_member = nil, nil
end
return out
