-- settle.lua — record the outcomes of deliveries this daemon made, fenced by
-- their lease tokens: an outcome whose token is no longer the job's (the lease
-- expired and the job moved on, or a callback already settled it) is ignored,
-- so a daemon that wakes from a pause cannot overwrite newer state.
--
-- KEYS: the queue keys of lib.lua.
-- ARGV[1..17]: queue parameters (lib.lua).
-- ARGV[18]: n outcomes; then per outcome 7 values:
--   id, token, kind, webhook status code ("" if none), error text,
--   retryAfter ms (defer only), reason (defer only).
--   then, optionally, 2 values: max, token prefix — claim up to max jobs in the
--   same call (claim.lua's logic), so a busy daemon refills the slots its
--   outcomes freed with one script call and one round trip instead of two.
--   kind: "ok" standard-mode 2xx; "delivered" ack-mode 2xx (now awaiting ack);
--         "fail" failure; "defer" 429/503/529 (always queue scope);
--         "release" hand the job back untouched (graceful shutdown).
-- Returns a flat array, per outcome: word, detail; followed, when a claim was
-- asked for, by claim.lua's reply {word, wake_ms, jobs...}.
--   COMPLETED | REOPENED (a probe's success reopened the queue) | AWAITING |
--   RETRY <due ms> | DEAD <reason> | DEFERRED <release ms> | RELEASED |
--   STALE (token no longer current: nothing written).
local now = now_ms()
local n = tonumber(ARGV[ARG0 + 1])
local out = {}
local ids = {}
for i = 0, n - 1 do ids[i + 1] = ARGV[ARG0 + 2 + i * 7] end
local recs = n > 0 and redis.call('HMGET', K_JOBS, unpack(ids)) or {}
-- Completions, the common case, are written together after the loop: one
-- ZREM, HSET, HSET and ZADD for the whole batch instead of four commands per
-- job. A job written by this call is not read again in it: its token is
-- spent, so a second outcome for it is STALE.
local written = {}
local done_ids, done_recs, done_hist, done_purge = {}, {}, {}, {}
for i = 0, n - 1 do
  local b = ARG0 + 2 + i * 7
  local id, token, kind = ARGV[b], ARGV[b + 1], ARGV[b + 2]
  local code = tonumber(ARGV[b + 3])
  local err, retry_after, reason = ARGV[b + 4], tonumber(ARGV[b + 5]), ARGV[b + 6]
  local m, payload
  if recs[i + 1] and not written[id] then m, payload = split_record(recs[i + 1]) end
  local word, detail
  if not m or m.t ~= token or (m.st ~= 'f' and m.st ~= 'w') then
    word, detail = 'STALE', ''
  elseif kind == 'ok' and m.st == 'f' and not is_probe(id) then
    -- on_success for an ordinary standard-mode delivery, batched.
    local e = encode_entry({ attempt = m.a + 1, status = 'success', ts = now, code = code, probe = m.pr and true or nil })
    local first = no_history(m)
    m.t, m.pr, m.sc = nil, nil, nil
    m.a = m.a + 1
    m.st = 'c'
    m.ca = now
    done_ids[#done_ids + 1] = id
    done_recs[#done_recs + 1] = id
    done_recs[#done_recs + 1] = encode_meta(m) .. '\n' .. payload
    if first then
      done_hist[#done_hist + 1] = id
      done_hist[#done_hist + 1] = e
    else
      hist_append_encoded(id, e)
    end
    done_purge[#done_purge + 1] = fmt('%d', purge_at(m, now))
    done_purge[#done_purge + 1] = id
    word, detail = 'COMPLETED', ''
  elseif kind == 'ok' then
    word, detail = on_success(id, m, payload, now, 'success', code)
  elseif kind == 'delivered' then
    -- The worker has the job; the ack decides. Lease: ackTimeout from now.
    m.st = 'w'
    m.sc = code
    m.t = nil
    save(id, m, payload)
    redis.call('ZADD', K_INFLIGHT, now + P.ack_timeout, id)
    redis.call('HINCRBY', K_STATE, 'n_awaiting', 1)
    word, detail = 'AWAITING', tostring(now + P.ack_timeout)
  elseif kind == 'fail' then
    word, detail = on_failure(id, m, payload, now, 'failed', code, err, true, nil)
  elseif kind == 'defer' then
    word, detail = on_defer(id, m, payload, now, retry_after, 'queue', reason, code)
  elseif kind == 'release' then
    drop_probe(id)
    local order = m.o or now
    leave_inflight(id, m)
    to_waiting(id, m, payload, order)
    word, detail = 'RELEASED', ''
  else
    return redis.error_reply('settle: unknown outcome kind ' .. tostring(kind))
  end
  if word ~= 'STALE' then written[id] = true end
  out[#out + 1] = word
  out[#out + 1] = detail
end
if #done_ids > 0 then
  redis.call('ZREM', K_INFLIGHT, unpack(done_ids))
  redis.call('HSET', K_JOBS, unpack(done_recs))
  if #done_hist > 0 then redis.call('HSET', K_HIST, unpack(done_hist)) end
  redis.call('ZADD', K_PURGE, unpack(done_purge))
end
local claim_max = tonumber(ARGV[ARG0 + 2 + n * 7])
if claim_max and claim_max > 0 then
  for _, v in ipairs(claim_jobs(now, claim_max, ARGV[ARG0 + 3 + n * 7])) do out[#out + 1] = v end
end
return out
