-- settle.lua — record the outcomes of deliveries this daemon made, fenced by
-- their lease tokens: an outcome whose token is no longer the job's (the lease
-- expired and the job moved on, or a callback already settled it) is ignored,
-- so a daemon that wakes from a pause cannot overwrite newer state.
--
-- KEYS: the queue keys of lib.lua.
-- KEYS[KX + 1] (18): the call log of the refill's token prefix (lib.lua K_CALL).
-- KEYS[KX + 2] (19): the queue's statistics (lib.lua stats_flush).
-- ARGV[1..ARG0] (ARG0 = 3): the per-call values rand, batch, lease (lib.lua).
-- ARGV[ARG0 + 1]: n outcomes; then per outcome 7 values:
--   id, token, kind, webhook status code ("" if none), error text,
--   retryAfter (defer only): ms, or "@<unix ms>" for an HTTP-date
--   Retry-After, turned into a wait here on Redis' clock; reason (defer only).
--   then, optionally, 2 values: max, token prefix — claim up to max jobs in the
--   same call (claim.lua's logic), so a busy daemon refills the slots its
--   outcomes freed with one script call and one round trip instead of two —
--   and optionally a third: "0" to skip the claim's housekeeping (the daemon
--   ran it a moment ago; a busy queue settles hundreds of times a second,
--   and housekeeping costs about 30 µs of Redis time per call).
--   kind: "ok" standard-mode 2xx; "delivered" ack-mode 2xx (now awaiting ack);
--         "fail" failure; "defer" 429/503/529 (always queue scope);
--         "release" hand the job back untouched (graceful shutdown).
-- Returns a flat array, per outcome: word, detail, hold; followed, when a
-- claim was asked for, by claim.lua's reply {word, wake_ms, jobs...}.
--   hold: "" or "breaker|<release ms>" when this outcome (a failure) held
--   the queue by the breaker (semantics.md §4b), or "key|<release ms>"
--   when a 429/503/529 of a keyed job held its lane (keys.md §3); then,
--   space-separated, what it did to the queue's hold with Redis' times
--   (lib.lua hold_reply: "hold|<start|extend|keep>|<until>|<at>", "probe",
--   "reopen|<at>").
--   A "defer" outcome holds the job's lane when the job has a flow key and
--   the queue's flowKeys.holdScope is key, else the queue.
-- A call sent again (the same token prefix, within one lease) is answered
-- from the call log: the words recorded then and the jobs it leased.
--   COMPLETED | REOPENED (a probe's success reopened the queue) | AWAITING |
--   RETRY <due ms> | DEAD <reason> | DEFERRED <release ms> | RELEASED |
--   STALE (token no longer current: nothing written).
local n = tonumber(ARGV[ARG0 + 1])
-- Every outcome is checked before anything is written: a bad one fails the
-- whole call, never after part of the batch was applied.
local KINDS = { ok = true, delivered = true, fail = true, defer = true, release = true }
for i = 0, n - 1 do
  local b = ARG0 + 2 + i * 7
  local kind = ARGV[b + 2]
  if not KINDS[kind] then return redis.error_reply('settle: unknown outcome kind ' .. tostring(kind)) end
  if kind == 'defer' then
    local ra = ARGV[b + 5]
    if string.byte(ra, 1) == 64 then ra = string.sub(ra, 2) end -- '@'
    if not tonumber(ra) then return redis.error_reply('settle: defer of ' .. ARGV[b] .. ': bad retryAfter ' .. ARGV[b + 5]) end
  end
end
local claim_max = tonumber(ARGV[ARG0 + 2 + n * 7])
local again = call_replay(n, (claim_max and claim_max > 0) and ARGV[ARG0 + 3 + n * 7] or nil)
if again then return again end
if not conf_load() then return redis.error_reply(NOCONF) end
local now = now_ms()
local out = {}
local ids = {}
for i = 0, n - 1 do ids[i + 1] = ARGV[ARG0 + 2 + i * 7] end
local recs, leases = {}, {}
if n > 0 then
  recs = redis.call('HMGET', K_JOBS, unpack(ids))
  leases = redis.call('HMGET', K_LEASES, unpack(ids))
end
-- Completions, the common case, are written together after the loop: one
-- ZREM, HDEL, HSET and ZADD for the whole batch instead of several commands
-- per job. A job written by this call is not read again in it: its token is
-- spent, so a second outcome for it is STALE.
local written = {}
local lanes_read = false
local done_ids, done_recs, done_purge = {}, {}, {}
for i = 0, n - 1 do
  local b = ARG0 + 2 + i * 7
  local id, token, kind = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local code = tonumber(ARGV[b + 3])
  local err, retry_after, reason = ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
  if string.sub(retry_after, 1, 1) == '@' then
    retry_after = math.max(0, tonumber(string.sub(retry_after, 2)) - now)
  else
    retry_after = tonumber(retry_after)
  end
  hold_reply_reset()
  local rec, lease = recs[i + 1], leases[i + 1]
  local word, detail
  -- The fast path: the first delivery of a job, a 2xx in standard mode, not
  -- the probe. The record is edited as a string, not decoded
  -- (record_complete_fast): its history is left implicit (no entry
  -- written). A record with h (replayed) keeps an explicit history and
  -- takes the general path.
  local fast = false
  if rec and lease == token and not written[id] and kind == 'ok' and code and not is_probe(id) then
    local p, nl, c, fk = record_fast_open(rec)
    -- A keyed job frees its lane's slot (lanes.lua), unless it is its
    -- lane's probe, which takes the general path.
    if p and fk then
      -- The first keyed job of the batch reads the lanes of all of them.
      if not lanes_read then
        LANE.prefetch_records(recs, i + 1)
        lanes_read = true
      end
      if not LANE.complete(fk, id) then p = nil end
    end
    if p then
      fast = true
      done_ids[#done_ids + 1] = id
      done_recs[#done_recs + 1] = id
      done_recs[#done_recs + 1] = record_complete_fast(rec, p, nl, code, now)
      done_purge[#done_purge + 1] = fmt('%d', purge_at({ c = c }, now))
      done_purge[#done_purge + 1] = id
      word, detail = 'COMPLETED', ''
    end
  end
  if not fast then
    local m, payload
    if rec and not written[id] then
      m, payload = split_record(rec)
      overlay(m, lease)
    end
    if not m or m.t ~= token or (m.st ~= 'f' and m.st ~= 'w') then
      word, detail = 'STALE', ''
      -- A delivery of a job cancelled in flight has ended: its slot is free.
      free_cancelled_slot(token)
    elseif kind == 'ok' then
      word, detail = on_success(id, m, payload, now, 'success', code)
    elseif kind == 'delivered' then
      -- The worker has the job; the ack decides. Lease: ackTimeout from now.
      redis.call('HDEL', K_LEASES, id)
      if m.fk then LANE.to_ack(m) end
      m.st = 'w'
      m.sc = code
      m.t = nil
      save(id, m, payload)
      redis.call('ZADD', K_INFLIGHT, '+inf', PLACEHOLDER, now + P.ack_timeout, id)
      redis.call('HINCRBY', K_STATE, 'n_awaiting', 1)
      breaker_reset() -- the webhook answered 2xx: it works
      word, detail = 'AWAITING', tostring(now + P.ack_timeout)
    elseif kind == 'fail' then
      word, detail = on_failure(id, m, payload, now, 'failed', code, err, true, nil, true)
    elseif kind == 'defer' then
      word, detail = on_defer(id, m, payload, now, retry_after, '', reason, code)
    elseif kind == 'release' then
      drop_probe(id)
      if m.fk then LANE.end_probe(m, id, false, now) end
      local order = m.o or now
      leave_inflight(id, m)
      to_waiting(id, m, payload, order)
      word, detail = 'RELEASED', ''
    end -- no other kind: checked before the loop
  end
  if word ~= 'STALE' then written[id] = true end
  out[#out + 1] = word
  out[#out + 1] = detail
  out[#out + 1] = hold_reply(word)
end
if #done_ids > 0 then
  redis.call('ZREM', K_INFLIGHT, unpack(done_ids))
  redis.call('HDEL', K_LEASES, unpack(done_ids))
  redis.call('HSET', K_JOBS, unpack(done_recs))
  redis.call('ZADD', K_PURGE, unpack(done_purge))
  breaker_reset()
end
-- Before a claim in the same call, the lanes are only placed: the claim's
-- own flush writes them, once for both.
LANE.flush(now, claim_max ~= nil and claim_max > 0)
local claim = nil
if claim_max and claim_max > 0 then
  local skip = ARGV[ARG0 + 4 + n * 7] == '0'
  claim = claim_jobs(now, claim_max, ARGV[ARG0 + 3 + n * 7], skip)
end
call_record(out, claim)
stats_settle(KEYS[KX + 2], now, out, n, claim)
if claim then
  for _, v in ipairs(claim) do out[#out + 1] = v end
end
return out
