-- schedindex.lua — the fleet-wide index of queues with schedules: a hint
-- telling daemons when to look at which queue. The per-queue record
-- (schedule.lua) is authoritative; this index only has to never say "later"
-- than the truth, so that no tick is missed, and may say "earlier" (a daemon
-- then looks, finds nothing due, and corrects it).
--
-- Not per queue: its keys share their own hash tag ({~sched}, which no queue
-- name can be) and this script touches nothing else. lib.lua is prepended
-- like to every script; its queue keys and parameters are unused here.
--
-- KEYS: three, on the {~sched} slot:
-- KEYS[1] K_IDX ZSET queue -> the time (ms) a daemon should next look at
--               the queue: a lower bound of the queue's earliest tick, or
--               the end of a daemon's lease on it (take).
-- KEYS[2] K_VER HASH queue -> version, bumped by every lower, so that a
--               daemon's settle does not overwrite a lowering it did not see.
-- KEYS[3] K_IDS HASH schedule id -> its queue (ids are unique fleet-wide,
--               and GET /v1/schedules/{id} names no queue).
-- K_IDX and K_VER also hold lib.lua's PLACEHOLDER (score +inf, version ""),
-- so that they are a skiplist and a hash table rather than listpacks, where
-- a take or a settle of 100 queues would scan the list once per queue (see
-- schedule.lua). It is never a queue (no queue name has a space) nor due.
-- ARGV[1]: the operation, then its arguments. Returns what each operation
-- names after its arrow:
--   lower queue t      before a change that may make the queue's earliest
--                      tick t (create, resume): score = min(score, t); the
--                      version is bumped. -> "OK"
--   take lease max     up to max queues due by Redis' clock; each one's
--                      score becomes now + lease ms, so one daemon looks at
--                      it and another does only if that one died.
--                      -> {wake ms (-1: nothing indexed), queue1, version1, ...}
--   settle queue version earliest [queue version earliest ...]
--                      after a firing round, for each queue of it (one call
--                      per round, not per queue): the version unchanged
--                      since take, the score becomes earliest ("" removes
--                      the queue); otherwise (a lower came meanwhile) it
--                      becomes min(score, earliest). Version "-": a queue
--                      the daemon does not know; earliest is then a delay
--                      in ms until the queue is looked at again. -> "OK"
--   claimid id queue [old]
--                      record the id's queue; an id held by another queue
--                      is answered with that queue's name, unless old
--                      names it (its caller found no schedule there: a
--                      stale entry). -> "OK" or the other queue
--   dropid id queue    forget the id if it still names queue. -> "OK"
local K_IDX, K_VER, K_IDS = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]

local function wake_in(now)
  local first = redis.call('ZRANGE', K_IDX, 0, 0, 'WITHSCORES')
  if not first[2] or first[1] == PLACEHOLDER then return -1 end
  local w = tonumber(first[2]) - now
  if w < 0 then w = 0 end
  return w
end

if op == 'lower' then
  local q, t = ARGV[2], tonumber(ARGV[3])
  redis.call('ZADD', K_IDX, 'NX', '+inf', PLACEHOLDER)
  redis.call('HSETNX', K_VER, PLACEHOLDER, '')
  local cur = redis.call('ZSCORE', K_IDX, q)
  if not cur or t < tonumber(cur) then redis.call('ZADD', K_IDX, fmt('%d', t), q) end
  redis.call('HINCRBY', K_VER, q, 1)
  return 'OK'
end

if op == 'take' then
  local now = now_ms()
  local lease, max = tonumber(ARGV[2]), tonumber(ARGV[3])
  local due = redis.call('ZRANGEBYSCORE', K_IDX, '-inf', now, 'LIMIT', 0, max)
  local out = { 0 }
  if #due > 0 then
    local vers = redis.call('HMGET', K_VER, unpack(due))
    local zadd = {}
    local until_s = fmt('%d', now + lease)
    for i, q in ipairs(due) do
      zadd[#zadd + 1] = until_s
      zadd[#zadd + 1] = q
      out[#out + 1] = q
      out[#out + 1] = vers[i] or '0'
    end
    redis.call('ZADD', K_IDX, unpack(zadd))
  end
  out[1] = wake_in(now)
  return out
end

if op == 'settle' then
  local now
  for b = 2, #ARGV - 2, 3 do
    local q, ver, e = ARGV[b], ARGV[b + 1], ARGV[b + 2]
    if ver == '-' then
      -- The daemon does not know the queue (deleted, or a rolling change):
      -- look again in e ms rather than at every lease's end.
      now = now or now_ms()
      redis.call('ZADD', K_IDX, 'XX', fmt('%d', now + tonumber(e)), q)
    else
      local cur = redis.call('HGET', K_VER, q) or '0'
      if cur == ver then
        if e == '' then
          redis.call('ZREM', K_IDX, q)
        else
          redis.call('ZADD', K_IDX, e, q)
        end
      elseif e ~= '' then
        local score = redis.call('ZSCORE', K_IDX, q)
        if not score or tonumber(e) < tonumber(score) then redis.call('ZADD', K_IDX, e, q) end
      end
    end
  end
  return 'OK'
end

if op == 'claimid' then
  local id, q, old = ARGV[2], ARGV[3], ARGV[4]
  local cur = redis.call('HGET', K_IDS, id)
  if cur and cur ~= q and cur ~= old then return cur end
  redis.call('HSET', K_IDS, id, q)
  return 'OK'
end

if op == 'dropid' then
  local id, q = ARGV[2], ARGV[3]
  if redis.call('HGET', K_IDS, id) == q then redis.call('HDEL', K_IDS, id) end
  return 'OK'
end

return redis.error_reply('schedindex.lua: unknown operation ' .. tostring(op))
