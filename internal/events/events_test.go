package events

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

func kinds(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func TestRingKeepsNewestFirstAndWraps(t *testing.T) {
	l := New(3)
	require.Empty(t, l.Recent("q", 10))
	for i := 1; i <= 5; i++ {
		l.Record("q", Event{Kind: KindPause, Reason: strconv.Itoa(i)})
	}
	l.Record("other", Event{Kind: KindResume})
	got := l.Recent("q", 10)
	require.Len(t, got, 3)
	require.Equal(t, []string{"5", "4", "3"}, []string{got[0].Reason, got[1].Reason, got[2].Reason})
	require.Greater(t, got[0].Seq, got[1].Seq)
	require.False(t, got[0].Time.IsZero())
	require.Len(t, l.Recent("q", 2), 2)
	require.Equal(t, "5", l.Recent("q", 1)[0].Reason)
	require.Len(t, l.Recent("other", 10), 1)
	require.Empty(t, l.Recent("q", 0))
}

func TestBackpressureRoundIsTold(t *testing.T) {
	l := New(0)
	require.Equal(t, DefaultCapacity, l.Capacity())
	release := time.UnixMilli(1_800_000_000_000)

	// A 429 holds the queue.
	l.Claimed("q", store.ClaimedJob{ID: "j1", Attempt: 1})
	settled(l, "q", store.Outcome{ID: "j1", Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 1500 * time.Millisecond},
		store.Settled{Word: "DEFERRED", Detail: strconv.FormatInt(release.UnixMilli(), 10),
			Hold: store.QueueHold{Change: store.HoldStarted, Until: release, At: release.Add(-1500 * time.Millisecond)}}, time.Millisecond)
	// The probe goes out and succeeds.
	l.Claimed("q", store.ClaimedJob{ID: "j1", Attempt: 1, DeferCount: 1, Probe: true})
	settled(l, "q", store.Outcome{ID: "j1", Kind: store.OutcomeOK, StatusCode: 200}, store.Settled{Word: "REOPENED"}, time.Millisecond)

	evs := l.Recent("q", 10)
	require.Equal(t, []string{KindReopen, KindDelivery, KindProbe, KindHold, KindDelivery}, kinds(evs))
	hold := evs[3]
	require.Equal(t, release, hold.Until)
	require.Equal(t, 1500*time.Millisecond, hold.RetryAfter)
	require.Equal(t, "deferred", evs[4].Result)
	require.Equal(t, 429, evs[4].StatusCode)
	require.Equal(t, 1, evs[4].Attempt)
	require.True(t, evs[1].Probe)
	require.Equal(t, "reopened", evs[1].Result)
	require.True(t, evs[0].Probe)
	require.Empty(t, l.pending, "settled jobs are forgotten")
}

func TestDeadAndRetry(t *testing.T) {
	l := New(10)
	l.Claimed("q", store.ClaimedJob{ID: "a", Attempt: 1})
	settled(l, "q", store.Outcome{ID: "a", Kind: store.OutcomeFail, StatusCode: 500, Error: "HTTP 500"},
		store.Settled{Word: "RETRY", Detail: "1800000000000"}, 0)
	settled(l, "q", store.Outcome{ID: "b", Kind: store.OutcomeFail, StatusCode: 500, Error: "HTTP 500"},
		store.Settled{Word: "DEAD", Detail: "max_attempts_exhausted"}, 0)
	evs := l.Recent("q", 10)
	require.Equal(t, []string{KindDead, KindDelivery, KindDelivery}, kinds(evs))
	require.Equal(t, "max_attempts_exhausted", evs[0].Reason)
	require.Equal(t, time.UnixMilli(1_800_000_000_000), evs[2].Until)
	require.Zero(t, evs[1].Attempt, "a settle without a claim has no attempt number")
}

func TestCallbacks(t *testing.T) {
	l := New(10)
	callback(l, "q", store.Callback{JobID: "a", Kind: store.CallbackDefer, RetryAfter: 30 * time.Second, Reason: "anthropic 429"},
		store.Settled{Word: "DEFERRED", Detail: "1800000000000",
			Hold: store.QueueHold{Change: store.HoldStarted, Until: time.UnixMilli(1800000000000), At: time.UnixMilli(1799999970000)}})
	callback(l, "q", store.Callback{JobID: "b", Kind: store.CallbackDefer, Scope: store.ScopeJob, RetryAfter: time.Second},
		store.Settled{Word: "DEFERRED", Detail: "1800000000000"})
	callback(l, "q", store.Callback{JobID: "c", Kind: store.CallbackAck}, store.Settled{Word: "REOPENED"})
	callback(l, "q", store.Callback{JobID: "d", Kind: store.CallbackAck}, store.Settled{}) // not applied
	evs := l.Recent("q", 10)
	require.Equal(t, []string{KindReopen, KindCallback, KindCallback, KindHold, KindCallback}, kinds(evs))
	require.Equal(t, "anthropic 429", evs[3].Reason)
	require.Equal(t, "defer", evs[4].Outcome)
	require.Equal(t, "b", evs[2].JobID, "a job-scope defer holds no queue")
}

func TestNilLogAndFanOut(t *testing.T) {
	var l *Log
	l.Record("q", Event{Kind: KindPause})
	l.Claimed("q", store.ClaimedJob{ID: "a", Probe: true})
	settled(l, "q", store.Outcome{ID: "a"}, store.Settled{Word: "COMPLETED"}, 0)
	callback(l, "q", store.Callback{JobID: "a"}, store.Settled{Word: "COMPLETED"})
	require.Empty(t, l.Recent("q", 5))
	require.Zero(t, l.Capacity())

	a, b := New(5), New(5)
	o := Observers(a, nil, b)
	o.Claimed("q", store.ClaimedJob{ID: "x", Probe: true})
	settled(o, "q", store.Outcome{ID: "x", Kind: store.OutcomeOK}, store.Settled{Word: "REOPENED"}, 0)
	require.Len(t, a.Recent("q", 5), 3)
	require.Len(t, b.Recent("q", 5), 3)
}

func TestConcurrentUse(t *testing.T) {
	l := New(16)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				id := strconv.Itoa(g*1000 + i)
				l.Claimed("q", store.ClaimedJob{ID: id, Attempt: 1})
				settled(l, "q", store.Outcome{ID: id, Kind: store.OutcomeOK}, store.Settled{Word: "COMPLETED"}, 0)
				_ = l.Recent("q", 16)
			}
		}()
	}
	wg.Wait()
	evs := l.Recent("q", 100)
	require.Len(t, evs, 16)
	for i := 1; i < len(evs); i++ {
		require.Greater(t, evs[i-1].Seq, evs[i].Seq)
	}
}

