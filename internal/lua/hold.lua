-- hold.lua — the hold machine of hold/doc.go, written once for any holder:
-- a queue (lib.lua keeps its hold in K_STATE: queue_hold) and a lane of a
-- queue (lanes.lua keeps one per flow key in K_LANES). The first file of
-- every script's prelude; it uses nothing else.
--
-- A holder h is a table with:
--   held      true while held or probing
--   until_ms  the release time (ms, Redis' clock) while held
--   probe     the job id of the probe in flight ("" none)
--   reason    the hold's reason (the defer's that set the latest release)
-- The functions change only h; the caller writes it where it lives.

-- Backpressure asks for a hold until release: the latest release wins, and
-- the hold's reason is that defer's; an earlier one changes nothing.
-- Returns what changed at now, the transition scripts report (store.HoldChange):
-- 'start' (h was open, or probing: its release had passed), 'extend' (held,
-- the release moved later) or nil (an earlier release: nothing).
local function hold_apply(h, release, reason, now)
  if h.held and release <= h.until_ms then return nil end
  local change = (h.held and now and now < h.until_ms) and 'extend' or 'start'
  h.held, h.until_ms, h.reason = true, release, reason or ''
  return change
end

-- What a claim may do at now: 'open' (not held), 'held' (until its
-- release), 'probing' (the probe is in flight: nothing else goes), 'probe'
-- (the release has passed and no probe is out: take exactly one job as the
-- probe). live(id) says whether a probe is still in flight; one that left
-- without an outcome that ended it (a lost lease) is forgotten here.
local function hold_gate(h, now, live)
  if not h.held then return 'open' end
  if now < h.until_ms then return 'held' end
  if h.probe ~= '' then
    if live(h.probe) then return 'probing' end
    h.probe = ''
  end
  return 'probe'
end

-- The claim took job id as the probe.
local function hold_take_probe(h, id)
  h.probe = id
end

-- The probe's delivery ended. A success reopens the holder unless a defer
-- that arrived meanwhile pushed the release past now (then the next job
-- probes after it); anything else makes the next job the probe. Returns
-- true when h reopened.
local function hold_end_probe(h, id, success, now)
  if h.probe ~= id then return false end
  h.probe = ''
  if success and now >= h.until_ms then
    h.held, h.until_ms, h.reason = false, 0, ''
    return true
  end
  return false
end

-- An operator's resume cuts a hold short: the holder goes to probing at
-- once, never straight to open.
local function hold_resume(h, now)
  if h.held and h.until_ms > now then
    h.until_ms = now
    return true
  end
  return false
end
