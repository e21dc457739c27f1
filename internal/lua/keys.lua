-- keys.lua — the lanes of a queue as the keys endpoints see them
-- (keys.md §2, §3, §5): read one, list a page, set or remove a lane's
-- override, resume a held lane. Lanes live in lanes.lua's keys.
--
-- KEYS: the queue keys of lib.lua.
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: op, then per op (Returns after the arrow):
--   get <fk>                        -> {now, fk, lane} or {now}
--   put <fk> <conc> <rmax> <weight> -> {now, fk, lane}; "" leaves a value
--                                      to the queue's flowKeys settings
--   del <fk>                        -> {now, fk, lane} or {now}
--   resume <fk>                     -> {now, fk, lane} or {now}: a held lane
--                                      goes to probing at once
--   list <state> <cursor> <limit>   -> {now, next cursor, fk, lane, ...}
--       state held or probing: K_LHELD by rank (release order), cursor a
--       rank; active or "": K_LANES by HSCAN, cursor HSCAN's ("0" at the
--       end); active leaves held and probing lanes out. Bounded: at most
--       limit lanes, and for HSCAN about limit fields looked at per call.
-- lane: the packed state of lanes.lua (nw|nf|na|held|until|probe|...).
if not conf_load() then return redis.error_reply(NOCONF) end
local op, fk = ARGV[ARG0 + 1], ARGV[ARG0 + 2]
local now = now_ms()

local function answer(L)
  if not L then return { now } end
  return { now, L.fk, LANE.encode(L) }
end

if op == 'get' then
  return answer(LANE.read(fk))
elseif op == 'put' then
  local L = LANE.get(fk)
  L.conc, L.rmax, L.w = ARGV[ARG0 + 3], ARGV[ARG0 + 4], ARGV[ARG0 + 5]
  LANE.mark(L)
  LANE.flush(now)
  return answer(L)
elseif op == 'del' then
  local L = LANE.read(fk)
  if not L then return { now } end
  L.conc, L.rmax, L.w = '', '', ''
  LANE.mark(L)
  LANE.flush(now)
  if L.fresh then return { now } end -- gone: no jobs, no hold
  return answer(L)
elseif op == 'resume' then
  local L = LANE.read(fk)
  if not L then return { now } end
  if hold_resume(L, now) then
    L.atv = '' -- its timed release is spent: place it anew
    LANE.mark(L)
    LANE.flush(now)
  end
  return answer(L)
elseif op == 'list' then
  local state, cursor, limit = ARGV[ARG0 + 2], ARGV[ARG0 + 3], tonumber(ARGV[ARG0 + 4])
  local out = { now, '' }
  if state == 'held' or state == 'probing' then
    local released = redis.call('ZCOUNT', K_LHELD, '-inf', now) -- probing: release passed
    local from, n = 0, released
    if state == 'held' then from, n = released, redis.call('ZCARD', K_LHELD) - released end
    local skip = tonumber(cursor) or 0
    local take = math.min(limit, n - skip)
    local fks = {}
    if take > 0 then fks = redis.call('ZRANGE', K_LHELD, from + skip, from + skip + take - 1) end
    for _, k in ipairs(fks) do
      local L = LANE.read(k)
      if L then
        out[#out + 1] = k
        out[#out + 1] = LANE.encode(L)
      end
    end
    if skip + take < n then out[2] = fmt('%d', skip + take) end
    return out
  end
  local cur = cursor ~= '' and cursor or '0'
  local got = 0
  -- A few HSCAN rounds at most, so a page of active lanes is not starved
  -- by held ones; each round looks at about limit fields.
  for _ = 1, 4 do
    local r = redis.call('HSCAN', K_LANES, cur, 'COUNT', limit)
    cur = r[1]
    local kv = r[2]
    for i = 1, #kv, 2 do
      local L = LANE.decode(kv[i], kv[i + 1])
      if state ~= 'active' or not L.held then
        out[#out + 1] = kv[i]
        out[#out + 1] = kv[i + 1]
        got = got + 1
      end
    end
    if cur == '0' or got >= limit then break end
  end
  out[2] = cur == '0' and '' or cur
  return out
else
  return redis.error_reply('keys: unknown op ' .. tostring(op))
end
