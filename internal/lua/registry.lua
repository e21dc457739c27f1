-- registry.lua — list or unlist a queue created over the API in the
-- registry every daemon reads.
--
-- KEYS: KEYS[1] the registry HASH (queue name -> its definition's rev),
--   KEYS[2] the registry's revision STRING, bumped by every change so a
--   daemon learns of any change with one GET. Both share one hash tag, the
--   registry's own slot; this script touches nothing else (the queue's
--   definition is written apart, by queuedef.lua, in the queue's slot).
-- ARGV[1]: "put" or "del"; ARGV[2]: the queue name; ARGV[3]: the
--   definition's rev (put).
-- Returns the registry's new revision.
local K_REGISTRY, K_REGREV = KEYS[1], KEYS[2]
if ARGV[1] == 'put' then
  redis.call('HSET', K_REGISTRY, ARGV[2], ARGV[3])
else
  redis.call('HDEL', K_REGISTRY, ARGV[2])
end
return redis.call('INCR', K_REGREV)
