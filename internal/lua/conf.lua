-- conf.lua — write a queue's settings (K_STATE conf; lib.lua conf_load has
-- the layout), the ones every script that reads a setting enforces.
--
-- KEYS: the queue keys of lib.lua, then KEYS[KX + 1] K_META, the queue's
--   definition hash (queuedef.lua).
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: the settings as text (conf), ARG0 + 2 the same as
--   MessagePack (confm); lib.lua conf_load reads them.
-- ARGV[ARG0 + 3]: "1" for a queue created over the API: its settings are
--   written only while its definition exists, so a daemon whose copy of a
--   deleted queue is a moment old cannot bring back the state hash the
--   deletion removed (queuedrop.lua). "0" for a queue from the file.
-- Returns {"OK"} when written; {"GONE"} when the definition is not there.
local K_META = KEYS[KX + 1]
if ARGV[ARG0 + 3] == '1' and redis.call('EXISTS', K_META) == 0 then return { 'GONE' } end
redis.call('HSET', K_STATE, 'conf', ARGV[ARG0 + 1], 'confm', ARGV[ARG0 + 2])
return { 'OK' }
