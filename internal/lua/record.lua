-- record.lua — the job record codec: the one place that knows the stored
-- layout of a job (its record in K_JOBS, its history in K_HIST) and of a
-- lease token. Part of every script's prelude, after hold.lua and before
-- lib.lua; its functions work on strings and tables only (no key, no
-- Redis call), so lib.lua, lanes.lua and the scripts call them wherever a
-- record is read, written or edited, and no other file spells the layout.
-- Package store's Go half is internal/store/record.go; the golden files in
-- internal/store/testdata/records are both halves' contract
-- (TestRecordGolden: regenerate with -update after a deliberate change).
--
-- A record is meta JSON .. "\n" .. the raw payload bytes. The meta is one
-- flat JSON object (never a raw newline in it: cjson escapes one in text).
-- Meta fields (short names keep memory per waiting job small):
--   c createdAt ms, s first scheduled delivery ms, x lifetime end ms, st
--   state, a attempts spent, d defers spent (both omitted while 0), k
--   idempotency key, o order score (due time when last claimed), t lease
--   token (in flight only), pr probe flag, e last error, dr dead reason, ca
--   completed/dead at ms, sc last webhook status code, h has history
--   although a and d are 0 (set by replay), lc the last nack or defer
--   callback applied ("kind|attempt|ms"), so that one sent again after its
--   reply was lost is answered 2xx again (callback.lua), tp the W3C
--   traceparent the job was published with (canonical: "00-" 32 hex "-" 16
--   hex "-" 2 hex) and ts its tracestate, both only when present. sid the
--   id of the schedule that published the job (schedule.lua), only when it
--   did. rk its replace key (control.md §3), only when given. pri its
--   priority 1..9 (control.md §2; absent: 0); it also shapes the job's
--   K_WAITING score (lib.lua wait_score). fk its flow key (keys.md), only
--   when it has one; wd the due time of its K_LWAIT member while it waits,
--   when that is not s.
-- States st: p pending (never delivered, waiting), r waiting again
--   (retry/defer), f in flight, w awaiting ack, c completed, d dead. A
--   claim never rewrites the record (it keeps st p or r) but writes a lease
--   token to K_LEASES; overlay() reads the two together (st f, t, o, pr).
--
-- Layout rules the fast paths rely on (keep them, or change every reader
-- here and in record.go, and the golden files):
--   1. Every meta starts with {"c":<int>,"s":<int>,"x":<int>,"st":"<letter>"
--      (record_head_new): claim, cancel and lists read c, x and st with one
--      anchored match, without decoding (record_lifetime_state,
--      record_created_state, record_state).
--   2. fk, when present, comes right after st; tp right after st or fk,
--      and ts right after tp. settle's fast path reads fk at a fixed
--      offset, and package store finds tp with one search.
--   3. A quoted member name ("k": and the like) occurs only as structure:
--      inside a JSON string every quote is escaped. The searches below and
--      in record.go depend on it.
--   4. record_complete_fast (settle's fast path) edits the record as a
--      string: st p becomes c and a, sc and ca are appended; it keeps
--      whatever sits between st and the closing brace. Such a record has
--      no history entry: it reads as one successful attempt with status sc
--      at ca (record.go decodeJob). A record with h keeps an explicit
--      history and never takes the fast path.
--   5. record_cancel_fast edits the record as a string too: st becomes d
--      and ca, dr and e are appended (only for a record that has none of
--      them, and no rk or fk).
-- A history (K_HIST) is entries, flat JSON objects, joined by ",": the
-- reader wraps it in [ ] (encode_entry, history_append).
-- A lease token is "<call prefix>|<i>|<order>[|p]" (lease_token): the call
-- prefix from package store (unique per call), the job's index in the
-- call, its order score (due time) and the probe flag. Tokens hold only
-- [0-9a-z.|]: they go into JSON and sorted-set members as they are.

local fmt = string.format

-- Splits a record into its decoded meta (a and d defaulted to 0) and its
-- payload.
local function split_record(rec)
  local i = string.find(rec, '\n', 1, true)
  local m = cjson.decode(string.sub(rec, 1, i - 1))
  m.a = m.a or 0
  m.d = m.d or 0
  return m, string.sub(rec, i + 1)
end

-- The meta members of a job's trace context: tp is only ever [0-9a-f-] and
-- goes in as it is; ts is free text and is escaped.
local function trace_members(tp, ts)
  local s = ',"tp":"' .. tp .. '"'
  if ts and ts ~= '' then s = s .. ',"ts":' .. cjson.encode(ts) end
  return s
end

-- Encodes job meta by hand: cjson.encode formats every number through
-- printf("%.14g") and costs several microseconds per job, which a busy queue
-- pays on every claim and settle. Every field is an integer or a string;
-- zero counters are left out (most waiting jobs have them). Free text goes
-- through cjson.encode for its escaping. The order is the layout rules'.
local function encode_meta(m)
  local p = { fmt('{"c":%d,"s":%d,"x":%d,"st":"%s"', m.c, m.s, m.x, m.st) }
  if m.fk then p[#p + 1] = ',"fk":' .. cjson.encode(m.fk) end
  if m.tp then p[#p + 1] = trace_members(m.tp, m.ts) end
  if m.pri then p[#p + 1] = fmt(',"pri":%d', m.pri) end
  if m.a ~= 0 then p[#p + 1] = fmt(',"a":%d', m.a) end
  if m.d ~= 0 then p[#p + 1] = fmt(',"d":%d', m.d) end
  if m.o then p[#p + 1] = fmt(',"o":%d', m.o) end
  if m.t then p[#p + 1] = ',"t":"' .. m.t .. '"' end -- tokens are [0-9a-z.|]
  if m.pr then p[#p + 1] = ',"pr":1' end
  if m.h then p[#p + 1] = ',"h":1' end
  if m.lc then p[#p + 1] = ',"lc":' .. cjson.encode(m.lc) end
  if m.sc then p[#p + 1] = fmt(',"sc":%d', m.sc) end
  if m.ca then p[#p + 1] = fmt(',"ca":%d', m.ca) end
  if m.dr then p[#p + 1] = ',"dr":' .. cjson.encode(m.dr) end
  if m.k then p[#p + 1] = ',"k":' .. cjson.encode(m.k) end
  if m.e then p[#p + 1] = ',"e":' .. cjson.encode(m.e) end
  if m.sid then p[#p + 1] = ',"sid":' .. cjson.encode(m.sid) end -- the schedule that published it (schedule.lua)
  if m.rk then p[#p + 1] = ',"rk":' .. cjson.encode(m.rk) end -- its replace key (publish.lua, control.md §3)
  if m.wd then p[#p + 1] = fmt(',"wd":%d', m.wd) end
  p[#p + 1] = '}'
  return table.concat(p)
end

-- lc, the last nack or defer callback applied: its kind, the attempt it
-- was for and when (ms).
local function last_callback(kind, attempt, now)
  return fmt('%s|%d|%d', kind, attempt, now)
end

-- The kind, attempt (a string) and time (a number) of an lc value.
local function last_callback_parse(lc)
  local k, att, at = string.match(lc, '^(%a+)|(%d+)|(%d+)$')
  return k, att, tonumber(at)
end

-- The record of meta m and payload.
local function encode_record(m, payload)
  return encode_meta(m) .. '\n' .. payload
end

-- The lease token of job i of a claim call (see the header); order is the
-- due time as a string, formatted once by the claim.
local function lease_token(prefix, i, order, probe)
  if probe then return fmt('%s|%d|%s|p', prefix, i, order) end
  return fmt('%s|%d|%s', prefix, i, order)
end

-- Whether a lease token is a probe's.
local function lease_is_probe(token)
  return string.sub(token, -2) == '|p'
end

-- Whether a lease token was handed out by the call with this prefix
-- (mine: prefix .. '|', built once per call).
local function lease_of_call(token, mine)
  return string.sub(token, 1, #mine) == mine
end

-- A job in flight: its record says p or r, its lease (K_LEASES) says more:
-- m becomes st f with the token, its order score and the probe flag.
local function overlay(m, lease)
  if lease and (m.st == 'p' or m.st == 'r') then
    m.st = 'f'
    m.t = lease
    local o = string.match(lease, '|(%d+)|p$')
    if o then m.pr = 1 else o = string.match(lease, '|(%d+)$') end
    m.o = tonumber(o)
  end
  return m
end

-- The flow key whose JSON string starts at byte i of s (its opening
-- quote), read without decoding the record.
local function record_flow_key(s, i)
  -- The common case, a key with no escape: one search.
  local q = string.find(s, '["\\]', i + 1)
  if q and string.byte(s, q) == 34 then return string.sub(s, i + 1, q - 1) end
  local j = i + 1
  while true do
    local c = string.byte(s, j)
    if c == 92 then
      j = j + 2 -- a backslash escapes the next byte
    elseif c == 34 or c == nil then
      break
    else
      j = j + 1
    end
  end
  local raw = string.sub(s, i + 1, j - 1)
  if not string.find(raw, '\\', 1, true) then return raw end
  return cjson.decode(string.sub(s, i, j))
end

-- The flow key of members that start at byte i of s (the byte after st's
-- closing quote, rule 2), or nil when they do not start with fk.
local function record_flow_key_at(s, i)
  if string.sub(s, i, i + 5) ~= ',"fk":' then return nil end
  return record_flow_key(s, i + 6)
end

-- A record's lifetime end and state (claim_jobs), from its head (rule 1).
local function record_lifetime_state(rec)
  local x, st = string.match(rec, '^{"c":%d+,"s":%d+,"x":(%d+),"st":"(%a)"')
  if x then return tonumber(x), st end
  local m = split_record(rec)
  return m.x, m.st
end

-- A record's createdAt (a string) and state (cancel.lua).
local function record_created_state(rec)
  local c, st = string.match(rec, '^{"c":(%d+),"s":%d+,"x":%d+,"st":"(%a)"')
  if c then return c, st end
  local m = split_record(rec)
  return fmt('%d', m.c), m.st
end

-- A record's state (lists.lua).
local function record_state(rec)
  local st = string.match(rec, '^{"c":%d+,"s":%d+,"x":%d+,"st":"(%a)"')
  if st then return st end
  return split_record(rec).st
end

-- The head of a new job's meta, state p (rule 1): publish.lua formats it
-- once per call for the jobs without a delay, schedule.lua once per firing.
-- c, s and x are strings of whole milliseconds.
local function record_head_new(c, s, x)
  return '{"c":' .. c .. ',"s":' .. s .. ',"x":' .. x .. ',"st":"p"'
end

-- The members a new job carries between its head and its idempotency key,
-- in encode_meta's order: fk (a string, "" none), the trace members
-- (trace_members, "" none) and pri (a number, 0 none).
local function record_new_members(fk, trace, pri)
  local s = trace
  if fk ~= '' then s = ',"fk":' .. cjson.encode(fk) .. s end
  if pri ~= 0 then s = s .. fmt(',"pri":%d', pri) end
  return s
end

-- A new job's record (publish.lua): head (record_head_new), members
-- (record_new_members), idempotency key and replace key ("" none), payload.
local function record_new(head, members, key, rk, payload)
  if key == '' and rk == '' then return head .. members .. '}\n' .. payload end
  local s = head .. members
  if key ~= '' then s = s .. ',"k":' .. cjson.encode(key) end
  if rk ~= '' then s = s .. ',"rk":' .. cjson.encode(rk) end
  return s .. '}\n' .. payload
end

-- The record of a schedule's tick around the tick (schedule.lua): what
-- publish.lua writes for a job without a delay (record_head_new, then fk,
-- pri and k), plus sid, the schedule's id; the idempotency key is
-- "schedule:<id>:<tick>". head ends inside k, before the tick; tail starts
-- by closing it and ends with the payload. Built when the schedule is
-- written, so that a firing only joins: record_head_new(...) .. head ..
-- tick .. tail.
local function record_tick_parts(id, fk, pri, payload)
  local key = cjson.encode('schedule:' .. id .. ':')
  local head = record_new_members(fk, '', pri) .. ',"k":' .. string.sub(key, 1, -2)
  return head, '","sid":' .. cjson.encode(id) .. '}\n' .. payload
end

-- The record with its payload replaced, meta unchanged (a replace key).
local function record_with_payload(rec, payload)
  return string.sub(rec, 1, string.find(rec, '\n', 1, true)) .. payload
end

-- The createdAt (a string) of a record that is pending and was never
-- replayed (no h), or nil: what a replace key may swap the payload of.
local function record_untouched(rec)
  local nl = rec and string.find(rec, '\n', 1, true)
  if not nl then return nil end
  local c = string.match(rec, '^{"c":(%d+),"s":%d+,"x":%d+,"st":"p"')
  if not c then return nil end
  local h = string.find(rec, ',"h":', 1, true)
  if h and h < nl then return nil end
  return c
end

-- settle's fast path, step one: whether a record can complete as a string
-- edit (the first delivery of a job: st p, no h). Returns the position of
-- its "st", its newline, its createdAt (a number) and its flow key (nil:
-- none), or nil.
local function record_fast_open(rec)
  local nl = string.find(rec, '\n', 1, true)
  local p = string.find(rec, '"st":"p"', 1, true)
  if not nl or not p or p > nl then return nil end
  local h = string.find(rec, ',"h":', 1, true)
  if h and h < nl then return nil end
  local c = string.match(rec, '^{"c":(%d+)')
  if not c then return nil end
  return p, nl, tonumber(c), record_flow_key_at(rec, p + 8)
end

-- settle's fast path, step two (rule 4): the record completed at now with
-- webhook status code; p and nl from record_fast_open.
local function record_complete_fast(rec, p, nl, code, now)
  return string.sub(rec, 1, p + 5) .. 'c' .. string.sub(rec, p + 7, nl - 2) ..
    fmt(',"a":1,"sc":%d,"ca":%d}', code, now) .. string.sub(rec, nl)
end

-- The members record_cancel_fast appends: ca now, dr cancelled, e err;
-- built once per call.
local function record_cancel_tail(now, err)
  return fmt(',"ca":%d,"dr":"cancelled","e":%s}', now, cjson.encode(err))
end

-- A waiting job's record cancelled as a string edit (rule 5), or nil when
-- its meta has any of e, ca, dr, rk or fk (cancel_job's general path).
local function record_cancel_fast(rec, tail)
  local nl = string.find(rec, '\n', 1, true)
  local meta = string.sub(rec, 1, nl - 1)
  if string.find(meta, ',"e":', 1, true) or string.find(meta, ',"ca":', 1, true)
    or string.find(meta, ',"dr":', 1, true) or string.find(meta, ',"rk":', 1, true)
    or string.find(meta, ',"fk":', 1, true) then
    return nil
  end
  local s = string.find(meta, '"st":"', 1, true)
  return string.sub(meta, 1, s + 5) .. 'd' .. string.sub(meta, s + 7, -2) .. tail .. string.sub(rec, nl)
end

-- Encodes a history entry; the common shapes (no free text, no fractional
-- retryAfter) by hand, for the same reason as encode_meta.
local function encode_entry(e)
  if e.retryAfter or e.error or e.reason or e.scope then return cjson.encode(e) end
  local s = fmt('{"attempt":%d,"status":"%s","ts":%d', e.attempt, e.status, e.ts)
  if e.code then s = s .. fmt(',"code":%d', e.code) end
  if e.probe then s = s .. ',"probe":true' end
  if e.acked then s = s .. ',"acked":true' end
  return s .. '}'
end

-- A job's history keeps its latest entries up to this many bytes (a few
-- hundred entries; maxAttempts + maxDefers is 55 by default): replays keep
-- the history, and without a bound every append would copy a history that
-- grows with every replay cycle. The oldest entries go first.
local HIST_MAX_BYTES = 32768

-- History h with encoded entry e appended, its oldest entries dropped past
-- HIST_MAX_BYTES.
local function history_append(h, e)
  h = h .. ',' .. e
  if #h > HIST_MAX_BYTES then
    -- Entries are flat JSON objects joined by ",": '},{"' occurs only
    -- between two of them (inside a string a quote is always escaped).
    local cut = string.find(h, '},{"', #h - HIST_MAX_BYTES, true)
    if cut then h = string.sub(h, cut + 2) end
  end
  return h
end
