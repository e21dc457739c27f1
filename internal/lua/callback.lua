-- callback.lua — apply an ack-mode worker's ack, nack or defer.
--
-- A callback counts whenever the job is in flight or awaiting ack, even before
-- the daemon has read the webhook's 2xx (the daemon's later "delivered" settle
-- then finds its token gone and is ignored).
--
-- KEYS: the queue keys of lib.lua, then KEYS[KX + 1] the queue's statistics
-- (lib.lua stats_flush; lib.lua names KEYS[KX + 1] K_CALL, which this script
-- never uses).
-- ARGV[1] (ARG0 = 1): the per-call value rand, for a nack's jitter (lib.lua).
-- ARGV[ARG0 + 1..7]: id, kind ("ack"|"nack"|"defer"), attempt ("" when not given),
--   retryable ("1"|"0", nack), retryAfter ms (defer), scope ("queue"|"job",
--   defer), reason.
-- Returns {word, detail, hold}:
--   NOTFOUND | CONFLICT <state> | STALE <current attempt> | ACKED (repeat ack
--   of a completed job) | the words of settle.lua for the applied outcome.
--   hold as in settle.lua (callbacks never trip the breaker).
-- REPEATED: the same nack or defer sent again (same kind and attempt,
-- within a minute, while the job waits or has ended): it was applied once
-- and changes nothing now. A worker that retries after a 503 whose callback
-- had been applied (its reply lost to a Redis stall) gets 2xx, not 409.
if not conf_load() then return redis.error_reply(NOCONF) end
local id, kind, attempt = ARGV[ARG0 + 1], ARGV[ARG0 + 2], ARGV[ARG0 + 3]
local retryable = ARGV[ARG0 + 4] == '1'
local retry_after, scope, reason = tonumber(ARGV[ARG0 + 5]), ARGV[ARG0 + 6], ARGV[ARG0 + 7]
local now = now_ms()
local m, payload = load(id)
if not m then return { 'NOTFOUND', '', '' } end
if kind == 'ack' and m.st == 'c' then return { 'ACKED', '', '' } end
if m.lc and m.st ~= 'f' and m.st ~= 'w' then
  local k, att, at = last_callback_parse(m.lc)
  if k == kind and (attempt == '' or attempt == att) and now - at < 60000 then
    return { 'REPEATED', '', '' }
  end
end
if m.st ~= 'f' and m.st ~= 'w' then return { 'CONFLICT', m.st, '' } end
if attempt ~= '' and tonumber(attempt) ~= m.a + 1 then return { 'STALE', tostring(m.a + 1), '' } end
local code = m.sc
m.sc = nil
-- Remembered in the record, written by the transition's own save.
if kind ~= 'ack' then m.lc = last_callback(kind, m.a + 1, now) end
local word, detail
if kind == 'ack' then
  word, detail = on_success(id, m, payload, now, 'acked', code)
elseif kind == 'nack' then
  word, detail = on_failure(id, m, payload, now, 'nacked', code, reason ~= '' and reason or 'nacked', retryable, nil)
elseif kind == 'defer' then
  word, detail = on_defer(id, m, payload, now, retry_after, scope, reason, code)
else
  return redis.error_reply('callback: unknown kind ' .. tostring(kind))
end
local counts = {}
stats_outcome(counts, now, kind, code, word, now + (retry_after or 0), deferred_scope == 'queue')
LANE.flush(now)
stats_flush(KEYS[KX + 1], now, counts)
return { word, detail, hold_reply(word) }
