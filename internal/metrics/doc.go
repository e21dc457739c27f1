// Package metrics exposes what an operator of simpleqd needs to watch in
// Prometheus' text format on GET /metrics: delivery outcomes, backpressure
// (holds and probes), dead letters, latency, and the backlog per queue.
//
// Why it is shaped this way:
//
//   - Its own registry, no global state. Nothing is registered with
//     prometheus.DefaultRegisterer, so several daemons in one test process,
//     or a test and a daemon, never collide or see each other's counts, and
//     /metrics shows exactly simpleqd's series (plus the Go runtime and
//     process collectors, which operators expect next to them).
//   - Counters and histograms are this daemon's events, fed by the
//     dispatcher's one outcome pipeline (Claimed, Settled and Reaped, its
//     Observer: deliveries and ack-mode callbacks alike) and the API
//     adapter (Published). Sum them over the fleet in PromQL.
//   - Gauges (simpleqd_jobs, simpleqd_queue_hold_state, simpleqd_held_keys)
//     are not tracked in process at all: a custom Collector reads
//     store.QueueStatus from Redis at scrape time, so every daemon reports
//     the same fleet-wide truth and no in-memory copy can drift. Take max()
//     or any one daemon's series rather than sum() for them.
//   - Bounded cardinality: series are labelled by queue (and outcome,
//     reason, script), never by job or flow key; lanes are counted per
//     queue (simpleqd_lane_holds_total, simpleqd_lane_probes_total).
//
// Holds and probes are counted from what the scripts report of each
// outcome (store.Settled Hold and ProbeEnded, with Redis' times), so no copy
// of a queue's hold is kept here and a start counted by one daemon is a
// start fleet-wide. The gap: transitions made inside Redis scripts without
// a Go caller seeing the result (an expired lease or ack timeout, lifetime
// expiry of a waiting job) are not counted by the event counters; the
// Redis-read gauges still show their effect.
package metrics
