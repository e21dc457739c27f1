-- control.lua — operator pause and resume.
--
-- KEYS: the queue keys of lib.lua.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: "pause" or "resume"; ARGV[ARG0 + 2]: reason (pause only).
-- pause: nothing is delivered until resume; deliveries in flight finish.
-- resume: ends a pause and also ends a backpressure hold early: a held queue
--   goes to probing, so it still reopens only through one successful probe.
-- Returns {"OK"}.
local op, reason = ARGV[ARG0 + 1], ARGV[ARG0 + 2]
local now = now_ms()
if op == 'pause' then
  redis.call('HSET', K_STATE, 'paused', '1', 'pause_reason', reason)
elseif op == 'resume' then
  redis.call('HSET', K_STATE, 'paused', '0', 'pause_reason', '')
  -- hold.lua: a held queue goes to probing, never straight to open.
  local h = queue_hold()
  if hold_resume(h, now) then redis.call('HSET', K_STATE, 'hold_until', fmt('%d', h.until_ms)) end
else
  return redis.error_reply('control: unknown op ' .. tostring(op))
end
return { 'OK' }
