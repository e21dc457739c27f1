-- inspect.lua — read a queue's hold state and counts on Redis' clock.
-- Read-only: it never writes, so it may run against a replica.
--
-- KEYS: the queue keys of lib.lua.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- Returns {now ms, paused, pause_reason, hold, hold_until ms, probe_job, reason,
--          waiting, pending, inflight, awaiting, dead}.
local now = now_ms()
local st = redis.call('HMGET', K_STATE, 'paused', 'pause_reason', 'hold', 'hold_until',
  'probe_job', 'reason', 'n_pending', 'n_awaiting', 'n_cslots')
return {
  now, st[1] or '0', st[2] or '', st[3] or '0', st[4] or '0', st[5] or '', st[6] or '',
  -- Keyed jobs wait in K_LWAIT (lanes.lua), the default lane in K_WAITING.
  redis.call('ZCARD', K_WAITING) + redis.call('ZCARD', K_LWAIT), st[7] or '0',
  -- Slots of cancelled deliveries still running are no job's (lib.lua, cancel).
  in_flight() - (tonumber(st[9]) or 0), st[8] or '0',
  redis.call('ZCARD', K_DEAD),
  -- Lanes held or probing (keys.md §5, counts.heldKeys).
  redis.call('ZCARD', K_LHELD),
}
