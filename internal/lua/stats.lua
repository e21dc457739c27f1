-- stats.lua — read a queue's statistics buckets (lib.lua stats_flush) on
-- Redis' clock, so every daemon answers the same. Read-only.
--
-- KEYS: the queue keys of lib.lua (unused), then KEYS[KX + 1] the queue's
-- statistics hash (lib.lua names KEYS[KX + 1] K_CALL; this script never uses the
-- call log).
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: since, ms ("" = until - 1 h); ARGV[ARG0 + 2]: until, ms ("" = now).
-- Both are clamped to the retention (STATS_MINUTES back from now).
-- Returns {now, since, until, holds, n, then per bucket that has counts
-- between since and until (by minute, ascending) 1 + #STATS_COUNTERS
-- values: minute, then each counter in STATS_COUNTERS order ("" for 0)}.
-- holds: the hold windows that overlap [since, until], "<from>-<until>"
-- comma-joined (ms).
local K_STATS = KEYS[KX + 1]
local now = now_ms()
local until_ms = tonumber(ARGV[ARG0 + 2]) or now
local since_ms = tonumber(ARGV[ARG0 + 1]) or (until_ms - 3600000)
local oldest = (math.floor(now / 60000) - STATS_MINUTES + 1) * 60000
if since_ms < oldest then since_ms = oldest end
if until_ms > now then until_ms = now end
local first, last = math.floor(since_ms / 60000), math.floor(until_ms / 60000)
local st = redis.call('HMGET', K_STATS, 'mins', 'holds')
local minutes = {}
if st[1] and since_ms <= until_ms then
  for _, m in ipairs(split(st[1], ',')) do
    local v = tonumber(m)
    if v >= first and v <= last then minutes[#minutes + 1] = m end
  end
end
local holds = {}
if st[2] and st[2] ~= '' then
  for _, w in ipairs(split(st[2], ',')) do
    local a, b = string.match(w, '^(%d+)%-(%d+)$')
    if a and tonumber(b) >= since_ms and tonumber(a) <= until_ms then holds[#holds + 1] = w end
  end
end
local out = { now, fmt('%d', since_ms), fmt('%d', until_ms), table.concat(holds, ','), #minutes }
if #minutes > 0 then
  local fields = {}
  for _, m in ipairs(minutes) do
    for _, name in ipairs(STATS_COUNTERS) do fields[#fields + 1] = m .. ':' .. name end
  end
  local vals = {}
  for i = 1, #fields, 900 do
    local got = redis.call('HMGET', K_STATS, unpack(fields, i, math.min(i + 899, #fields)))
    for _, v in ipairs(got) do vals[#vals + 1] = v end
  end
  local k = 1
  for _, m in ipairs(minutes) do
    out[#out + 1] = m
    for _ = 1, #STATS_COUNTERS do
      out[#out + 1] = vals[k] or ''
      k = k + 1
    end
  end
end
return out