// settled and callback report an outcome as the dispatcher's one outcome
// pipeline does: a delivery's, a callback's.
func settled(o interface{ Settled(store.Settlement) }, q string, out store.Outcome, s store.Settled, took time.Duration) {
	o.Settled(store.Settlement{Queue: q, JobID: out.ID, Source: store.FromDelivery, Outcome: out, Took: took, Result: s})
}

func callback(o interface{ Settled(store.Settlement) }, q string, cb store.Callback, s store.Settled) {
	o.Settled(store.Settlement{Queue: q, JobID: cb.JobID, Source: store.FromCallback, Callback: cb, Attempt: cb.Attempt, Result: s})
}

// A probe's event shows when Redis took it (ClaimedJob.ProbeAt), not this
// daemon's clock, which may be off by any amount.
func TestProbeEventHasRedisTime(t *testing.T) {
	l := New(0)
	l.now = func() time.Time { return time.UnixMilli(1_000) } // a daemon clock far off
	at := time.UnixMilli(1_800_000_000_123)
	l.Claimed("q", store.ClaimedJob{ID: "j1", Attempt: 1, Probe: true, ProbeAt: at})
	evs := l.Recent("q", 1)
	require.Equal(t, KindProbe, evs[0].Kind)
	require.Equal(t, at, evs[0].Time)
}
