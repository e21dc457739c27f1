-- lib.lua — shared prelude, prepended to every script by package lua.
--
-- Keys (all carry the queue's hash tag, so every script runs on one cluster slot):
--   K_WAITING   KEYS[1]  ZSET  job id -> due time (ms). Ready = score <= now.
--                              Holds ready, delayed and backing-off jobs alike,
--                              so FIFO order and "next due" are one ZRANGE.
--   K_INFLIGHT  KEYS[2]  ZSET  job id -> lease deadline (ms): in flight or awaiting ack.
--                              Plus PLACEHOLDER (score +inf), see below.
--                              Plus, per delivery of a job cancelled in flight,
--                              CANCELLED_SLOT .. token until it ends (the end).
--   K_JOBS      KEYS[3]  HASH  job id -> its record (record.lua).
--   K_HIST      KEYS[4]  HASH  job id -> its history (record.lua).
--   K_STATE     KEYS[5]  HASH  queue state: hold, hold_until, probe_job, reason,
--                              paused, pause_reason, n_pending, n_awaiting;
--                              conf and confm, the queue's settings
--                              (conf.lua writes them, conf_load reads them);
--                              for a queue created over the API, the limits
--                              it set: lim_conc, lim_rmax, lim_rwin (ms),
--                              which override conf's (queuedef.lua).
--   K_LIFETIMES KEYS[6]  ZSET  job id -> end of its delivery lifetime (ms), for
--                              every waiting job (states p and r). Each job
--                              keeps its own end (x): a reload that changes
--                              jobLifetime changes only jobs published later,
--                              and housekeeping finds every ended lifetime in
--                              end order, whatever the queue is doing.
--   K_DEAD      KEYS[7]  ZSET  dead job id -> time it died (ms).
--   K_PURGE     KEYS[8]  ZSET  terminal job id -> time it may be purged (ms).
--   K_IDEM      KEYS[9]  HASH  idempotency key -> job id.
--   K_STARTS    KEYS[10] ZSET  delivery start token -> start time (ms): the
--                              sliding rate-limit window.
--   K_LEASES    KEYS[11] HASH  job id -> lease token, for jobs in flight only
--                              (plus PLACEHOLDER -> "").
--                              A claim writes only this (and K_INFLIGHT), never
--                              the job record: the record keeps st p or r while
--                              the job is in flight, and load() overlays the
--                              lease (st f, t, o, pr). The token
--                              (record.lua lease_token) carries the order
--                              and the probe flag.
-- Flow keys (keys.md; lanes.lua has the lane machine). Keyed waiting jobs
-- live in K_LWAIT, not K_WAITING, which holds the default lane (jobs with
-- no flowKey) alone, so a queue whose publishers never send a key claims
-- exactly as before keys existed:
--   K_LWAIT     KEYS[12] ZSET  (all scores 0) keyed waiting jobs, member
--                              fk \0 level due13 \0 id: lexicographic order
--                              is lane, then priority (level '0' is 9), then
--                              due time, so a lane's next job is one
--                              ZRANGEBYLEX, O(log n), whatever the lanes.
--   K_LANES     KEYS[13] HASH  fk -> the lane's packed state (lanes.lua); a
--                              lane with no jobs, no override and no hold
--                              has no field.
--   K_LREADY    KEYS[14] ZSET  fk -> virtual pass: lanes that can start now.
--   K_LTIMED    KEYS[15] ZSET  fk -> ms: lanes waiting for a time (a due job,
--                              a hold's release, a rate-window slot).
--   K_LHELD     KEYS[16] ZSET  fk -> hold release ms: held or probing lanes.
--   K_LSTARTS   KEYS[17] ZSET  (scores 0) fk \0 start13 \0 id: each lane's
--                              sliding rate-limit window (flowKeys.rateLimitMax).
-- Scripts' own keys start at KEYS[KX + 1]:
--   K_CALL      KEYS[18] STRING (claim and settle only) what the call with
--                              this token prefix did, kept 30 s: a call that
--                              Redis ran but whose reply was lost (a stall past
--                              the client's read timeout) is answered from it
--                              when sent again, so no lease belongs to nobody.
--
-- ARGV[1..ARG0]: the per-call values this script reads, in the order
-- package lua's callValues lists them for it (CALL_VALUES, the line before
-- this prelude), and no others:
--   rand  a random value in [0,1) from Go (Lua's math.random is
--         deterministic): claim, settle, callback (backoff jitter)
--   batch the maintenance batch: max items reaped/expired/purged per call:
--         claim, settle
--   lease the delivery lease (ms) of the calling daemon: its webhook timeout
--         plus its margin, so a lease always outlasts the HTTP request of the
--         daemon that holds it, even mid-way through a rolling reload: claim,
--         settle
-- The queue's rules are not in ARGV: conf_load reads them from K_STATE.
-- Script-specific arguments start at ARGV[ARG0 + 1] (ARGV[1] in a script
-- that reads no per-call value).
--
-- The job record (K_JOBS), its history (K_HIST) and the lease token
-- (K_LEASES) have one codec, record.lua (prepended before this file): its
-- header lists the meta fields, the states and the layout rules the fast
-- paths rely on. Nothing here spells the layout; it calls record.lua.

-- The keys are set from KEYS by call_begin (call.lua) at the start of every
-- call: a script's prelude may be loaded once for many calls (a Redis
-- Functions library, package lua's Library), so no call's value may be
-- read where the prelude is defined.
local K_WAITING, K_INFLIGHT, K_JOBS, K_HIST, K_STATE
local K_LIFETIMES, K_DEAD, K_PURGE, K_IDEM, K_STARTS
local K_LEASES
local K_LWAIT, K_LANES, K_LREADY, K_LTIMED, K_LHELD, K_LSTARTS
local KX = 17
local K_CALL
-- The lane machine's entry points (lanes.lua fills them in): lib.lua's
-- transitions call them for keyed jobs only, so a job without a flow key
-- pays one nil test. flush is a no-op until the machine is loaded (no lane
-- can have changed before).
local LANE = {}
LANE.flush = function() end

-- A placeholder member of K_INFLIGHT (score +inf) and field of K_LEASES
-- (value ""), present from a queue's first claim on. Redis stores a sorted
-- set or hash of up to 128 entries of up to 64 bytes as a listpack, where
-- every ZADD, ZREM, HGET and HDEL scans the whole list: with 50 jobs in
-- flight that cost ~3 µs of Redis time per delivered job, and more as
-- concurrency grows. An entry longer than 64 bytes makes Redis store the key
-- as a skiplist or hash table (O(1) and O(log n) per entry), and the
-- placeholder keeps the key from being deleted and re-created as a listpack
-- whenever the queue goes idle. It is never a job: the in-flight count
-- (in_flight) and the next lease deadline (maintain) leave it out.
local PLACEHOLDER = '~simpleqd placeholder: keeps this key a skiplist/hash table, not a job'

-- The queue's settings (P), read from K_STATE's conf field by conf_load(),
-- never from ARGV: every daemon's call enforces the one set the fleet last
-- wrote (package store writes it when its copy of the queue changes; see
-- store/doc.go), so a rolling reload never runs two sets at once. ARGV
-- carries only what is the caller's own: the random value, the
-- maintenance batch and the delivery lease. A setting read before
-- conf_load() is an error, not a silent nil, so a script that forgets to
-- load fails its first test.
-- P and ARG0 are set per call by call_begin (call.lua), with P_META.
local P, ARG0
local CALL_VALUE = { rand = true, batch = true, lease = true }
local P_META = { __index = function(_, k)
  if CALL_VALUE[k] then error('simpleqd: per-call value ' .. k .. ' not given to this script (package lua, callValues)') end
  error('simpleqd: queue setting ' .. k .. ' read before conf_load()')
end }

-- conf_load reads the settings package store wrote (conf.lua), in this
-- order: "v1", mode, concurrency, rateLimitMax, rateLimitWindow ms,
-- maxAttempts, maxDefers, the writer's delivery lease ms (not read: each
-- call brings its own, P.lease), ackTimeout ms,
-- ackTimeoutAction, backoff type, base ms, max ms, jitter, jobLifetime ms,
-- retention ms, breaker failures, breaker holdFor ms, flowKeys
-- concurrency, rateLimitMax, rateLimitWindow ms, holdScope. Fields are only
-- ever appended, so a script older than the writer reads the ones it
-- knows and one newer takes the default of those it is missing. They are
-- stored twice in one write: confm, MessagePack values one after another,
-- which Redis' cmsgpack unpacks in one C call (docs/performance.md, round
-- 16, "settings in Redis", has what that saves against splitting a text
-- in Lua), and conf, the same joined by ",", for miniredis, whose Lua has
-- no cmsgpack (unit tests only). false when the queue has none.
local CMSGPACK = rawget(_G, 'cmsgpack') -- miniredis guards reads of missing globals
local function conf_load()
  local v, mode, conc, rmax, rwin, att, defers, _lease, ackt, acka, bot, bob, bom, jit, life, ret, bf, bh, fc, fr, fw, hs
  if CMSGPACK then
    local raw = redis.call('HGET', K_STATE, 'confm')
    if not raw then return false end
    v, mode, conc, rmax, rwin, att, defers, _lease, ackt, acka, bot, bob, bom, jit, life, ret, bf, bh, fc, fr, fw, hs =
      CMSGPACK.unpack(raw)
  else
    local raw = redis.call('HGET', K_STATE, 'conf')
    if not raw then return false end
    local c, n = {}, 0
    for f in string.gmatch(raw .. ',', '([^,]*),') do
      n = n + 1
      c[n] = f
    end
    local function num(i) return tonumber(c[i]) end
    v, mode, conc, rmax, rwin = c[1], c[2], num(3), num(4), num(5)
    att, defers, ackt, acka = num(6), num(7), num(9), c[10]
    bot, bob, bom, jit, life, ret = c[11], num(12), num(13), c[14] == '1', num(15), num(16)
    bf, bh, fc, fr, fw, hs = num(17), num(18), num(19), num(20), num(21), c[22]
  end
  if v ~= 'v1' then return false end
  P.mode, P.concurrency, P.rate_max, P.rate_window = mode or 'standard', conc or 1, rmax or 0, rwin or 1000
  P.max_attempts, P.max_defers, P.ack_timeout = att or 1, defers or 0, ackt or 0
  P.ack_action, P.backoff_type, P.backoff_base, P.backoff_max = acka or 'retry', bot or 'exponential', bob or 0, bom or 0
  P.jitter, P.lifetime, P.retention = jit == true, life or 0, ret or 0
  P.breaker_failures, P.breaker_hold = bf or 0, bh or 0
  P.fk_conc, P.fk_rmax, P.fk_rwin, P.hold_scope = fc or 0, fr or 0, fw or 1000, hs or 'key'
  return true
