-- call_begin starts a script call: it sets the keys and the per-call values
-- from this call's KEYS and ARGV, and gives every piece of state the
-- prelude keeps for one call (lib.lua, lanes.lua) its starting value. Run
-- as a script (EVALSHA), the prelude is defined anew for every call; loaded
-- as a Redis Functions library (package lua, Library), it is defined once
-- and each function starts with call_begin, so nothing one call left
-- behind can reach the next. values are the names of the per-call values
-- the script reads, in ARGV order (package lua, callValues).
local function call_begin(keys, argv, values)
  KEYS, ARGV = keys, argv
  K_WAITING, K_INFLIGHT, K_JOBS, K_HIST, K_STATE = keys[1], keys[2], keys[3], keys[4], keys[5]
  K_LIFETIMES, K_DEAD, K_PURGE, K_IDEM, K_STARTS = keys[6], keys[7], keys[8], keys[9], keys[10]
  K_LEASES = keys[11]
  K_LWAIT, K_LANES, K_LREADY, K_LTIMED, K_LHELD, K_LSTARTS = keys[12], keys[13], keys[14], keys[15], keys[16], keys[17]
  K_CALL = keys[KX + 1]
  P, ARG0 = {}, #values
  for i, k in ipairs(values) do P[k] = tonumber(argv[i]) end
  setmetatable(P, P_META)
  rand_step, qhold = 0, nil
  tripped, deferred_scope, deferred_release, fails_zero = nil, nil, nil, false
  hold_notes, reaped = nil, {}
  if lanes_loaded then LANE.reset() end
end
