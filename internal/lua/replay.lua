-- replay.lua — move dead jobs back to waiting: same id and history, attempts
-- and defers reset, a fresh lifetime from now, pending again.
--
-- KEYS: the queue keys of lib.lua.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: "ids" or "all"; ARGV[ARG0 + 2..]: job ids (ids), or ARGV[ARG0 + 2] = the most
--   to replay in this call (all; the caller repeats while more remain).
-- Returns {replayed, remaining dead}.
if not conf_load() then return redis.error_reply(NOCONF) end
local now = now_ms()
local ids
if ARGV[ARG0 + 1] == 'all' then
  ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[ARG0 + 2]) - 1)
else
  ids = {}
  for i = ARG0 + 2, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local n = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', K_DEAD, id) == 1 then
    local m, payload = load(id)
    if m then
      redis.call('ZREM', K_PURGE, id)
      m.a, m.d, m.dr, m.ca, m.o = 0, 0, nil, nil, nil
      m.h = 1 -- the history stays: later entries append to it
      m.s = now
      m.x = now + P.lifetime
      to_waiting(id, m, payload, now)
      n = n + 1
    end
  end
end
return { n, redis.call('ZCARD', K_DEAD) }