end

-- The error a script answers, before any write, when conf_load() finds no
-- settings: every script that reads P starts with
--   if not conf_load() then return redis.error_reply(NOCONF) end
local NOCONF = 'NOCONF the queue has no settings in Redis'

-- Redis' clock, in whole milliseconds: the one clock every daemon agrees on.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Jobs in flight or awaiting ack: K_INFLIGHT without its placeholder. (A
-- finite bound, not "(+inf": every deadline is a millisecond time far below
-- it, and miniredis, used by unit tests, reads "(+inf" as inclusive.)
local LAST_DEADLINE = '9007199254740991'
local function in_flight()
  return redis.call('ZCOUNT', K_INFLIGHT, '-inf', LAST_DEADLINE)
end

-- A fresh pseudo-random value per use within one call, derived from Go's.
local rand_step = 0
local function next_rand()
  rand_step = rand_step + 1
  local r = P.rand + rand_step * 0.6180339887498949
  return r - math.floor(r)
end

local function load(id)
  local rec = redis.call('HGET', K_JOBS, id)
  if not rec then return nil, nil end
  local m, payload = split_record(rec)
  if m.st == 'p' or m.st == 'r' then overlay(m, redis.call('HGET', K_LEASES, id)) end
  return m, payload
end

-- The state a job's record shows, with a lease making p or r in flight.
local function live_state(id, st)
  if (st == 'p' or st == 'r') and redis.call('HEXISTS', K_LEASES, id) == 1 then return 'f' end
  return st
end

local function save(id, m, payload)
  redis.call('HSET', K_JOBS, id, encode_record(m, payload))
end

local function hist_append_encoded(id, e)
  -- Most jobs end with their first entry: one HSETNX instead of HGET + HSET.
  if redis.call('HSETNX', K_HIST, id, e) == 1 then return end
  redis.call('HSET', K_HIST, id, history_append(redis.call('HGET', K_HIST, id), e))
end

local function hist_append(id, entry)
  hist_append_encoded(id, encode_entry(entry))
end

local function state_get(field)
  return redis.call('HGET', K_STATE, field)
end

-- The queue's hold, a holder of hold.lua's machine (the same functions a
-- lane uses): K_STATE hold, hold_until, probe_job and reason, read once per
-- script call and kept in step with every write (settle looks at the probe
-- once per outcome).
local qhold = nil
local function queue_hold(st)
  if qhold == nil then
    local v = st or redis.call('HMGET', K_STATE, 'hold', 'hold_until', 'probe_job', 'reason')
    qhold = { held = v[1] == '1', until_ms = tonumber(v[2] or '0') or 0, probe = v[3] or '', reason = v[4] or '' }
  end
  return qhold
