package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/simpleq/simpleqd/internal/metrics"
	"github.com/simpleq/simpleqd/internal/store"
)

// Lanes (keys.md §5) are counted per queue, never per key: settles and
// callbacks that held a lane count lane holds, claims of lane probes count
// lane probes, and neither touches the queue's holds or probes.
func TestLaneHoldsAndProbes(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	m.InitQueues([]string{"emails"})
	compare(t, m, `
		simpleqd_lane_holds_total{queue="emails"} 0
		simpleqd_lane_probes_total{queue="emails"} 0
	`, "simpleqd_lane_holds_total", "simpleqd_lane_probes_total")

	q := "emails"
	laneDefer := func(id string) {
		settled(m, q, store.Outcome{ID: id, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: time.Second},
			store.Settled{Word: "DEFERRED", Detail: ms(t0.Add(time.Second)), LaneUntil: t0.Add(time.Second)}, time.Millisecond)
	}
	// Two lanes' 429s, each a lane hold; the queue holds nothing.
	laneDefer("a1")
	laneDefer("b1")
	// A lane's probe goes out and is held again; another lane's probe succeeds.
	m.Claimed(q, store.ClaimedJob{ID: "a2", Attempt: 1, LaneProbe: true})
	laneDefer("a2")
	m.Claimed(q, store.ClaimedJob{ID: "b2", Attempt: 1, LaneProbe: true})
	settled(m, q, store.Outcome{ID: "b2", Kind: store.OutcomeOK, StatusCode: 200}, store.Settled{Word: "COMPLETED"}, time.Millisecond)
	// A key-scope defer callback holds a lane too; a job dying of its
	// lane's 429 still held it.
	callback(m, q, store.Callback{JobID: "c1", Kind: store.CallbackDefer, Scope: store.ScopeKey, RetryAfter: time.Second},
		store.Settled{Word: "DEFERRED", Detail: ms(t0.Add(time.Second)), LaneUntil: t0.Add(time.Second)})
	settled(m, q, store.Outcome{ID: "d1", Kind: store.OutcomeDefer, StatusCode: 503, RetryAfter: time.Second},
		store.Settled{Word: "DEAD", Detail: "defer_cap_exhausted", LaneUntil: t0.Add(time.Second)}, time.Millisecond)
	compare(t, m, `
		simpleqd_lane_holds_total{queue="emails"} 5
		simpleqd_lane_probes_total{queue="emails"} 2
		simpleqd_holds_started_total{queue="emails"} 0
	`, "simpleqd_lane_holds_total", "simpleqd_lane_probes_total", "simpleqd_holds_started_total")
	compare(t, m, `
		simpleqd_probes_total{queue="emails",result="success"} 0
		simpleqd_probes_total{queue="emails",result="backpressure"} 0
		simpleqd_probes_total{queue="emails",result="failure"} 0
	`, "simpleqd_probes_total")
}

// simpleqd_held_keys is read from Redis at scrape time with the other
// gauges: one series per queue, whatever the number of lanes.
func TestHeldKeysGauge(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{StatusCacheTTL: -1, Status: func(context.Context) ([]store.QueueStatus, error) {
		return []store.QueueStatus{
			{Name: "emails", Counts: store.Counts{Pending: 100000, HeldKeys: 3}},
			{Name: "tasks"},
		}, nil
	}})
	compare(t, m, `
		simpleqd_held_keys{queue="emails"} 3
		simpleqd_held_keys{queue="tasks"} 0
	`, "simpleqd_held_keys")
}
