-- lanes.lua — flow keys (keys.md): many downstreams inside one queue.
-- Prepended after lib.lua (and hold.lua), before each script's body.
--
-- A job published with a flowKey belongs to that key's lane. A lane has its
-- own limits (flowKeys.concurrency and rateLimitMax, or its override), its
-- own hold and its own probe (hold.lua, the same functions the queue uses),
-- and the lanes that can start share the claim in weighted round-robin
-- order (stride scheduling on a virtual time). Jobs without a key are the
-- default lane, K_WAITING, which takes part in the round-robin with weight 1
-- and whose backpressure holds the whole queue.
--
-- A lane's state is one packed field of K_LANES (fk -> value):
--   nw|nf|na|held|until|probe|pass|at|atv|w|conc|rmax|reason
--   nw waiting jobs, nf in flight, na awaiting ack; held "1" while a hold
--   or its probing lasts, until its release (ms, Redis' clock), probe the
--   job id of its probe in flight ("" none); pass its virtual time; at where
--   the lane is placed ("r" K_LREADY with score atv, "t" K_LTIMED at atv, ""
--   neither: empty, capped, or its probe is out); w, conc, rmax its
--   overrides ("" none: weight 1 and the queue's flowKeys settings); reason
--   the hold's reason (free text, last, may hold "|").
-- Placement is kept exact by every script that changes a lane: each change
-- marks the lane, and LANE.flush re-places and writes every marked lane
-- once per call. A change that cannot move a lane (a job leaving a ready
-- or timed lane, a job published to a ready lane) keeps it where it is,
-- and a lane that LANE.take leaves ready goes back at its new pass without
-- its members being read: should none be due after all, its next visit
-- places it. A lane with no jobs, no override and no hold has no field
-- and no member anywhere: it occupies nothing.
--
-- Costs: a call reads the lanes it visits with one HMGET and writes them
-- with one HSET; a claim reads K_LREADY a batch at a time and writes the
-- new passes with one ZADD and the taken K_LWAIT members with one ZREM.
-- A visit takes up to LANE_BURST jobs of the lane in a row, read with one
-- ZRANGEBYLEX in K_LWAIT (O(log jobs)), so a backlogged lane is decoded,
-- read and written once per burst, not once per job. An empty, held or capped
-- lane is in no set that a claim reads. A lane is decoded only when a step
-- needs its state: a job completed on settle's fast path counts against
-- its lane undecoded (LANE.complete), and a ready or timed lane that
-- nothing else in the call reads has its field's in-flight count edited as
-- a string at LANE.flush.

-- Loaded on first use: the whole machine below is defined inside
-- lanes_load, which the first access to a LANE member that is not yet
-- there runs (LANE's metatable). A script call that touches no keyed job
-- (a queue whose publishers never send a key) creates none of these
-- functions: the prelude's cost per call is mostly creating closures.

local lanes_loaded = false
local function lanes_load()
if lanes_loaded then return end
lanes_loaded = true

-- Virtual time one start costs a lane of weight w: LANE_STRIDE / w, rounded
-- down. Passes and the queue's virtual time are integers (formatted with
-- %d, not %.17g); the rounding shifts a share by at most w in 10^6.
local LANE_STRIDE = 1000000

-- The most jobs one visit of LANE.take takes from a lane in a row (and
-- never more than half a claim, rounded up: keys.md §4's bound).
local LANE_BURST = 8

-- The per-call state, set by LANE.reset (at the end of lanes_load, and by
-- call_begin at the start of every later call):
local lane_cache       -- fk -> lane, read once per call
local lane_marked      -- lanes to place and write at LANE.flush
local lane_mark_set
local lane_kw          -- change of K_STATE kw (keyed jobs waiting) in this call
local lane_vt          -- the queue's virtual time (K_STATE lvt), read once
local lane_vt_dirty
local lane_dpass       -- the default lane's pass (K_STATE dpass)
-- LANE.fresh_probe: job ids taken as a lane's probe by this call;
-- LANE.stats: the lane holds, probes and reopenings this call counted.

-- Runs cmd on key with the values of vs (pairs kept whole), in chunks
-- that stay well inside Lua's unpack limit.
local function lane_call_all(cmd, key, vs)
  local n = #vs
  if n <= 4000 then
    if n > 0 then redis.call(cmd, key, unpack(vs)) end
    return
  end
  for i = 1, n, 4000 do redis.call(cmd, key, unpack(vs, i, math.min(i + 3999, n))) end
end

-- One pattern match decodes a lane, one format encodes it: a lane is
-- decoded and encoded once per call that visits it, and with many lanes
-- that is once per job.
local LANE_FIELDS = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'

local function lane_decode(fk, v)
  if v then
    local nw, nf, na, held, u, probe, pass, at, atv, w, conc, rmax, reason = string.match(v, LANE_FIELDS)
    if nw then
      local L = { fk = fk, nw = tonumber(nw) or 0, nf = tonumber(nf) or 0, na = tonumber(na) or 0,
        held = held == '1', until_ms = tonumber(u) or 0, probe = probe, pass = tonumber(pass) or 0,
        at = at, atv = atv, w = w, conc = conc, rmax = rmax, reason = reason, fresh = false }
      L.was_held, L.was_until = L.held, L.until_ms
      return L
    end
  end
  return { fk = fk, nw = 0, nf = 0, na = 0, held = false, until_ms = 0, probe = '', pass = 0,
    at = '', atv = '', w = '', conc = '', rmax = '', reason = '', fresh = true,
    was_held = false, was_until = 0 }
end

local function lane_encode(L)
  return fmt('%d|%d|%d|%s|%d|%s|%d|%s|%s|%s|%s|%s|%s', L.nw, L.nf, L.na, L.held and '1' or '0',
    L.until_ms, L.probe, L.pass, L.at, L.atv, L.w, L.conc, L.rmax, L.reason)
end

-- Lanes read but not decoded yet: fk -> its field's value (false: none).
-- A lane is decoded on its first lane_get; until then a completed job of
-- the lane only counts in lane_dnf (LANE.complete), a job published to a
-- ready lane only in lane_dnw (LANE.published_members), and a lane no
-- other step decodes has its field edited as a string at LANE.flush.
local lane_raw
local lane_dnf   -- fk -> jobs that left in flight, not yet in nf
local lane_dnw   -- fk -> jobs published, not yet in nw
local lane_dlist -- the keys of lane_dnf and lane_dnw, in order

-- Where a lane's field places it (the byte of at: 114 'r', 116 't'), and
-- the positions of its first two separators (around nf).
local function lane_raw_at(v)
  local p1 = string.find(v, '|', 1, true)
  local p2 = string.find(v, '|', p1 + 1, true)
  local q = p2
  for _ = 3, 7 do q = string.find(v, '|', q + 1, true) end
  return string.byte(v, q + 1), p1, p2
end

-- Counts a change not yet in a lane's field, for LANE.flush's edit.
local function lane_defer(t, fk, n)
  if not lane_dnf[fk] and not lane_dnw[fk] then lane_dlist[#lane_dlist + 1] = fk end
  t[fk] = (t[fk] or 0) + n
end

local lane_touch -- below

local function lane_get(fk)
  local L = lane_cache[fk]
  if not L then
    local v = lane_raw[fk]
    if v == nil then v = redis.call('HGET', K_LANES, fk) end
    L = lane_decode(fk, v or nil)
    lane_cache[fk] = L
    local d, a = lane_dnf[fk], lane_dnw[fk]
    if d or a then
      lane_dnf[fk], lane_dnw[fk] = nil, nil
      L.nf = math.max(0, L.nf - (d or 0))
      L.nw = L.nw + (a or 0)
      lane_touch(L)
    end
  end
  return L
end

-- Reads the lanes of fks that this call has not read yet with one HMGET.
local function lane_prefetch(fks)
  local want = {}
  for _, fk in ipairs(fks) do
    if not lane_cache[fk] and lane_raw[fk] == nil then
      want[#want + 1] = fk
      lane_raw[fk] = false -- asked for: a repeat in fks is not asked twice
    end
  end
  if #want == 0 then return end
  local vs = redis.call('HMGET', K_LANES, unpack(want))
  for i, fk in ipairs(want) do lane_raw[fk] = vs[i] or false end
end

local function lane_mark(L)
  L.placed = false -- changed: LANE.flush places it again
  if not lane_mark_set[L.fk] then
    lane_mark_set[L.fk] = true
    lane_marked[#lane_marked + 1] = L
  end
end

-- Marks a lane whose counters changed in a way that cannot move it (a job
-- left in flight): a lane that is ready or timed stays where it is, so
-- LANE.flush writes it without placing it again (no command but its
-- field's write). A lane that is nowhere (capped, its probe out, empty)
-- is placed again: the freed slot may let it start.
lane_touch = function(L)
  if L.placed == nil and L.at ~= '' then L.placed = true end
  if L.at == '' then L.placed = false end
  if not lane_mark_set[L.fk] then
    lane_mark_set[L.fk] = true
    lane_marked[#lane_marked + 1] = L
  end
end

-- K_LWAIT members taken by LANE.take, removed with one ZREM: before any
-- read of the lane's members (lane_first_due) and at LANE.flush.
local lane_rem
local function lane_rem_flush()
  if #lane_rem == 0 then return end
  lane_call_all('ZREM', K_LWAIT, lane_rem)
  lane_rem = {}
  for _, L in pairs(lane_cache) do
    if L then L.nrem = nil end
  end
end

local function lane_weight(L) return tonumber(L.w) or 1 end
local function lane_conc(L) return tonumber(L.conc) or P.fk_conc end
local function lane_rmax(L) return tonumber(L.rmax) or P.fk_rmax end

local function lane_vnow()
  if lane_vt == nil then
    local v = redis.call('HMGET', K_STATE, 'lvt', 'dpass')
    lane_vt, lane_dpass = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  end
  return lane_vt
end

-- The K_LWAIT member of job id of lane fk, priority pri, due at due (ms).
local function lane_member(fk, pri, due, id)
  return fk .. '\0' .. string.char(57 - (tonumber(pri) or 0)) .. fmt('%013d', due) .. '\0' .. id
end

-- The due time (a number) and job id of a lane's member.
local function lane_member_due(mem, fk)
  local off = #fk + 2 -- the level byte
  return tonumber(string.sub(mem, off + 1, off + 13)), string.sub(mem, off + 15)
end

-- A lane's next job to deliver at now: the first due member in priority
-- order, walking only the levels present; and the lane's earliest due time
-- (nil when nothing waits), for K_LTIMED.
local function lane_first_due(fk, now)
  local C = lane_cache[fk]
  if C and C.nrem then lane_rem_flush() end
  local hi = '(' .. fk .. '\1'
  local m = redis.call('ZRANGEBYLEX', K_LWAIT, '[' .. fk .. '\0', hi, 'LIMIT', 0, 1)[1]
  local best = nil
  local off = #fk + 2
  while m do
    local d = tonumber(string.sub(m, off + 1, off + 13))
    if d <= now then return m, d end
    if best == nil or d < best then best = d end
    local lvl = string.byte(m, off)
    if lvl >= 57 then break end
    m = redis.call('ZRANGEBYLEX', K_LWAIT, '[' .. fk .. '\0' .. string.char(lvl + 1), hi, 'LIMIT', 0, 1)[1]
  end
  return nil, best
end

-- A sorted set's score as a number. Redis answers a round score such as
-- 1e8 as "100000000"; the embedded store (miniredis) as "1e+8", which its
-- Lua's tonumber reads only with a fraction ("1.0e+8").
local function lane_score(s)
  return tonumber(s) or tonumber((string.gsub(s, '^(-?%d+)([eE])', '%1.0%2')))
end

-- A lane's starts in the sliding window at now, and the oldest start.
local function lane_rate(L, now)
  local lo, hi = '[' .. L.fk .. '\0', '(' .. L.fk .. '\1'
  -- A start exactly a window old still counts, as for the queue.
  redis.call('ZREMRANGEBYLEX', K_LSTARTS, lo, '(' .. L.fk .. '\0' .. fmt('%013d', now - P.fk_rwin))
  local used = redis.call('ZLEXCOUNT', K_LSTARTS, lo, hi)
  if used == 0 then return 0, nil end
  local first = redis.call('ZRANGEBYLEX', K_LSTARTS, lo, hi, 'LIMIT', 0, 1)[1]
  return used, tonumber(string.sub(first, #L.fk + 2, #L.fk + 14))
end

-- Moves a lane to at ('r' ready with score, 't' timed at score, '' none).
local function lane_set_at(L, at, score)
  if L.at == at and (at == '' or L.atv == score) and not L.zpend then return end
  L.zpend = nil
  if L.at == 'r' and at ~= 'r' then
    redis.call('ZREM', K_LREADY, L.fk)
  elseif L.at == 't' and at ~= 't' then
    redis.call('ZREM', K_LTIMED, L.fk)
  end
  if at == 'r' then
    redis.call('ZADD', K_LREADY, score, L.fk)
  elseif at == 't' then
    redis.call('ZADD', K_LTIMED, score, L.fk)
  end
  L.at, L.atv = at, score
end

-- Where a lane belongs at now (keys.md §3, §4): held until its release;
-- while probing, nowhere once its probe is out; capped by its concurrency;
-- timed by its rate window or its next due job; else ready.
local function lane_place(L, now)
  L.placed = true
  local gate = hold_gate(L, now, function(id)
    return LANE.fresh_probe[id] or redis.call('ZSCORE', K_INFLIGHT, id) ~= false
  end)
  if gate == 'held' then return lane_set_at(L, 't', fmt('%d', L.until_ms)) end
  if L.nw <= 0 or gate == 'probing' then return lane_set_at(L, '', '') end
  local conc = lane_conc(L)
  if conc > 0 and L.nf + L.na >= conc then return lane_set_at(L, '', '') end
  if lane_rmax(L) > 0 then
    local used, oldest = lane_rate(L, now)
    if used >= lane_rmax(L) then return lane_set_at(L, 't', fmt('%d', oldest + P.fk_rwin + 1)) end
  end
  local mem, due = lane_first_due(L.fk, now)
  if mem then L.buf, L.bi = { mem }, 1 else L.buf = nil end -- for LANE.take in this same call
  if mem then
    -- A lane joining the round starts at the queue's virtual time: no
    -- credit for the time it could not start.
    if L.at ~= 'r' and L.pass < lane_vnow() then L.pass = lane_vnow() end
    return lane_set_at(L, 'r', fmt('%d', L.pass))
  end
  if due then return lane_set_at(L, 't', fmt('%d', due)) end
  lane_set_at(L, '', '')
end

-- A lane's next job to deliver at now and its due time, as lane_first_due
-- finds it, from the members read ahead when there are: LANE.take asks for
-- the ahead jobs its visit may still take, and they are read with one
-- ZRANGEBYLEX instead of one per job. A member read ahead is the lane's
-- first remaining one, so when it is due it is the job lane_first_due
-- would give; when it is not, the lane's levels are walked.
local function lane_next(L, now, ahead)
  local buf = L.buf
  if buf then
    local m = buf[L.bi]
    if m then
      local off = #L.fk + 2
      local due = tonumber(string.sub(m, off + 1, off + 13))
      if due <= now then
        L.bi = L.bi + 1
        return m, due
      end
    end
    L.buf = nil
  end
  if ahead > 1 then
    if L.nrem then lane_rem_flush() end
    local ms = redis.call('ZRANGEBYLEX', K_LWAIT, '[' .. L.fk .. '\0', '(' .. L.fk .. '\1', 'LIMIT', 0, ahead)
    if ms[1] then
      L.buf, L.bi = ms, 1
      local m, due = lane_next(L, now, 0)
      if m then return m, due end
    end
  end
  return lane_first_due(L.fk, now)
end

-- Writes a placed lane: its field (w, into the HSET pairs), or none when it
-- occupies nothing (del, the fields to delete), and its entry in K_LHELD.
local function lane_write(L, w, del)
  if L.nw > 0 or L.nf > 0 or L.na > 0 or L.held or L.w ~= '' or L.conc ~= '' or L.rmax ~= '' then
    w[#w + 1] = L.fk
    w[#w + 1] = lane_encode(L)
  else
    lane_set_at(L, '', '')
    if not L.fresh then del[#del + 1] = L.fk end
    L.fresh = true
  end
  if L.held and (not L.was_held or L.was_until ~= L.until_ms) then
    redis.call('ZADD', K_LHELD, fmt('%d', L.until_ms), L.fk)
  elseif not L.held and L.was_held then
    redis.call('ZREM', K_LHELD, L.fk)
  end
  L.was_held, L.was_until = L.held, L.until_ms
end

-- Places and writes every lane this call changed, and the queue's lane
-- counters. Called at the end of every script that moves keyed jobs.
-- place_only (settle.lua before its claim) places the lanes, so that the
-- claim sees them where they belong, and leaves their writes to the
-- claim's own flush: a lane settled and claimed in one call is written once.
function LANE.flush(now, place_only)
  lane_rem_flush()
  -- Lanes that jobs left (LANE.complete) or were published to (a ready
  -- lane, LANE.published_members) and no step decoded: one that is ready
  -- or timed stays where it is, so its field's nw and nf are edited as a
  -- string (at the final flush: a claim in this call may still decode
  -- it); one that is nowhere (capped, or its probe out) may start again
  -- and is decoded and placed.
  local raw_w = nil
  if #lane_dlist > 0 then
    local keep = {}
    for _, fk in ipairs(lane_dlist) do
      local d, a = lane_dnf[fk], lane_dnw[fk]
      if d or a then
        local v = lane_raw[fk]
        local at, p1, p2 = lane_raw_at(v)
        if at ~= 114 and at ~= 116 then -- neither 'r' nor 't'
          lane_get(fk)
        elseif place_only then
          keep[#keep + 1] = fk
        else
          local nv = ((tonumber(string.sub(v, 1, p1 - 1)) or 0) + (a or 0)) .. '|' ..
            math.max(0, (tonumber(string.sub(v, p1 + 1, p2 - 1)) or 0) - (d or 0)) .. string.sub(v, p2)
          lane_raw[fk], lane_dnf[fk], lane_dnw[fk] = nv, nil, nil
          raw_w = raw_w or {}
          raw_w[#raw_w + 1] = fk
          raw_w[#raw_w + 1] = nv
        end
      end
    end
    lane_dlist = keep
  end
  local ready = {}
  for _, L in ipairs(lane_marked) do
    -- A lane LANE.take placed after its last change is where it belongs.
    if not L.placed then lane_place(L, now) end
    if L.zpend then
      ready[#ready + 1] = L.atv
      ready[#ready + 1] = L.fk
      L.zpend = nil
    end
  end
  lane_call_all('ZADD', K_LREADY, ready)
  if place_only then return end
  local w, del = raw_w or {}, {}
  for _, L in ipairs(lane_marked) do lane_write(L, w, del) end
  lane_call_all('HSET', K_LANES, w)
  lane_call_all('HDEL', K_LANES, del)
  lane_marked, lane_mark_set = {}, {}
  if lane_kw ~= 0 then
    redis.call('HINCRBY', K_STATE, 'kw', lane_kw)
    lane_kw = 0
  end
  if lane_vt_dirty then
    redis.call('HSET', K_STATE, 'lvt', fmt('%d', lane_vt), 'dpass', fmt('%d', lane_dpass))
    lane_vt_dirty = false
  end
end

-- A keyed job leaves in-flight (m.st f or w): its lane's slot is free.
function LANE.leave(m)
  local L = lane_get(m.fk)
  if m.st == 'w' then
    if L.na > 0 then L.na = L.na - 1 end
  elseif L.nf > 0 then
    L.nf = L.nf - 1
  end
  lane_touch(L)
end

-- A keyed job completed on settle's fast path (2xx, standard mode, its
-- first delivery): its lane's slot is free. Returns false, changing
-- nothing, when the job may be its lane's probe (settle takes the general
-- path). A lane no other step of the call decodes is not decoded at all:
-- the job counts in lane_dnf, and LANE.flush edits the lane's field.
function LANE.complete(fk, id)
  local L = lane_cache[fk]
  if not L then
    local v = lane_raw[fk]
    if v == nil then
      v = redis.call('HGET', K_LANES, fk) or false
      lane_raw[fk] = v
    end
    -- The id anywhere in the field (its probe, or a reason's text): decode.
    if v and not string.find(v, id, 1, true) then
      lane_defer(lane_dnf, fk, 1)
      return true
    end
    L = lane_get(fk)
  end
  if L.probe == id then return false end
  if L.nf > 0 then L.nf = L.nf - 1 end
  lane_touch(L)
  return true
end

-- A keyed job's webhook answered 2xx in ack mode: in flight -> awaiting ack.
function LANE.to_ack(m)
  local L = lane_get(m.fk)
  if L.nf > 0 then L.nf = L.nf - 1 end
  L.na = L.na + 1
  lane_touch(L)
end

-- A keyed job (back) to waiting, due at due.
function LANE.wait(id, m, due)
  local L = lane_get(m.fk)
  redis.call('ZADD', K_LWAIT, 0, lane_member(m.fk, m.pri, due, id))
  L.buf = nil
  L.nw = L.nw + 1
  lane_kw = lane_kw + 1
  lane_mark(L)
end

-- Keyed jobs published (publish.lua, schedule.lua): lwait holds the
-- score and member pairs the caller added to K_LWAIT. Their lanes are read
-- with one HMGET. A ready lane stays where it is; an empty lane that can
-- start at once (no hold, no cap, no rate limit, a job due now) joins the
-- ready set at the queue's virtual time without its members being read;
-- any other lane is placed. A ready lane that nothing in the call decoded
-- is not decoded at all: its field's nw is edited at LANE.flush.
function LANE.published_members(lwait, now)
  local order, count, first = {}, {}, {}
  for i = 2, #lwait, 2 do
    local m = lwait[i]
    local z = string.find(m, '\0', 1, true)
    local fk = string.sub(m, 1, z - 1)
    local due = tonumber(string.sub(m, z + 2, z + 14))
    if not count[fk] then
      count[fk], first[fk] = 0, due
      order[#order + 1] = fk
    elseif due < first[fk] then
      first[fk] = due
    end
    count[fk] = count[fk] + 1
  end
  lane_prefetch(order)
  for _, fk in ipairs(order) do
    local v = not lane_cache[fk] and lane_raw[fk]
    if v and lane_raw_at(v) == 114 then -- 'r': it stays where it is
      lane_defer(lane_dnw, fk, count[fk])
      lane_kw = lane_kw + count[fk]
    else
      local L = lane_get(fk)
      local was_empty = L.nw == 0 and L.nf + L.na == 0
      L.buf = nil
      L.nw = L.nw + count[fk]
      lane_kw = lane_kw + count[fk]
      if L.at == 'r' then
        lane_touch(L)
      elseif was_empty and L.at == '' and not L.held and first[fk] <= now and lane_rmax(L) <= 0 then
        lane_mark(L)
        if L.pass < lane_vnow() then L.pass = lane_vnow() end
        L.at, L.atv, L.zpend, L.placed = 'r', fmt('%d', L.pass), true, true
      else
        lane_mark(L)
      end
    end
  end
end

-- Takes a waiting keyed job out of its lane (cancel, an ended lifetime).
-- Returns whether it was there.
function LANE.unwait(id, m)
  if redis.call('ZREM', K_LWAIT, lane_member(m.fk, m.pri, m.wd or m.s, id)) == 0 then return false end
  local L = lane_get(m.fk)
  L.buf = nil
  if L.nw > 0 then L.nw = L.nw - 1 end
  lane_kw = lane_kw - 1
  lane_mark(L)
  return true
end

-- Whether job id is its lane's probe.
function LANE.is_probe(m, id)
  local L = lane_get(m.fk)
  return L.held and L.probe == id
end

-- The delivery of job id ended: if it was its lane's probe, a success
-- reopens the lane (unless a defer pushed the release out meanwhile), and
-- anything else makes the lane's next job the probe.
function LANE.end_probe(m, id, success, now)
  local L = lane_get(m.fk)
  if L.probe ~= id then return end
  if hold_end_probe(L, id, success, now) then LANE.stats.kreopen = LANE.stats.kreopen + 1 end
  lane_mark(L)
end

-- Backpressure for a keyed job with scope key: its lane is held until the
-- latest release asked for (hold.lua).
function LANE.defer(m, release, reason)
  local L = lane_get(m.fk)
  hold_apply(L, release, reason)
  LANE.stats.khold = LANE.stats.khold + 1
  lane_mark(L)
end

-- A keyed job taken by claim_jobs turned out to have outlived its
-- lifetime: it is not in flight after all.
function LANE.untake(L, id)
  if L.nf > 0 then L.nf = L.nf - 1 end
  if L.probe == id then L.probe = '' end
  LANE.fresh_probe[id] = nil
  lane_mark(L)
end

-- The default lane's next due job at now: {id, score} or false.
local function default_next(now)
  local d = redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
  if d[2] and tonumber(d[2]) < 0 then d = due_by_priority(now, 1) end
  if not d[1] then return false end
  return d
end

-- claim_jobs' keyed path: up to max due jobs, lane by lane in weighted
-- round-robin order (keys.md §4), the default lane among them. Returns the
-- ids, their due times (strings, for the lease token), the lanes of keyed
-- ones (id -> lane) and the earliest time a timed lane needs a claim.
-- probing: the queue's hold has ended and this one job is its probe.
function LANE.take(now, max, probing)
  -- Lanes whose time has come (a job fell due, a hold released, a rate
  -- slot freed) are placed again, a bounded batch per call.
  local due_lanes = redis.call('ZRANGEBYSCORE', K_LTIMED, '-inf', now, 'LIMIT', 0, 64)
  lane_prefetch(due_lanes)
  for _, fk in ipairs(due_lanes) do
    local L = lane_get(fk)
    L.atv = '' -- its timed score is spent: place it anew
    lane_mark(L)
    lane_place(L, now)
  end
  lane_vnow()
  local ids, scores, lanes_of = {}, {}, {}
  local ddue = nil
  local guard = 0
  -- The ready lanes in pass order, read a batch at a time: cand, the head
  -- of K_LREADY as last read (the next at ci), and pend, the lanes this
  -- call took a job from that can start again, at passes not yet written
  -- (LANE.flush writes them with one ZADD). complete: cand held every
  -- ready lane, so nothing unread can come before pend's lanes. A claim of
  -- n jobs from n lanes reads K_LREADY once, not n times.
  local cand, ci, complete, pend = {}, 1, false, {}
  local function fetch()
    local z = {}
    for _, L in ipairs(pend) do
      if L.zpend then
        z[#z + 1] = L.atv
        z[#z + 1] = L.fk
        L.zpend = nil
      end
    end
    lane_call_all('ZADD', K_LREADY, z)
    pend = {}
    local want = math.max(max - #ids, 1)
    local top = redis.call('ZRANGE', K_LREADY, 0, want - 1, 'WITHSCORES')
    cand, ci = {}, 1
    local fks = {}
    for i = 1, #top, 2 do
      cand[#cand + 1] = { top[i], lane_score(top[i + 1]) }
      fks[#fks + 1] = top[i]
    end
    complete = #cand < want
    lane_prefetch(fks)
  end
  local function pend_insert(L)
    local lo, hi = 1, #pend + 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if pend[mid].pass <= L.pass then lo = mid + 1 else hi = mid end
    end
    table.insert(pend, lo, L)
  end
  -- The ready lane with the lowest pass: its key, pass and where it came from.
  local function pick()
    for _ = 1, 2 do
      local c, p = cand[ci], pend[1]
      if c and (not p or c[2] <= p.pass) then return c[1], c[2], 'c' end
      if p and (c or complete) then return p.fk, p.pass, 'p' end
      if complete then return nil end
      fetch() -- cand is spent and more lanes may be ready
    end
    return nil
  end
  fetch()
  while #ids < max and guard < 2 * max + 8 do
    guard = guard + 1
    if ddue == nil then ddue = default_next(now) end
    local fk, lpass, from = pick()
    if not fk then
      if not ddue then break end
      -- Only the default lane can start: the rest in one range, as
      -- without keys.
      local rest = redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max - #ids)
      if rest[2] and tonumber(rest[2]) < 0 then rest = due_by_priority(now, max - #ids) end
      local got = {}
      for i = 1, #rest, 2 do
        got[#got + 1] = rest[i]
        ids[#ids + 1] = rest[i]
        local sc = rest[i + 1]
        if string.byte(sc, 1) == 45 then sc = fmt('%d', wait_due(tonumber(sc))) end
        scores[#scores + 1] = sc
      end
      if #got > 0 then
        redis.call('ZREM', K_WAITING, unpack(got))
        if lane_dpass < lane_vt then lane_dpass = lane_vt end
        lane_vt = lane_dpass
        lane_dpass = lane_dpass + LANE_STRIDE * #got
        lane_vt_dirty = true
      end
      break
    end
    if lane_dpass < lane_vt then lane_dpass = lane_vt end
    if ddue and lane_dpass <= lpass then
      -- The default lane's turn.
      local id, sc = ddue[1], ddue[2]
      redis.call('ZREM', K_WAITING, id)
      ids[#ids + 1] = id
      if string.byte(sc, 1) == 45 then sc = fmt('%d', wait_due(tonumber(sc))) end
      scores[#scores + 1] = sc
      lane_vt = lane_dpass
      lane_dpass = lane_dpass + LANE_STRIDE
      lane_vt_dirty = true
      ddue = nil
    else
      if from == 'c' then ci = ci + 1 else table.remove(pend, 1) end
      local L = lane_get(fk)
      -- A lane placed ready under limits since lowered (a reload of
      -- flowKeys) may be over the ones in force: it starts nothing more.
      local conc, rmax = lane_conc(L), lane_rmax(L)
      -- A visit takes up to burst jobs in a row, each at its own pass, so
      -- that a lane's decoding, writing and next-member read are paid once
      -- per burst, not once per job. The passes of ready lanes then stay
      -- within burst strides of each other, so starts per weight of two
      -- lanes differ by at most 2 * burst <= max + 1 <= claimBatch + 1
      -- (keys.md §4).
      local burst = math.max(1, math.min(LANE_BURST, max - #ids, math.floor((max + 1) / 2)))
      local took = 0
      while true do
        local over = conc > 0 and L.nf + L.na >= conc
        if not over and rmax > 0 then over = lane_rate(L, now) >= rmax end
        local mem, due = nil, nil
        if not over then mem, due = lane_next(L, now, burst - took) end
        if over or not mem then
          lane_mark(L)
          lane_place(L, now) -- capped, or nothing due after all: out of the ready set
          break
        end
        lane_rem[#lane_rem + 1] = mem
        L.nrem = true
        local _, id = lane_member_due(mem, L.fk)
        ids[#ids + 1] = id
        scores[#scores + 1] = fmt('%d', due)
        lanes_of[id] = L
        L.nw = L.nw - 1
        L.nf = L.nf + 1
        lane_kw = lane_kw - 1
        took = took + 1
        -- The queue's virtual time is the pass the visit started at: the
        -- lowest of the ready lanes, whatever the burst adds to this one.
        if took == 1 and lpass > lane_vt then lane_vt = lpass end
        lane_vt_dirty = true
        if took == 1 then L.pass = lpass end -- its score in K_LREADY
        L.pass = L.pass + math.floor(LANE_STRIDE / lane_weight(L))
        if L.held then
          -- The lane's hold has ended: this job is its one probe.
          hold_take_probe(L, id)
          LANE.fresh_probe[id] = true
          LANE.stats.kprobe = LANE.stats.kprobe + 1
        end
        if rmax > 0 then
          redis.call('ZADD', K_LSTARTS, 0, L.fk .. '\0' .. fmt('%013d', now) .. '\0' .. id)
        end
        lane_mark(L)
        if not (not L.held and L.at == 'r' and L.nw > 0 and rmax <= 0 and (conc <= 0 or L.nf + L.na < conc)) then
          lane_place(L, now)
          break
        end
        -- Still ready, at its new pass: written by LANE.flush. Should none
        -- of its jobs be due after all, its next visit places it.
        L.placed = true
        L.zpend = true
        if took >= burst or #ids >= max then
          L.atv = fmt('%d', L.pass)
          break
        end
      end
      if L.at == 'r' then pend_insert(L) end
    end
  end
  lane_rem_flush()
  local wake = nil
  local first = redis.call('ZRANGE', K_LTIMED, 0, 0, 'WITHSCORES')
  if first[2] then wake = lane_score(first[2]) end
  return ids, scores, lanes_of, wake
end

-- Reads, with one HMGET, the lanes of the keyed jobs among records recs
-- from index from on (settle.lua, before it frees their slots).
function LANE.prefetch_records(recs, from)
  local fks = {}
  for i = from, #recs do
    local rec = recs[i]
    if rec then
      local p = string.find(rec, '"st":"', 1, true)
      local fk = p and record_flow_key_at(rec, p + 8)
      if fk then fks[#fks + 1] = fk end
    end
  end
  lane_prefetch(fks)
end

-- Reads a lane for the keys endpoints (keys.lua, control.lua): nil when the
-- lane has no field.
local function lane_read(fk)
  local v = redis.call('HGET', K_LANES, fk)
  if not v then return nil end
  return lane_get(fk)
end

-- The lane functions scripts call by name.
LANE.member, LANE.member_due, LANE.get, LANE.mark = lane_member, lane_member_due, lane_get, lane_mark
LANE.touch = lane_touch
LANE.encode, LANE.decode, LANE.read = lane_encode, lane_decode, lane_read

-- The per-call state above starts afresh here and for each later call
-- (call_begin): a Functions library keeps the machine loaded between calls.
LANE.reset = function()
  lane_cache, lane_marked, lane_mark_set, lane_kw = {}, {}, {}, 0
  lane_vt, lane_vt_dirty, lane_dpass = nil, false, nil
  LANE.fresh_probe, LANE.stats = {}, { khold = 0, kprobe = 0, kreopen = 0 }
  lane_raw, lane_dnf, lane_dnw, lane_dlist, lane_rem = {}, {}, {}, {}, {}
end
LANE.reset()
end

setmetatable(LANE, { __index = function(t, k)
  lanes_load()
  return rawget(t, k)
end })