end

-- Writes the queue's hold as hold.lua left it.
local function queue_hold_write(h)
  redis.call('HSET', K_STATE, 'hold', h.held and '1' or '0', 'hold_until', fmt('%d', h.until_ms),
    'reason', h.reason, 'probe_job', h.probe)
end

local function probe_job()
  return queue_hold().probe
end

local function set_probe(id)
  hold_take_probe(queue_hold(), id)
  redis.call('HSET', K_STATE, 'probe_job', id)
end

local function is_probe(id)
  return probe_job() == id
end

-- The probe's delivery ended without success: the next job becomes the probe.
local hold_note
local function drop_probe(id)
  if is_probe(id) then
    hold_note('probe')
    hold_end_probe(queue_hold(), id, false, 0)
    redis.call('HSET', K_STATE, 'probe_job', '')
  end
end

-- Leaving the in-flight set: fix the awaiting-ack counter.
local function leave_inflight(id, m)
  if m.fk then LANE.leave(m) end
  redis.call('ZREM', K_INFLIGHT, id)
  if m.st == 'f' then redis.call('HDEL', K_LEASES, id) end
  if m.st == 'w' then redis.call('HINCRBY', K_STATE, 'n_awaiting', -1) end
  m.t = nil
  m.pr = nil
  m.sc = nil -- the webhook status of the delivery that just ended
end

local function backoff_ms(attempts)
  -- fixed waits base every time: max and jitter shape only the exponential
  -- schedule (config.md).
  if P.backoff_type ~= 'exponential' then return math.floor(P.backoff_base) end
  local d = P.backoff_base * math.pow(2, attempts - 1)
  if d > P.backoff_max then d = P.backoff_max end
  if P.jitter then d = d * (0.5 + 0.5 * next_rand()) end
  return math.floor(d)
end

local function purge_at(m, now)
  local t = m.c + P.retention
  if t < now then t = now end
  return t
end

-- Terminal failure. The job keeps its record (for GET and replay) until purged.
local function to_dead(id, m, payload, now, reason)
  m.st = 'd'
  m.dr = reason
  m.ca = now
  save(id, m, payload)
  redis.call('ZADD', K_DEAD, now, id)
  redis.call('ZADD', K_PURGE, fmt('%d', purge_at(m, now)), id)
  return 'DEAD', reason
end

