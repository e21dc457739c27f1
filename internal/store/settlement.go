package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Source says who reported an outcome: the dispatcher, for a delivery it
// made, or an ack-mode worker, over the API.
type Source uint8

// Sources of a Settlement.
const (
	FromDelivery Source = iota
	FromCallback
)

// Settlement is one applied outcome, of a delivery (Settle) or of an
// ack-mode worker's callback (Callback): what was reported and what the
// script did with it. Deliveries and callbacks are the one type so that one
// place (package dispatch) logs, counts, timelines and wakes for both.
type Settlement struct {
	Queue  string
	JobID  string
	Source Source
	// Outcome is the delivery's (FromDelivery).
	Outcome Outcome
	// Callback is the worker's (FromCallback).
	Callback Callback
	// Probe and LaneProbe say the delivery was claimed as its queue's or its
	// lane's probe, Attempt which attempt it was, FlowKey its lane ("" for
	// none): what the claim said (FromDelivery).
	Probe     bool
	LaneProbe bool
	Attempt   int
	FlowKey   string
	// Took is the time from the delivery's start until its outcome was
	// recorded (FromDelivery).
	Took time.Duration
	// Result is what the script did.
	Result Settled
}

// HoldChange is what an outcome did to its queue's hold, as the script
// that applied it reports it (lua/hold.lua hold_apply).
type HoldChange string

// Hold changes; see QueueHold.
const (
	// HoldStarted: the queue was open, or probing (its release had
	// passed), and is held now.
	HoldStarted HoldChange = "start"
	// HoldExtended: the queue was held and its release moved later.
	HoldExtended HoldChange = "extend"
	// HoldKept: the queue was held until later already; nothing changed.
	HoldKept HoldChange = "keep"
)

// QueueHold is what a queue-scope defer or a breaker trip did to the
// queue's hold, on Redis' clock: the transition, the queue's release after
// it and when it happened. The zero value: the outcome asked nothing of
// the queue's hold.
type QueueHold struct {
	Change HoldChange
	// Until is the queue's release time after the outcome: the latest any
	// defer asked for, the one GET /v1/queues/{queue} shows.
	Until time.Time
	// At is Redis' time when the outcome was applied.
	At time.Time
}

// parseHold reads the hold value of a settle or callback reply into s:
// space-separated items (lua/lib.lua hold_reply) — "breaker|<ms>" (the
// outcome tripped the breaker: its release), "key|<ms>" (the lane's
// release it asked for), "hold|<change>|<until ms>|<at ms>" (what it did to
// the queue's hold), "probe" (it ended the queue's probe) and
// "reopen|<at ms>" (the probe's success reopened the queue). Anything else
// is an ErrUnexpectedWord: the scripts and Go disagree.
func parseHold(s *Settled, v any) error {
	h := toStr(v)
	if h == "" {
		return nil
	}
	for _, item := range strings.Split(h, " ") {
		f := strings.Split(item, "|")
		bad := fmt.Errorf("%w: hold %q", ErrUnexpectedWord, item)
		ms := func(i int) (time.Time, bool) {
			if i >= len(f) {
				return time.Time{}, false
			}
			n, err := strconv.ParseInt(f[i], 10, 64)
			return fromMS(n), err == nil
		}
		var ok bool
		switch {
		case f[0] == "breaker" && len(f) == 2:
			s.BreakerUntil, ok = ms(1)
		case f[0] == "key" && len(f) == 2:
			s.LaneUntil, ok = ms(1)
		case f[0] == "hold" && len(f) == 4:
			ch := HoldChange(f[1])
			ok = ch == HoldStarted || ch == HoldExtended || ch == HoldKept
			var uok, aok bool
			s.Hold.Until, uok = ms(2)
			s.Hold.At, aok = ms(3)
			s.Hold.Change, ok = ch, ok && uok && aok
		case f[0] == "probe" && len(f) == 1:
			s.ProbeEnded, ok = true, true
		case f[0] == "reopen" && len(f) == 2:
			s.ReopenedAt, ok = ms(1)
		}
		if !ok {
			return bad
		}
	}
	return nil
}
