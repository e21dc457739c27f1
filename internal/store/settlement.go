package store

import "time"

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
