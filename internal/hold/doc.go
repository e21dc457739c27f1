// Package hold is simpleqd's model of rate-aware backpressure: which webhook
// answers are backpressure, how a Retry-After is read, and the queue hold
// state machine. The transitions themselves run inside the Redis scripts so
// every daemon of a fleet sees one hold: lua/hold.lua has them once
// (hold_apply, hold_gate, hold_take_probe, hold_end_probe, hold_resume),
// for the queue (lua/lib.lua's queue_hold) and for each lane of a queue
// alike (flow keys, lua/lanes.lua; keys.md §3). The scripts report each
// queue transition an outcome made as data with Redis' times (a hold
// started, extended or kept and its release, the probe ended, the queue
// reopened: store.Settled Hold, ProbeEnded, ReopenedAt), and metrics and
// the event timeline take them as they are; Go keeps no copy of a hold.
// This package documents them and holds the Go-side rules.
//
// The state machine of one queue:
//
//	        queue-scope defer (429/503/529 or defer callback)
//	┌──────┐ hold_until = max(hold_until, now + retryAfter) ┌──────┐
//	│ open │ ───────────────────────────────────────────────▶│ held │◀─┐
//	└──────┘                                                  └──────┘  │
//	   ▲                                  now ≥ hold_until       │     │ probe reports
//	   │                                  (or operator resume)   ▼     │ backpressure
//	   │  probe succeeds (2xx; ack in   ┌─────────┐ claim takes ┌───────┴────┐
//	   └─────────────── ack mode) ──────│ probing │────────────▶│ probe in   │
//	      and now ≥ hold_until          │ (idle)  │ exactly one │ flight     │
//	                                    └─────────┘◀────────────└────────────┘
//	                                         probe fails, job-scope defer,
//	                                         lease lost: next job probes
//
// Rules the scripts implement (semantics.md §4):
//   - Release times are compared, never Retry-After values: the latest wins,
//     and the hold's reason is that defer's. The time is Redis' clock when
//     the defer is applied.
//   - While held, claim hands out nothing. Deliveries already in flight finish;
//     their defers can push the hold out; their successes do not reopen.
//   - While probing, claim hands out at most one job, the one due next, and
//     nothing else until its outcome is known. If nothing is due, the first
//     job to become due is the probe.
//   - A defer never spends an attempt; it spends one of the reporting job's
//     maxDefers. A queue-scope deferred job waits where it was in line.
//   - pause is a separate operator flag that overrides everything; resume
//     also cuts a hold short (the queue goes to probing, never straight open).
package hold