-- Priority (control.md §2). Every level shares K_WAITING: a job of priority
-- p (1..9) waits at score due - p * PRIO_SPAN, so level 1 fills [-SPAN, 0),
-- level 2 [-2 SPAN, -SPAN) … level 9 [-9 SPAN, -8 SPAN), and priority 0
-- keeps its plain due time: the set's ascending order is the delivery order
-- (highest priority first, then due time), which job lists (lists.lua)
-- read as it is. One sorted set keeps counts, the
-- lifetime index and removal by id as they were; a queue that never sees a
-- priority pays nothing (claim_jobs' first range finds no negative score),
-- and one that does pays two range reads per level present, at most nine:
-- O(log n) whatever the backlog. SPAN, 2^43 ms, lies past any due time
-- (year 2248), and every score stays an exact double (|score| < 2^47).
local PRIO_SPAN = 8796093022208

-- The K_WAITING score of a job due at `due` with priority pri (a number or
-- a string; nil or 0: none), formatted once for ZADD.
local function wait_score(due, pri)
  pri = tonumber(pri) or 0
  if pri <= 0 then return fmt('%d', due) end
  return fmt('%d', tonumber(due) - pri * PRIO_SPAN)
end

-- The due time of a K_WAITING score (a number).
local function wait_due(s)
  if s >= 0 then return s end
  return s + math.ceil(-s / PRIO_SPAN) * PRIO_SPAN
end

-- Back to waiting (not in flight any more), due at `due`; a retry or a
-- defer keeps the job's priority.
local function to_waiting(id, m, payload, due)
  if m.a == 0 and m.d == 0 then
    m.st = 'p'
    redis.call('HINCRBY', K_STATE, 'n_pending', 1)
  else
    m.st = 'r'
  end
  if m.fk then
    m.wd = due
    save(id, m, payload)
    LANE.wait(id, m, due)
  else
    save(id, m, payload)
    redis.call('ZADD', K_WAITING, wait_score(due, m.pri), id)
  end
  redis.call('ZADD', K_LIFETIMES, m.x, id)
end

local function entry(m, status, now, id)
  local e = { attempt = m.a + 1, status = status, ts = now }
  if m.pr or (m.fk and id and LANE.is_probe(m, id)) then e.probe = true end
  return e
end

-- A delivery succeeded (standard 2xx, or an ack). A successful probe reopens
-- the queue, unless a defer that arrived meanwhile pushed the hold out again.
-- The breaker (semantics.md §4b): consecutive failed deliveries of the
-- queue, fleet-wide, in K_STATE 'fails'. A success resets the count;
-- backpressure neither counts nor resets. `tripped` is the release time of a
-- breaker hold that the current outcome started or extended, for the reply.
local tripped = nil
-- The scope the last on_defer applied ("queue", "key" or "job"), and the
-- lane release it asked for, for the reply's hold value (settle, callback).
local deferred_scope, deferred_release = nil, nil
local fails_zero = false -- this call already saw or made the count 0

-- What the current outcome did to the queue's hold, as data with Redis'
-- times, for the reply (store.parseHold): "hold|<start|extend|keep>|<until
-- ms>|<at ms>" (a queue-scope defer or a breaker trip; until is the queue's
-- release after it), "probe" (it ended the queue's probe), "reopen|<at ms>".
-- nil: nothing. settle.lua and callback.lua reset it per outcome.
local hold_notes = nil
hold_note = function(note)
  if hold_notes == nil then hold_notes = {} end
  hold_notes[#hold_notes + 1] = note
end

-- The hold value of a settle or callback reply for the outcome just
-- applied: the breaker's release it tripped or the lane release it asked
-- for first (settle.lua's header), then hold_notes, space-separated.
local function hold_reply(word)
  local first = ''
  if tripped then
    first = fmt('breaker|%d', tripped)
  elseif deferred_scope == 'key' and word ~= 'STALE' then
    first = fmt('key|%d', deferred_release)
  end
  if hold_notes == nil then return first end
  local notes = table.concat(hold_notes, ' ')
  if first == '' then return notes end
  return first .. ' ' .. notes
end

-- Forgets what the previous outcome of this call did (hold_reply).
local function hold_reply_reset()
  tripped, deferred_scope, hold_notes = nil, nil, nil
end

local function breaker_reset()
  if P.breaker_failures > 0 and not fails_zero then
    if state_get('fails') ~= '0' then redis.call('HSET', K_STATE, 'fails', '0') end
    fails_zero = true
  end
end

-- A failed webhook delivery: count it, and hold the queue for holdFor once
-- the count reaches breaker.failures (again after every later failure, so
-- a failed probe holds the queue again). The latest release wins, as for a
-- defer; the reason names the breaker and the last error.
local function breaker_failure(now, err)
  if P.breaker_failures <= 0 then return end
  fails_zero = false
  local n = redis.call('HINCRBY', K_STATE, 'fails', 1)
  if n < P.breaker_failures then return end
  local release = now + P.breaker_hold
  local reason = fmt('breaker: %d consecutive failures', n)
  if err ~= '' then reason = reason .. '; last: ' .. string.sub(err, 1, 200) end
  local h = queue_hold()
  local change = hold_apply(h, release, reason, now)
  if change then queue_hold_write(h) end
  hold_note(fmt('hold|%s|%d|%d', change or 'keep', h.until_ms, now))
  tripped = release
end

local function on_success(id, m, payload, now, status, code)
  local e = entry(m, status, now, id)
  e.code = code
  if status == 'acked' then
    -- An ack is SimpleQ's "success"; acked marks how it came.
    e.status = 'success'
    e.acked = true
  end
  breaker_reset()
  local probe = is_probe(id)
  if m.fk then LANE.end_probe(m, id, true, now) end
  leave_inflight(id, m)
  m.a = m.a + 1
  m.st = 'c'
  m.ca = now
  save(id, m, payload)
  hist_append(id, e)
  redis.call('ZADD', K_PURGE, fmt('%d', purge_at(m, now)), id)
  if probe then
    local h = queue_hold()
    local reopened = hold_end_probe(h, id, true, now)
    queue_hold_write(h)
    hold_note('probe')
    if reopened then
      hold_note(fmt('reopen|%d', now))
      return 'REOPENED', ''
    end
  end
  return 'COMPLETED', ''
end

-- A delivery failed (error status, timeout, connection error, nack, lost lease,
-- ack timeout). It spends one attempt; the job retries after backoff or dies.
-- webhook: the failure is the webhook's own answer (or its absence), which
-- the breaker counts; lost leases, ack timeouts and nacks are not.
local function on_failure(id, m, payload, now, status, code, err, retryable, dead_reason, webhook)
  local e = entry(m, status, now, id)
  e.code = code
  if err ~= '' then e.error = err end
  if webhook then breaker_failure(now, err) end
  drop_probe(id)
  if m.fk then LANE.end_probe(m, id, false, now) end
  leave_inflight(id, m)
  m.a = m.a + 1
  if err ~= '' then m.e = err end
  hist_append(id, e)
  if dead_reason then return to_dead(id, m, payload, now, dead_reason) end
  if not retryable then return to_dead(id, m, payload, now, 'nacked') end
  if m.a >= P.max_attempts then return to_dead(id, m, payload, now, 'max_attempts_exhausted') end
  local due = now + backoff_ms(m.a)
  if due > m.x then return to_dead(id, m, payload, now, 'lifetime_exceeded') end
  to_waiting(id, m, payload, due)
  return 'RETRY', tostring(due)
end

-- Backpressure (429/503/529 or a defer callback). Never spends an attempt.
-- A queue-scope defer holds the queue until the latest release time asked for,
-- even when the reporting job itself dies of it.
local function on_defer(id, m, payload, now, retry_after, scope, reason, code)
  -- keys.md §3: "" is the default scope, a keyed job's lane on a queue
  -- whose holdScope is key, else the queue; a job without a key holds the
  -- queue for scope key too.
  if scope == '' then scope = (m.fk and P.hold_scope == 'key') and 'key' or 'queue' end
  if scope == 'key' and not m.fk then scope = 'queue' end
  deferred_scope, deferred_release = scope, now + retry_after
  local e = entry(m, 'deferred', now, id)
  e.code = code
  e.retryAfter = retry_after / 1000
  e.scope = scope
  if reason ~= '' then e.reason = reason end
  local release = now + retry_after
  if scope == 'queue' then
    -- The latest release wins, and the hold's reason is that defer's: one
    -- that releases earlier changes neither (hold.lua).
    local h = queue_hold()
    local change = hold_apply(h, release, reason, now)
    if change then queue_hold_write(h) end
    hold_note(fmt('hold|%s|%d|%d', change or 'keep', h.until_ms, now))
  elseif scope == 'key' then
    LANE.defer(m, release, reason)
  end
  drop_probe(id)
  if m.fk then LANE.end_probe(m, id, false, now) end
  local order = m.o or now
  leave_inflight(id, m)
  m.d = m.d + 1
  hist_append(id, e)
  if m.d > P.max_defers then return to_dead(id, m, payload, now, 'defer_cap_exhausted') end
  if release > m.x then return to_dead(id, m, payload, now, 'retry_after_exceeds_lifetime') end
  if scope == 'queue' or scope == 'key' then
    -- Wait where it was: the queue hold keeps it back, and when the hold ends
    -- it is first in line again (the probe, if nothing older is waiting).
    to_waiting(id, m, payload, order)
  else
    to_waiting(id, m, payload, release)
  end
  return 'DEFERRED', tostring(release)
end

-- What housekeeping did to jobs that no daemon is watching (expired leases,
-- ack timeouts, ended lifetimes), reported back with the claim reply so the
-- daemon can log and count them: per entry kind, id, word, detail.
local reaped = {}
local function note_reaped(kind, id, word, detail)
  reaped[#reaped + 1] = { kind, id, word, detail or '' }
end

-- Bounded housekeeping, run at the start of every claim: expired leases
-- (crashed daemons, ack timeouts), ended lifetimes, retention purge. Returns
-- the earliest time any of them needs attention (or nil): now itself when a
-- batch left more due, so the caller runs the next batch at once instead of
-- waiting for an unrelated wake-up.
local function maintain(now)
  local next_due = nil
  -- after: the key's due items were just handled (up to a batch); any still
  -- due are the next batch's.
  local function consider(key, after)
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if first[2] and first[1] ~= PLACEHOLDER then
      local t = tonumber(first[2])
      if t <= now then
        if after then next_due = now end
      elseif next_due == nil or t < next_due then
        next_due = t
      end
      return t <= now
    end
    return false
  end
  if consider(K_INFLIGHT) then
    local ids = redis.call('ZRANGEBYSCORE', K_INFLIGHT, '-inf', now, 'LIMIT', 0, P.batch)
    for _, id in ipairs(ids) do
      local m, payload = load(id)
      if not m then
        redis.call('ZREM', K_INFLIGHT, id)
        -- The slot of a delivery cancelled in flight whose daemon never
        -- settled it (CANCELLED_SLOT, at the end of this file).
        if string.sub(id, 1, 11) == '~cancelled|' then redis.call('HINCRBY', K_STATE, 'n_cslots', -1) end
      elseif m.st == 'w' then
        -- The webhook did answer (its 2xx is m.sc); the worker never reported.
        local w, d
        if P.ack_action == 'dead' then
          w, d = on_failure(id, m, payload, now, 'failed', m.sc, 'ack timeout', true, 'ack_timeout')
        else
          w, d = on_failure(id, m, payload, now, 'failed', m.sc, 'ack timeout', true, nil)
        end
        note_reaped('ack_timeout', id, w, d)
      else
        local w, d = on_failure(id, m, payload, now, 'failed', nil, 'delivery lease expired (daemon lost)', true, nil)
        note_reaped('lease_expired', id, w, d)
      end
    end
    consider(K_INFLIGHT, true)
  end
  -- Waiting jobs, indexed by their own lifetime end.
  if consider(K_LIFETIMES) then
    local ids = redis.call('ZRANGEBYSCORE', K_LIFETIMES, '-inf', now, 'LIMIT', 0, P.batch)
    for _, id in ipairs(ids) do
      redis.call('ZREM', K_LIFETIMES, id)
      local gone = redis.call('ZREM', K_WAITING, id) == 1
      local m, payload
      if not gone then
        -- A keyed job waits in K_LWAIT (lanes.lua) instead.
        m, payload = load(id)
        gone = m and m.fk and (m.st == 'p' or m.st == 'r') and LANE.unwait(id, m)
      end
      if gone then
        if not m then m, payload = load(id) end
        if m then
          if m.st == 'p' then redis.call('HINCRBY', K_STATE, 'n_pending', -1) end
          to_dead(id, m, payload, now, 'lifetime_exceeded')
          note_reaped('lifetime', id, 'DEAD', 'lifetime_exceeded')
        end
      end
    end
    consider(K_LIFETIMES, true)
  end
  if consider(K_PURGE) then
    local ids = redis.call('ZRANGEBYSCORE', K_PURGE, '-inf', now, 'LIMIT', 0, P.batch)
    for _, id in ipairs(ids) do
      local m = load(id)
      if m and m.k and redis.call('HGET', K_IDEM, m.k) == id then
        redis.call('HDEL', K_IDEM, m.k)
      end
      -- A replace key's entry (REPLACE_FIELD .. rk, see the cancel block
      -- at the end) still naming this job goes with it.
      if m and m.rk and redis.call('HGET', K_IDEM, '\255r' .. m.rk) == id then
        redis.call('HDEL', K_IDEM, '\255r' .. m.rk)
      end
      redis.call('HDEL', K_JOBS, id)
      redis.call('HDEL', K_HIST, id)
      redis.call('ZREM', K_DEAD, id)
      redis.call('ZREM', K_PURGE, id)
    end
    consider(K_PURGE, true)
  end
  return next_due
end

-- Up to max due jobs ({id, score, ...} as ZRANGEBYSCORE WITHSCORES answers),
-- highest priority first, then by due time within a level; walks only the
-- levels that hold a job.
local function due_by_priority(now, max)
  local due, from = {}, '-inf'
  while #due < max * 2 do
    -- The lowest score from here on names the next level present.
    local top = redis.call('ZRANGEBYSCORE', K_WAITING, from, '(0', 'WITHSCORES', 'LIMIT', 0, 1)
    if not top[2] then break end
    local base = -math.ceil(-tonumber(top[2]) / PRIO_SPAN) * PRIO_SPAN
    local got = redis.call('ZRANGEBYSCORE', K_WAITING, fmt('%d', base), fmt('%d', base + now),
      'WITHSCORES', 'LIMIT', 0, max - #due / 2)
    for _, v in ipairs(got) do due[#due + 1] = v end
    from = fmt('%d', base + PRIO_SPAN)
  end
  if #due < max * 2 then
    local got = redis.call('ZRANGEBYSCORE', K_WAITING, 0, now, 'WITHSCORES', 'LIMIT', 0, max - #due / 2)
    for _, v in ipairs(got) do due[#due + 1] = v end
  end
  return due
end

-- The earliest due time of any waiting job, whatever its priority (nil:
-- none waits): the first score of each level present, and of priority 0.
local function next_wait_due()
  local first = redis.call('ZRANGE', K_WAITING, 0, 0, 'WITHSCORES')
  if not first[2] then return nil end
  local s = tonumber(first[2])
  local best = nil
  while s < 0 do
    local d = wait_due(s)
    if best == nil or d < best then best = d end
    local base = -math.ceil(-s / PRIO_SPAN) * PRIO_SPAN
    local nxt = redis.call('ZRANGEBYSCORE', K_WAITING, fmt('%d', base + PRIO_SPAN), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if not nxt[2] then return best end
    s = tonumber(nxt[2])
  end
  if best == nil or s < best then best = s end
  return best
end

-- claim_jobs is claim.lua's whole logic, shared with settle.lua (which claims
-- replacements for the slots its outcomes freed in the same call). See
-- claim.lua's header for arguments and reply. skip_housekeeping leaves out
-- maintain (settle.lua, when its daemon ran it a moment ago): the reply's
-- wake time then covers only what the claim itself saw.
local function claim_jobs(now, max, prefix, skip_housekeeping)
  local wake = nil
  if not skip_housekeeping then wake = maintain(now) end

  local function earlier(t)
    if t and (wake == nil or t < wake) then wake = t end
  end
  -- Reply: {word, wake_ms, #reaped, reaped entries (4 values each), jobs...}.
  local function reply(word, jobs)
    local w = -1
    if wake ~= nil then
      w = wake - now
      if w < 0 then w = 0 end
    end
    local r = { word, w, #reaped }
    for _, e in ipairs(reaped) do
      for _, v in ipairs(e) do r[#r + 1] = v end
    end
    if jobs then
      for _, v in ipairs(jobs) do r[#r + 1] = v end
    end
    LANE.flush(now)
    return r
  end

  -- No free slot: only the housekeeping above was wanted, so that lifetimes,
  -- retention purges and expired leases are handled on time even while every
  -- slot of the caller is busy. Its own freed slot wakes it for the rest.
  if max <= 0 then return reply('BUSY') end

  local st = redis.call('HMGET', K_STATE, 'paused', 'hold', 'hold_until', 'probe_job', 'lim_conc', 'lim_rmax', 'lim_rwin', 'kw', 'reason')
  if st[1] == '1' then return reply('PAUSED') end
  -- Limits set over the API (queuedef.lua) are the fleet's one truth: a
  -- daemon whose copy of the queue is a moment old still claims under them.
  if st[5] then P.concurrency = tonumber(st[5]) end
  if st[6] then P.rate_max = tonumber(st[6]) end
  if st[7] then P.rate_window = tonumber(st[7]) end

  -- The queue's hold (hold.lua): held until its release, then exactly one
  -- probe, and nothing else while the probe is in flight.
  local h = queue_hold({ st[2], st[3], st[4], st[9] })
  local had_probe = h.probe ~= ''
  local gate = hold_gate(h, now, function(id) return redis.call('ZSCORE', K_INFLIGHT, id) ~= false end)
  if gate == 'held' then
    earlier(h.until_ms)
    return reply('HELD')
  elseif gate == 'probing' then
    return reply('PROBING')
  end
  local probing = gate == 'probe'
  if probing then
    -- A probe that left the in-flight set without an outcome that ended it
    -- (a lost lease) is forgotten: the next job probes.
    if had_probe then redis.call('HSET', K_STATE, 'probe_job', '') end
    max = 1
  end

  local busy = in_flight()
  local free = P.concurrency - busy
  if free <= 0 then return reply('BUSY') end
  if max > free then max = free end

  if P.rate_max > 0 then
    -- A start exactly rate_window old still counts ('(' excludes it from
    -- the removal): two starts are always at least a window apart.
    redis.call('ZREMRANGEBYSCORE', K_STARTS, '-inf', '(' .. fmt('%d', now - P.rate_window))
    local used = redis.call('ZCARD', K_STARTS)
    if used >= P.rate_max then
      local oldest = redis.call('ZRANGE', K_STARTS, 0, 0, 'WITHSCORES')
      earlier(tonumber(oldest[2]) + P.rate_window + 1)
      return reply('RATE')
    end
    if max > P.rate_max - used then max = P.rate_max - used end
  end

  local ids, scores = {}, {}
  local lanes_of = nil -- keyed jobs taken: id -> lane (lanes.lua)
  if (tonumber(st[8]) or 0) > 0 then
    -- Keyed jobs wait (K_STATE kw): the lanes share the claim fairly,
    -- the default lane (K_WAITING) among them (lanes.lua, keys.md §4).
    local wake_lanes
    ids, scores, lanes_of, wake_lanes = LANE.take(now, max, probing)
    earlier(wake_lanes)
    if #ids == 0 then
      local first = next_wait_due()
      if first then earlier(first) end
      return reply('EMPTY')
    end
  else
    local due = redis.call('ZRANGEBYSCORE', K_WAITING, '-inf', now, 'WITHSCORES', 'LIMIT', 0, max)
    -- A negative first score: jobs with a priority wait (every one of them
    -- scores below 0, so the range above starts with them): take the due
    -- jobs level by level, highest first, then priority 0 (wait_score).
    if due[2] and tonumber(due[2]) < 0 then due = due_by_priority(now, max) end
    if #due == 0 then
      local first = next_wait_due()
      if first then earlier(first) end
      return reply('EMPTY')
    end
    for i = 1, #due, 2 do
      ids[#ids + 1] = due[i]
      -- The token carries the due time, not the score: a release or defer
      -- puts the job back by to_waiting, which scores it by its priority.
      -- A score of priority 0 is its due time already (no work per job).
      local sc = due[i + 1]
      if string.byte(sc, 1) == 45 then sc = fmt('%d', wait_due(tonumber(sc))) end -- '-'
      scores[#scores + 1] = sc
    end
    redis.call('ZREM', K_WAITING, unpack(ids))
  end
  local recs = redis.call('HMGET', K_JOBS, unpack(ids))

  local out = {}
  local leases, inflight, starts = {}, {}, {}
  local was_pending = 0
  -- Scores go to Redis as strings formatted once: a Lua number argument is
  -- formatted with printf("%.17g") on every call.
  local now_s, lease_s = fmt('%d', now), fmt('%d', now + P.lease)
  for i, id in ipairs(ids) do
    local rec = recs[i]
    if rec then
      -- The record is not decoded, let alone rewritten: the lifetime end and
      -- state sit at the front of every record (record.lua), and the daemon
      -- reads attempts and createdAt from the record itself.
      local x, st = record_lifetime_state(rec)
      local lane = lanes_of and lanes_of[id]
      if st == 'p' then was_pending = was_pending + 1 end
      if lane and st ~= 'p' and st ~= 'r' then
        -- Not waiting after all (a lane member left behind by a job that
        -- moved on): never delivered twice.
        LANE.untake(lane, id)
      elseif x <= now then
        local m, payload = split_record(rec)
        if lane then LANE.untake(lane, id) end
        to_dead(id, m, payload, now, 'lifetime_exceeded')
        note_reaped('lifetime', id, 'DEAD', 'lifetime_exceeded')
      else
        local token = lease_token(prefix, i, scores[i], probing)
        -- A probe's flag carries the time it was taken, on Redis' clock,
        -- so the daemon's event log shows the fleet's time, not its own.
        local flag = '0'
        if probing then
          set_probe(id)
          flag = '1:' .. now_s
        elseif lane and LANE.fresh_probe[id] then
          flag = 'k:' .. now_s -- the probe of a held lane (lanes.lua)
        end
        leases[#leases + 1] = id
        leases[#leases + 1] = token
        inflight[#inflight + 1] = lease_s
        inflight[#inflight + 1] = id
        starts[#starts + 1] = now_s
        starts[#starts + 1] = token
        local n = #out
        out[n + 1] = id
        out[n + 2] = token
        out[n + 3] = flag
        out[n + 4] = rec
      end
    end
  end
  -- In flight, a job leaves the lifetime index (its lease ends first).
  redis.call('ZREM', K_LIFETIMES, unpack(ids))
  if was_pending > 0 then redis.call('HINCRBY', K_STATE, 'n_pending', -was_pending) end
  if #leases == 0 then
    earlier(now) -- every job taken had outlived its lifetime: look again now
    return reply('EMPTY')
  end
  redis.call('HSET', K_LEASES, PLACEHOLDER, '', unpack(leases))
  redis.call('ZADD', K_INFLIGHT, '+inf', PLACEHOLDER, unpack(inflight))
  if P.rate_max > 0 then redis.call('ZADD', K_STARTS, unpack(starts)) end
  earlier(now + P.lease)
  return reply('CLAIMED', out)

end


-- The call log (K_CALL): what a claim or settle call did, so that the same
-- call sent again (go-redis re-sends a script after a read timeout, and the
-- dispatcher retries with the same token prefix) returns it instead of
-- claiming more: the first run's leases would otherwise belong to nobody.
-- Kept for one lease, at most 10 s: past the lease its leases have expired
-- anyway, and a call sent again after a stall runs right after the first
-- (both wait in Redis' input), so a short log covers it; the log is a few
-- bytes per outcome and job, kept only that long.
-- Layout: the outcome words (settle's flat reply so far: word, detail and
-- hold per outcome) joined by tabs, a newline, then the ids of the jobs the
-- call claimed joined by commas. A replay takes their leases from K_LEASES:
-- a lease still held under the call's prefix is the one handed out. Built
-- with one table.concat each, no string per job: the log is written on
-- every claim and settle call. Words, details and job ids hold no tabs,
-- newlines or commas.

-- Records a call: words is settle's flat reply so far ({} for a claim),
-- claim a claim_jobs reply or nil.
local function call_record(words, claim)
  if not K_CALL then return end
  local ids = {}
  if claim then
    for i = 4 + 4 * claim[3], #claim - 3, 4 do ids[#ids + 1] = claim[i] end
  end
  redis.call('SET', K_CALL, table.concat(words, '\t') .. '\n' .. table.concat(ids, ','),
    'PX', math.min(math.max(P.lease, 1000), 10000))
end

-- Splits s at every sep (a one-character plain separator), empty fields kept.
local function split(s, sep)
  local out, from = {}, 1
  while true do
    local at = string.find(s, sep, from, true)
    if not at then
      out[#out + 1] = string.sub(s, from)
      return out
    end
    out[#out + 1] = string.sub(s, from, at - 1)
    from = at + 1
  end
end

-- Answers a call sent again from its log: the n outcomes' words as
-- recorded, then (prefix given: the call claimed) a claim reply with the
-- jobs whose lease is still the one this call handed out (wake 0: look again
-- at once). Returns nil for a new call.
local function call_replay(n, prefix)
  if not K_CALL then return nil end
  local log = redis.call('GET', K_CALL)
  if not log then return nil end
  local nl = string.find(log, '\n', 1, true)
  local out = {}
  if n > 0 then out = split(string.sub(log, 1, nl - 1), '\t') end
  if prefix then
    local jobs = {}
    local ids = string.sub(log, nl + 1)
    if ids ~= '' then
      local mine = prefix .. '|'
      for _, id in ipairs(split(ids, ',')) do
        local token = redis.call('HGET', K_LEASES, id)
        if token and lease_of_call(token, mine) then
          local rec = redis.call('HGET', K_JOBS, id)
          if rec then
            jobs[#jobs + 1] = id
            jobs[#jobs + 1] = token
            jobs[#jobs + 1] = lease_is_probe(token) and '1' or '0'
            jobs[#jobs + 1] = rec
          end
        end
      end
    end
    out[#out + 1] = #jobs > 0 and 'CLAIMED' or 'EMPTY'
    out[#out + 1] = 0
    out[#out + 1] = 0
    for _, v in ipairs(jobs) do out[#out + 1] = v end
  end
  return out
end

-- Cancel and replace (control.md §1 and §3; cancel.lua, publish.lua).
--
-- A job cancelled in flight is dead at once, but its delivery's slot stays
-- taken until the request has ended: K_INFLIGHT keeps, in the job's place,
-- the member CANCELLED_SLOT .. <the delivery's lease token> at the lease's
-- deadline. in_flight() counts it against concurrency; the job's own lease
-- (K_LEASES) is gone, so the daemon's late outcome is STALE, and settle's
-- STALE answer removes the member (free_cancelled_slot). A daemon that dies
-- meanwhile leaves it to maintain, which drops it at the lease's deadline
-- like any member that names no job. Members of K_INFLIGHT that start with
-- "~" are never jobs. K_STATE n_cslots counts these members, so that the
-- queue's counts (inspect.lua) leave them out of "processing".
local CANCELLED_SLOT = '~cancelled|'

local function free_cancelled_slot(token)
  if token and token ~= '' and redis.call('ZREM', K_INFLIGHT, CANCELLED_SLOT .. token) == 1 then
    redis.call('HINCRBY', K_STATE, 'n_cslots', -1)
  end
end

-- A replace key's pending job lives in K_IDEM under REPLACE_FIELD .. key:
-- byte 255 never occurs in UTF-8, so no idempotency key (always valid
-- UTF-8: the API decodes it from JSON) can collide with it.
local REPLACE_FIELD = '\255r'

-- Cancels one job that is not terminal: dead / cancelled with lastError
-- err, out of every place it was. Returns the API status it had
-- ("pending", "processing", "awaiting_ack") and its delivery's lease token
-- when a delivery was under way ("" otherwise), or nil for a terminal job.
-- m, payload: the job's record as split_record reads it (no overlay).
local function cancel_job(id, m, payload, now, err)
  if m.st == 'c' or m.st == 'd' then return nil end
  local was, token = 'processing', ''
  local lease = nil
  if m.st == 'p' or m.st == 'r' then lease = redis.call('HGET', K_LEASES, id) end
  if m.fk then
    -- keys.md: the job leaves its lane now; a delivery still running keeps
    -- only the queue's slot (CANCELLED_SLOT) until it ends.
    if lease or m.st == 'w' then LANE.leave(m) end
    LANE.end_probe(m, id, false, now)
  end
  if lease then
    local deadline = redis.call('ZSCORE', K_INFLIGHT, id)
    redis.call('ZREM', K_INFLIGHT, id)
    redis.call('HDEL', K_LEASES, id)
    if deadline then
      redis.call('ZADD', K_INFLIGHT, deadline, CANCELLED_SLOT .. lease)
      redis.call('HINCRBY', K_STATE, 'n_cslots', 1)
    end
    token = lease
  elseif m.st == 'w' then
    -- The webhook has answered: the request is over, the slot is free.
    redis.call('ZREM', K_INFLIGHT, id)
    redis.call('HINCRBY', K_STATE, 'n_awaiting', -1)
    was = 'awaiting_ack'
  else
    if m.fk then LANE.unwait(id, m) else redis.call('ZREM', K_WAITING, id) end
    redis.call('ZREM', K_LIFETIMES, id)
    if m.st == 'p' then
      redis.call('HINCRBY', K_STATE, 'n_pending', -1)
      was = 'pending'
    end
  end
  if m.rk and m.st == 'p' and redis.call('HGET', K_IDEM, REPLACE_FIELD .. m.rk) == id then
    redis.call('HDEL', K_IDEM, REPLACE_FIELD .. m.rk)
  end
  drop_probe(id) -- a cancelled probe hands the probe on
  m.t, m.pr, m.sc, m.o = nil, nil, nil, nil
  m.e = err
  to_dead(id, m, payload, now, 'cancelled')
  return was, token
end

-- Fleet-wide statistics (docs/control.md "Statistics"): per queue, counters
-- in one-minute buckets on Redis' clock, in one hash (KEY_STATS, passed by
-- claim, settle and callback as their last key) with fields
-- "<minute>:<counter>" (minute = floor(ms / 60000)), plus
--   cur    the latest minute written;
--   mins   the minutes that have buckets, ascending, comma-joined;
--   holds  hold windows asked for, "<from ms>-<until ms>" comma-joined.
-- Counters: ok (deliveries that succeeded: a standard 2xx or an ack), fail
-- (failed: the webhook's answer or its absence, a nack), lost (leases that
-- expired, ack timeouts), defer (backpressure: 429/503/529 or a defer
-- callback), r429 (of those, HTTP 429), start (deliveries started), probe
-- (probes started), hold (holds asked for: queue-scope defers and breaker
-- trips), dead (jobs that died here). A script counts what it did in a
-- table and calls stats_flush once at its end: one HINCRBY per counter that
-- is not zero, never one per job. The first write to a new minute (an
-- HINCRBY answering its own increment) rolls the buckets over: minutes
-- older than STATS_MINUTES go (HDEL), and the key expires an hour after
-- the retention when nothing writes, so memory stays bounded per queue.
local STATS_MINUTES = 1440
local STATS_COUNTERS = { 'ok', 'fail', 'lost', 'defer', 'r429', 'start', 'probe', 'hold', 'dead', 'khold', 'kprobe' }

-- Counts a claim_jobs reply (claim.lua, settle.lua's refill) into c.
local function stats_claim(c, r)
  if not r then return end
  local n = tonumber(r[3]) or 0
  for i = 4, 3 + 4 * n, 4 do
    if r[i] == 'lifetime' then
      c.dead = (c.dead or 0) + 1
    else -- lease_expired, ack_timeout
      c.lost = (c.lost or 0) + 1
      if r[i + 2] == 'DEAD' then c.dead = (c.dead or 0) + 1 end
    end
  end
  if r[1] == 'CLAIMED' then
    local first = 4 + 4 * n
    c.start = (c.start or 0) + (#r - first + 1) / 4
    for i = first + 2, #r, 4 do
      if string.byte(r[i], 1) == 49 then c.probe = (c.probe or 0) + 1 end -- '1' or '1:<ms>'
    end
  end
end

-- Notes a hold asked for at now until `release` (ms) into c.
local function stats_hold(c, now, release)
  c.hold = (c.hold or 0) + 1
  if not c.hold_until or release > c.hold_until then c.hold_until = release end
  c.hold_from = c.hold_from or now
end

-- Counts one applied outcome: its kind (settle's ok, delivered, fail,
-- defer; callback's ack, nack, defer), webhook status code, the word the
-- transition answered and, for a defer, the release it asked for.
local function stats_outcome(c, now, kind, code, word, release, queue_scope)
  if word == 'STALE' or word == 'RELEASED' or word == nil then return end
  if kind == 'ok' or kind == 'ack' then
    c.ok = (c.ok or 0) + 1
  elseif kind == 'fail' or kind == 'nack' then
    c.fail = (c.fail or 0) + 1
  elseif kind == 'defer' then
    c.defer = (c.defer or 0) + 1
    if code == 429 then c.r429 = (c.r429 or 0) + 1 end
    if queue_scope and release then stats_hold(c, now, release) end
  end
  if word == 'DEAD' then c.dead = (c.dead or 0) + 1 end
end

-- Writes c into the statistics hash key: the one call per script call.
local function stats_flush(key, now, c)
  if not key then return end
  -- Lane holds asked for and lane probes started in this call (lanes.lua).
  local ls = rawget(LANE, 'stats') -- nil: the lane machine was not loaded
  if ls then
    c.khold = (c.khold or 0) + ls.khold
    c.kprobe = (c.kprobe or 0) + ls.kprobe
    ls.khold, ls.kprobe = 0, 0
  end
  local minute = math.floor(now / 60000)
  local fresh = false
  for _, name in ipairs(STATS_COUNTERS) do
    local n = c[name]
    if n and n > 0 then
      if redis.call('HINCRBY', key, fmt('%d:%s', minute, name), n) == n then fresh = true end
    end
  end
  if c.hold_until then
    -- The latest window grows while asks overlap it; a new one starts after.
    local w = redis.call('HGET', key, 'holds') or ''
    local head, from, to = string.match(w, '^(.-)(%d+)%-(%d+)$')
    local keep = now - STATS_MINUTES * 60000
    if from and tonumber(to) >= c.hold_from then
      if c.hold_until > tonumber(to) then
        w = head .. from .. '-' .. fmt('%d', c.hold_until)
      else
        w = nil
      end
    else
      w = w .. (w == '' and '' or ',') .. fmt('%d-%d', c.hold_from, c.hold_until)
    end
    if w then
      -- Windows that ended before the retention go, at most 500 stay.
      local parts = split(w, ',')
      local first = 1
      while first < #parts and (#parts - first >= 500 or tonumber(string.match(parts[first], '%-(%d+)$')) < keep) do
        first = first + 1
      end
      if first > 1 then w = table.concat(parts, ',', first) end
      redis.call('HSET', key, 'holds', w)
    end
  end
  if fresh and redis.call('HGET', key, 'cur') ~= fmt('%d', minute) then
    local oldest = minute - STATS_MINUTES + 1
    local mins = redis.call('HGET', key, 'mins') or ''
    local kept, gone, this = {}, {}, fmt('%d', minute)
    if mins ~= '' then
      for _, m in ipairs(split(mins, ',')) do
        if tonumber(m) < oldest then
          for _, name in ipairs(STATS_COUNTERS) do gone[#gone + 1] = m .. ':' .. name end
        elseif m ~= this then -- listed once, even if Redis' clock stepped back
          kept[#kept + 1] = m
        end
      end
    end
    for i = 1, #gone, 900 do -- unpack is bounded by Lua's C stack
      redis.call('HDEL', key, unpack(gone, i, math.min(i + 899, #gone)))
    end
    kept[#kept + 1] = this
    redis.call('HSET', key, 'cur', this, 'mins', table.concat(kept, ','))
    redis.call('PEXPIRE', key, (STATS_MINUTES + 60) * 60000)
  end
end

-- settle.lua's statistics: its n outcomes (ARGV, see settle.lua), the
-- words it answered (out) and its refill claim, written with stats_flush.
local function stats_settle(key, now, out, n, claim)
  local c = {}
  for i = 0, n - 1 do
    local b = ARG0 + 2 + i * 7
    local kind, release = ARGV[b + 2], nil
    if kind == 'defer' then
      local ra = ARGV[b + 5]
      if string.sub(ra, 1, 1) == '@' then
        release = math.max(now, tonumber(string.sub(ra, 2)) or now)
      else
        release = now + (tonumber(ra) or 0)
      end
    end
    stats_outcome(c, now, kind, tonumber(ARGV[b + 3]), out[i * 3 + 1], release,
      string.sub(out[i * 3 + 3] or '', 1, 4) ~= 'key|')
    local tripped_at = string.match(out[i * 3 + 3] or '', '^breaker|(%d+)')
    if tripped_at then stats_hold(c, now, tonumber(tripped_at)) end
  end
  stats_claim(c, claim)
  stats_flush(key, now, c)
end
