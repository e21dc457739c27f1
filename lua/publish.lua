-- publish.lua — store new jobs, atomically per call.
--
-- KEYS: the queue keys of lib.lua.
-- ARGV[1..17]: queue parameters (lib.lua).
-- ARGV[18]: n, the number of jobs; then per job 4 values:
--   id, idempotency key ("" for none), delay ms, raw payload bytes.
-- Returns a flat array, per job: word, id, createdAt ms, state.
--   word "NEW": stored, due at createdAt + delay.
--   word "DUP": the idempotency key names a job still retained; its id,
--   createdAt and state are returned and nothing is written.
local now = now_ms()
local n = tonumber(ARGV[ARG0 + 1])
local out = {}
local added = 0
for i = 0, n - 1 do
  local base = ARG0 + 2 + i * 4
  local id, key, delay, payload = ARGV[base], ARGV[base + 1], tonumber(ARGV[base + 2]), ARGV[base + 3]
  local dup = nil
  if key ~= '' then
    local existing = redis.call('HGET', K_IDEM, key)
    if existing then
      local m = load(existing)
      if m then dup = { 'DUP', existing, m.c, m.st } end
    end
  end
  if dup then
    for _, v in ipairs(dup) do out[#out + 1] = v end
  else
    local due = now + delay
    local m = { c = now, s = due, x = due + P.lifetime, st = 'p', a = 0, d = 0 }
    if key ~= '' then
      m.k = key
      redis.call('HSET', K_IDEM, key, id)
    end
    save(id, m, payload)
    redis.call('ZADD', K_WAITING, due, id)
    added = added + 1
    out[#out + 1] = 'NEW'
    out[#out + 1] = id
    out[#out + 1] = now
    out[#out + 1] = 'p'
  end
end
if added > 0 then redis.call('HINCRBY', K_STATE, 'n_pending', added) end
return out
