-- claim.lua — hand out due jobs for delivery, atomically enforcing, fleet-wide:
-- pause, the backpressure hold, the single probe, concurrency and the sliding
-- rate-limit window. Runs bounded housekeeping (lib.lua maintain) first.
--
-- KEYS: the queue keys of lib.lua.
-- KEYS[KX + 1] (18): the call log of this token prefix (lib.lua K_CALL).
-- KEYS[KX + 2] (19): the queue's statistics (lib.lua stats_flush).
-- ARGV[1..ARG0] (ARG0 = 3): the per-call values rand, batch, lease (lib.lua).
-- ARGV[ARG0 + 1]: max, the most jobs this caller can take now (its free local slots).
--           0: housekeeping only (a caller whose slots are all busy); the
--           reply is BUSY with the time the housekeeping is next needed.
-- ARGV[ARG0 + 2]: token prefix, unique per call (from Go, the same when a call is
--           sent again); job i's lease token is prefix.."|"..i.."|"..order.
--           A call whose prefix was seen within one lease answers with the
--           jobs that call leased, still leased (the call log, lib.lua).
-- Returns {word, wake_ms, n, reaped..., jobs...}:
--   wake_ms: milliseconds (Redis clock) until this queue next needs a claim
--            (a job falls due, the hold releases, a lease or lifetime ends, the
--            rate window frees a slot), or -1 when only a wake-up message can
--            change anything.
--   word: CLAIMED (jobs follow), EMPTY (nothing due), PAUSED, HELD (hold not yet
--         released), PROBING (the probe is in flight; nothing else may go),
--         BUSY (concurrency reached), RATE (rate window full).
--   n, reaped: what the housekeeping did to jobs no daemon was watching, n
--         entries of 4 values: kind ("lease_expired"|"ack_timeout"|"lifetime"),
--         job id, word (RETRY|DEAD) and detail (due ms | dead reason).
--   jobs: per job 4 values: id, lease token, probe ("1"|"0"), and the job's
--         record as stored (meta JSON, "\n", raw payload). The record is
--         handed over undecoded: the daemon reads attempts, defers and
--         createdAt from its meta, which is cheaper there than in Lua.
local again = call_replay(0, ARGV[ARG0 + 2])
if again then return again end
if not conf_load() then return redis.error_reply(NOCONF) end
local now = now_ms()
local r = claim_jobs(now, tonumber(ARGV[ARG0 + 1]), ARGV[ARG0 + 2])
if r[1] == 'CLAIMED' then call_record({}, r) end
local counts = {}
stats_claim(counts, r)
stats_flush(KEYS[KX + 2], now, counts)
return r
