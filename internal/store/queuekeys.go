package store

// QueueKeys are the keys of one queue, by name, as lib.lua declares them
// (K_WAITING .. K_LSTARTS). Every one carries the queue's hash tag, so a
// queue's keys live in one Redis Cluster slot. Code that reads a key
// directly (GetJob, ListDead) names it; scripts get them all, in lib.lua's
// order, from List.
type QueueKeys struct {
	Waiting, Inflight, Jobs, Hist, State, Lifetimes, Dead, Purge, Idem, Starts, Leases string
	// Flow keys' lanes (lanes.lua).
	LWait, Lanes, LReady, LTimed, LHeld, LStarts string
}

// queueKeyCount is lib.lua's KX: the number of queue keys every script
// gets before its own.
const queueKeyCount = 17

// List gives the keys as a script's KEYS, in lib.lua's order (KEYS[1] ..
// KEYS[17]), followed by extra, the script's own keys (KEYS[KX + 1] ...).
func (k QueueKeys) List(extra ...string) []string {
	out := make([]string, 0, queueKeyCount+len(extra))
	out = append(out,
		k.Waiting, k.Inflight, k.Jobs, k.Hist, k.State, k.Lifetimes, k.Dead, k.Purge, k.Idem, k.Starts, k.Leases,
		k.LWait, k.Lanes, k.LReady, k.LTimed, k.LHeld, k.LStarts)
	return append(out, extra...)
}

// Keys returns the keys of one queue.
func (s *Store) Keys(queue string) QueueKeys {
	base := s.opts.Prefix + ":{" + queue + "}:"
	return QueueKeys{
		Waiting: base + "waiting", Inflight: base + "inflight", Jobs: base + "jobs", Hist: base + "hist",
		State: base + "state", Lifetimes: base + "lifetimes", Dead: base + "dead", Purge: base + "purge",
		Idem: base + "idem", Starts: base + "starts", Leases: base + "leases",
		LWait: base + "lwait", Lanes: base + "lanes", LReady: base + "lready", LTimed: base + "ltimed",
		LHeld: base + "lheld", LStarts: base + "lstarts",
	}
}
