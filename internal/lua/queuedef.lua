-- queuedef.lua — write the definition of a queue created over the API.
--
-- KEYS: the queue keys of lib.lua, then KEYS[KX + 1] K_META, the queue's
--   definition HASH: spec (the settings as given, JSON, secret included),
--   rev (the definition's revision, from 1), created and updated (ms), and
--   deleting ("1" while a DELETE removes the queue's jobs; queuedrop.lua).
-- No per-call values (ARG0 = 0, lib.lua): the arguments below start at ARGV[1].
-- ARGV[ARG0 + 1]: the revision the caller read ("" for none: write whatever is
--   stored, PUT; a PATCH sends the revision it merged into).
-- ARGV[ARG0 + 2]: the spec JSON.
-- ARGV[ARG0 + 3..5]: the limits the spec sets, "" where it leaves them to the
--   file's defaults: concurrency, rateLimitMax, rateLimitWindow ms. They go
--   to K_STATE (lim_conc, lim_rmax, lim_rwin), where every claim reads them
--   (lib.lua claim_jobs): whatever copy of the definition a daemon holds,
--   the fleet claims under the limits written last, so a lowered limit
--   holds at once and only jobs already in flight can exceed it.
-- Returns {"CREATED"|"REPLACED", rev, created ms} when written;
--   {"CONFLICT", rev} when the stored revision is not ARGV[ARG0 + 1] (another
--   write came between the caller's read and this one: read and merge
--   again); {"DELETING"} while a delete is under way.
local K_META = KEYS[KX + 1]
local want, spec = ARGV[ARG0 + 1], ARGV[ARG0 + 2]
local lims = { { 'lim_conc', ARGV[ARG0 + 3] }, { 'lim_rmax', ARGV[ARG0 + 4] }, { 'lim_rwin', ARGV[ARG0 + 5] } }
local cur = redis.call('HMGET', K_META, 'rev', 'created', 'deleting')
if cur[3] == '1' then return { 'DELETING' } end
local rev = tonumber(cur[1] or '0')
if want ~= '' and tonumber(want) ~= rev then return { 'CONFLICT', rev } end
local now = now_ms()
local created = cur[2] or fmt('%d', now)
rev = rev + 1
redis.call('HSET', K_META, 'spec', spec, 'rev', rev, 'created', created, 'updated', fmt('%d', now))
for _, l in ipairs(lims) do
  if l[2] == '' then
    redis.call('HDEL', K_STATE, l[1])
  else
    redis.call('HSET', K_STATE, l[1], l[2])
  end
end
if cur[1] then return { 'REPLACED', rev, created } end
return { 'CREATED', rev, created }
