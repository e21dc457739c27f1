package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/lua"
	"github.com/simpleq/simpleqd/internal/metrics"
	"github.com/simpleq/simpleqd/internal/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newMetrics(opts metrics.Options) *metrics.Metrics {
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0 }
	}
	return metrics.New(opts)
}

// compare checks the named series against Prometheus text (HELP/TYPE lines
// are taken from the registry, so only samples need writing).
func compare(t *testing.T, m *metrics.Metrics, expected string, names ...string) {
	t.Helper()
	var full strings.Builder
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, name := range names {
		for _, mf := range mfs {
			if mf.GetName() == name {
				full.WriteString("# HELP " + name + " " + mf.GetHelp() + "\n")
				full.WriteString("# TYPE " + name + " " + strings.ToLower(mf.GetType().String()) + "\n")
			}
		}
		for _, line := range strings.Split(expected, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") ||
				strings.HasPrefix(line, name+"_bucket") || strings.HasPrefix(line, name+"_sum") || strings.HasPrefix(line, name+"_count") {
				full.WriteString(line + "\n")
			}
		}
	}
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(full.String()), names...))
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func TestPublishedAndDead(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	m.Published("emails", 3)
	m.Published("emails", 0)
	m.Published("tasks", 1)
	m.Dead("emails", "nacked")
	compare(t, m, `
		simpleqd_jobs_published_total{queue="emails"} 3
		simpleqd_jobs_published_total{queue="tasks"} 1
		simpleqd_jobs_dead_total{queue="emails",reason="nacked"} 1
	`, "simpleqd_jobs_published_total", "simpleqd_jobs_dead_total")
}

func TestDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	q := "emails"
	settle := func(kind store.OutcomeKind, errText string, word store.SettleWord, detail string) {
		settled(m, q, store.Outcome{ID: "j", Kind: kind, Error: errText, RetryAfter: time.Second},
			store.Settled{Word: word, Detail: detail}, 250*time.Millisecond)
	}
	release := ms(t0.Add(time.Second))
	settle(store.OutcomeOK, "", "COMPLETED", "")
	settle(store.OutcomeDelivered, "", "AWAITING", "1")
	settle(store.OutcomeFail, "webhook responded 500", "RETRY", "1")
	settle(store.OutcomeFail, "connection error: refused", "DEAD", "max_attempts_exhausted")
	settle(store.OutcomeFail, "timeout after 15s", "RETRY", "1")
	settle(store.OutcomeFail, "timeout after 15s", "DEAD", "lifetime_exceeded")
	settle(store.OutcomeDefer, "", "DEFERRED", release)
	settle(store.OutcomeDefer, "", "DEAD", "defer_cap_exhausted")
	settle(store.OutcomeRelease, "", "RELEASED", "")
	settle(store.OutcomeOK, "", "STALE", "") // the webhook answered 2xx; the job had moved on
	compare(t, m, `
		simpleqd_deliveries_total{outcome="success",queue="emails"} 3
		simpleqd_deliveries_total{outcome="failure",queue="emails"} 2
		simpleqd_deliveries_total{outcome="timeout",queue="emails"} 2
		simpleqd_deliveries_total{outcome="backpressure",queue="emails"} 2
		simpleqd_deliveries_total{outcome="released",queue="emails"} 1
		simpleqd_jobs_dead_total{queue="emails",reason="defer_cap_exhausted"} 1
		simpleqd_jobs_dead_total{queue="emails",reason="lifetime_exceeded"} 1
		simpleqd_jobs_dead_total{queue="emails",reason="max_attempts_exhausted"} 1
	`, "simpleqd_deliveries_total", "simpleqd_jobs_dead_total")
	// A released delivery was cut short at shutdown: no duration sample.
	require.Equal(t, 1, testutil.CollectAndCount(m.Registry(), "simpleqd_delivery_duration_seconds"))
	compare(t, m, `
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.005"} 0
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.01"} 0
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.025"} 0
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.05"} 0
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.1"} 0
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.25"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="0.5"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="1"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="2.5"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="5"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="10"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="15"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="30"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="60"} 9
		simpleqd_delivery_duration_seconds_bucket{queue="emails",le="+Inf"} 9
		simpleqd_delivery_duration_seconds_sum{queue="emails"} 2.25
		simpleqd_delivery_duration_seconds_count{queue="emails"} 9
	`, "simpleqd_delivery_duration_seconds")
}

func TestPublishToDeliveryFirstAttemptsOnly(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	m.Claimed("q", store.ClaimedJob{ID: "a", Attempt: 1, CreatedAt: t0.Add(-2 * time.Second)})
	m.Claimed("q", store.ClaimedJob{ID: "b", Attempt: 1, CreatedAt: t0.Add(time.Millisecond)}) // clock skew: clamped to 0
	m.Claimed("q", store.ClaimedJob{ID: "c", Attempt: 2, CreatedAt: t0.Add(-time.Hour)})       // a retry
	m.Claimed("q", store.ClaimedJob{ID: "d", Attempt: 1, DeferCount: 1, CreatedAt: t0.Add(-time.Hour)})
	var sum, count string
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "simpleqd_publish_to_delivery_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			sum = strconv.FormatFloat(h.GetSampleSum(), 'f', -1, 64)
			count = strconv.FormatUint(h.GetSampleCount(), 10)
		}
	}
	require.Equal(t, "2", count)
	require.Equal(t, "2", sum)
}

func TestProbeResultsAndHolds(t *testing.T) {
	t.Parallel()
	now := t0
	m := newMetrics(metrics.Options{Now: func() time.Time { return now }})
	q := "emails"
	// What settle.lua reported of each outcome's effect on the queue's hold
	// (store.Settled Hold, ProbeEnded), on Redis' clock: the counts follow
	// it, with no copy of the hold kept here.
	hold := func(change store.HoldChange, at time.Time, until time.Time) store.QueueHold {
		return store.QueueHold{Change: change, Until: until, At: at}
	}
	defer429 := func(id string, at time.Time, ra time.Duration, h store.QueueHold, probe bool) {
		settled(m, q, store.Outcome{ID: id, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: ra},
			store.Settled{Word: "DEFERRED", Detail: ms(at.Add(ra)), Hold: h, ProbeEnded: probe}, time.Millisecond)
	}
	// Two in-flight deliveries are rate limited: the second defer (T+4s, 2s)
	// pushes the hold out (T+6 > T+5) but starts nothing new.
	defer429("a", t0, 5*time.Second, hold(store.HoldStarted, t0, t0.Add(5*time.Second)), false)
	defer429("b", t0.Add(4*time.Second), 2*time.Second, hold(store.HoldExtended, t0.Add(4*time.Second), t0.Add(6*time.Second)), false)
	// An operator resume cut the hold short at T+5.5 and the probe is rate
	// limited again: a new hold, though T+5.5 is inside the release (T+6)
	// the last defer asked for.
	m.Claimed(q, store.ClaimedJob{ID: "a", Attempt: 1, DeferCount: 1, Probe: true})
	defer429("a", t0.Add(5500*time.Millisecond), 10*time.Second,
		hold(store.HoldStarted, t0.Add(5500*time.Millisecond), t0.Add(15500*time.Millisecond)), true)
	// The next probe fails (the next job probes), then one succeeds.
	m.Claimed(q, store.ClaimedJob{ID: "a", Attempt: 1, DeferCount: 2, Probe: true})
	settled(m, q, store.Outcome{ID: "a", Kind: store.OutcomeFail, StatusCode: 500}, store.Settled{Word: "RETRY", Detail: "1", ProbeEnded: true}, time.Millisecond)
	m.Claimed(q, store.ClaimedJob{ID: "b", Attempt: 1, DeferCount: 1, Probe: true})
	settled(m, q, store.Outcome{ID: "b", Kind: store.OutcomeOK, StatusCode: 200}, store.Settled{Word: "REOPENED", ProbeEnded: true, ReopenedAt: t0.Add(16 * time.Second)}, time.Millisecond)
	// A defer after the reopen starts a hold even though its time is before
	// the last release a defer asked for (an operator resume ended it early).
	defer429("c", t0.Add(8*time.Second), time.Second, hold(store.HoldStarted, t0.Add(8*time.Second), t0.Add(9*time.Second)), false)
	// A non-probe failure is no probe result.
	settled(m, q, store.Outcome{ID: "d", Kind: store.OutcomeFail}, store.Settled{Word: "RETRY", Detail: "1"}, time.Millisecond)
	// A probe handed back at shutdown has no result.
	m.Claimed(q, store.ClaimedJob{ID: "e", Attempt: 1, Probe: true})
	settled(m, q, store.Outcome{ID: "e", Kind: store.OutcomeRelease}, store.Settled{Word: "RELEASED", ProbeEnded: true}, time.Millisecond)
	// A probe that dies of its defer still holds the queue: backpressure.
	now = t0.Add(time.Hour)
	m.Claimed(q, store.ClaimedJob{ID: "f", Attempt: 1, DeferCount: 50, Probe: true})
	settled(m, q, store.Outcome{ID: "f", Kind: store.OutcomeDefer, StatusCode: 503, RetryAfter: time.Minute},
		store.Settled{Word: "DEAD", Detail: "defer_cap_exhausted", ProbeEnded: true,
			Hold: hold(store.HoldStarted, now, now.Add(time.Minute))}, time.Millisecond)
	compare(t, m, `
		simpleqd_probes_total{queue="emails",result="success"} 1
		simpleqd_probes_total{queue="emails",result="backpressure"} 2
		simpleqd_probes_total{queue="emails",result="failure"} 1
		simpleqd_holds_started_total{queue="emails"} 4
	`, "simpleqd_probes_total", "simpleqd_holds_started_total")
}

func TestAckModeProbeResolvesOnCallback(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	q := "tasks"
	// The probe's 2xx only means the worker has it: no result yet.
	m.Claimed(q, store.ClaimedJob{ID: "p1", Attempt: 1, Probe: true})
	settled(m, q, store.Outcome{ID: "p1", Kind: store.OutcomeDelivered, StatusCode: 202}, store.Settled{Word: "AWAITING", Detail: "1"}, time.Millisecond)
	compare(t, m, `simpleqd_deliveries_total{outcome="success",queue="tasks"} 1`, "simpleqd_deliveries_total")
	require.Equal(t, 0, testutil.CollectAndCount(m.Registry(), "simpleqd_probes_total"))

	// nack: the next job probes (callback.lua reports that it ended the probe).
	callback(m, q, store.Callback{JobID: "p1", Kind: store.CallbackNack, Retryable: true}, store.Settled{Word: "RETRY", Detail: "1", ProbeEnded: true})
	// A job-scope defer of a probe does not hold the queue: a failed probe.
	m.Claimed(q, store.ClaimedJob{ID: "p2", Attempt: 1, Probe: true})
	settled(m, q, store.Outcome{ID: "p2", Kind: store.OutcomeDelivered}, store.Settled{Word: "AWAITING", Detail: "1"}, time.Millisecond)
	callback(m, q, store.Callback{JobID: "p2", Kind: store.CallbackDefer, Scope: store.ScopeJob, RetryAfter: time.Second},
		store.Settled{Word: "DEFERRED", Detail: ms(t0.Add(time.Second)), ProbeEnded: true})
	// A queue-scope defer holds it again.
	m.Claimed(q, store.ClaimedJob{ID: "p3", Attempt: 1, Probe: true})
	settled(m, q, store.Outcome{ID: "p3", Kind: store.OutcomeDelivered}, store.Settled{Word: "AWAITING", Detail: "1"}, time.Millisecond)
	callback(m, q, store.Callback{JobID: "p3", Kind: store.CallbackDefer, Scope: store.ScopeQueue, RetryAfter: time.Second},
		store.Settled{Word: "DEFERRED", Detail: ms(t0.Add(time.Second)), ProbeEnded: true,
			Hold: store.QueueHold{Change: store.HoldStarted, Until: t0.Add(time.Second), At: t0}})
	// An ack that reopens counts even on a daemon that did not deliver it.
	callback(m, q, store.Callback{JobID: "elsewhere", Kind: store.CallbackAck}, store.Settled{Word: "REOPENED", ProbeEnded: true})
	// A nack of a job that was not a probe: no probe result; its death counts.
	callback(m, q, store.Callback{JobID: "x", Kind: store.CallbackNack}, store.Settled{Word: "DEAD", Detail: "nacked"})
	// A repeated ack changes nothing.
	callback(m, q, store.Callback{JobID: "x", Kind: store.CallbackAck}, store.Settled{Word: "ACKED"})
	compare(t, m, `
		simpleqd_probes_total{queue="tasks",result="success"} 1
		simpleqd_probes_total{queue="tasks",result="backpressure"} 1
		simpleqd_probes_total{queue="tasks",result="failure"} 2
		simpleqd_holds_started_total{queue="tasks"} 1
		simpleqd_jobs_dead_total{queue="tasks",reason="nacked"} 1
	`, "simpleqd_probes_total", "simpleqd_holds_started_total", "simpleqd_jobs_dead_total")
}

func TestInitQueuesCreatesZeroSeries(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	m.InitQueues([]string{"a", "b"})
	compare(t, m, `
		simpleqd_deliveries_total{outcome="backpressure",queue="a"} 0
		simpleqd_deliveries_total{outcome="failure",queue="a"} 0
		simpleqd_deliveries_total{outcome="released",queue="a"} 0
		simpleqd_deliveries_total{outcome="success",queue="a"} 0
		simpleqd_deliveries_total{outcome="timeout",queue="a"} 0
		simpleqd_deliveries_total{outcome="backpressure",queue="b"} 0
		simpleqd_deliveries_total{outcome="failure",queue="b"} 0
		simpleqd_deliveries_total{outcome="released",queue="b"} 0
		simpleqd_deliveries_total{outcome="success",queue="b"} 0
		simpleqd_deliveries_total{outcome="timeout",queue="b"} 0
		simpleqd_holds_started_total{queue="a"} 0
		simpleqd_holds_started_total{queue="b"} 0
	`, "simpleqd_deliveries_total", "simpleqd_holds_started_total")
	require.Equal(t, 12, testutil.CollectAndCount(m.Registry(), "simpleqd_jobs_dead_total"))
	require.Equal(t, 6, testutil.CollectAndCount(m.Registry(), "simpleqd_probes_total"))
}

// TestQueueSeriesAtFirstUse: a queue not initialised up front (one created
// over the API) has no series until an event touches them, and then only
// those it touched: idle queues cost the registry nothing.
func TestQueueSeriesAtFirstUse(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{})
	m.InitQueues([]string{"filed"})
	require.Equal(t, 5, testutil.CollectAndCount(m.Registry(), "simpleqd_deliveries_total"), "the file's queue only")
	m.Published("cust-1", 2)
	compare(t, m, `
		simpleqd_jobs_published_total{queue="cust-1"} 2
		simpleqd_jobs_published_total{queue="filed"} 0
		simpleqd_holds_started_total{queue="filed"} 0
	`, "simpleqd_jobs_published_total", "simpleqd_holds_started_total")
	require.Equal(t, 5, testutil.CollectAndCount(m.Registry(), "simpleqd_deliveries_total"))
	settled(m, "cust-1", store.Outcome{Kind: store.OutcomeOK}, store.Settled{Word: "COMPLETED"}, time.Millisecond)
	require.Equal(t, 6, testutil.CollectAndCount(m.Registry(), "simpleqd_deliveries_total"))
}

func TestGaugesReadAtScrapeTime(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	var fail error
	noDeadline := false
	until := t0
	// No cache, so each Gather below sees the latest answer (the cache has
	// its own tests).
	m := newMetrics(metrics.Options{StatusCacheTTL: -1, Status: func(ctx context.Context) ([]store.QueueStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if _, ok := ctx.Deadline(); !ok {
			noDeadline = true // a scrape must not wait on Redis forever
		}
		sts := []store.QueueStatus{
			{Name: "emails", Counts: store.Counts{Pending: 4, Processing: 3, AwaitingAck: 2, Dead: 1},
				Hold: store.Hold{State: store.HoldHeld, Until: &until}},
		}
		if fail != nil {
			return sts, fail
		}
		return append(sts, store.QueueStatus{Name: "tasks"}), nil
	}})
	compare(t, m, `
		simpleqd_jobs{queue="emails",status="pending"} 4
		simpleqd_jobs{queue="emails",status="processing"} 3
		simpleqd_jobs{queue="emails",status="awaiting_ack"} 2
		simpleqd_jobs{queue="emails",status="dead"} 1
		simpleqd_jobs{queue="tasks",status="pending"} 0
		simpleqd_jobs{queue="tasks",status="processing"} 0
		simpleqd_jobs{queue="tasks",status="awaiting_ack"} 0
		simpleqd_jobs{queue="tasks",status="dead"} 0
		simpleqd_queue_hold_state{queue="emails",state="open"} 0
		simpleqd_queue_hold_state{queue="emails",state="held"} 1
		simpleqd_queue_hold_state{queue="emails",state="probing"} 0
		simpleqd_queue_hold_state{queue="emails",state="paused"} 0
		simpleqd_queue_hold_state{queue="tasks",state="open"} 1
		simpleqd_queue_hold_state{queue="tasks",state="held"} 0
		simpleqd_queue_hold_state{queue="tasks",state="probing"} 0
		simpleqd_queue_hold_state{queue="tasks",state="paused"} 0
		simpleqd_queue_status_up 1
	`, "simpleqd_jobs", "simpleqd_queue_hold_state", "simpleqd_queue_status_up")

	// Redis fails for one queue: the others are still reported, and up says so.
	mu.Lock()
	fail = errors.New("redis unavailable")
	mu.Unlock()
	compare(t, m, `simpleqd_queue_status_up 0`, "simpleqd_queue_status_up")
	require.Equal(t, 4, testutil.CollectAndCount(m.Registry(), "simpleqd_jobs"))
	mu.Lock()
	before := calls
	mu.Unlock()
	_, err := m.Registry().Gather()
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, before+1, calls, "with the cache off, read once per scrape")
	require.False(t, noDeadline)
}

func TestHandlerServesPrometheusText(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{Status: func(context.Context) ([]store.QueueStatus, error) {
		return nil, errors.New("redis down")
	}})
	m.InitQueues([]string{"emails"})
	m.Published("emails", 2)
	resp, text := scrape(t, m)
	require.Equal(t, http.StatusOK, resp.StatusCode, "Redis being down must not fail the scrape")
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	require.Contains(t, text, `simpleqd_jobs_published_total{queue="emails"} 2`)
	require.Contains(t, text, "simpleqd_queue_status_up 0")
	require.Contains(t, text, "# TYPE simpleqd_delivery_duration_seconds histogram")
	require.Contains(t, text, "go_goroutines")
}

// Two Metrics never share series: no global registry.
func TestIndependentRegistries(t *testing.T) {
	t.Parallel()
	a, b := newMetrics(metrics.Options{}), newMetrics(metrics.Options{})
	a.Published("q", 5)
	require.Equal(t, 0, testutil.CollectAndCount(b.Registry(), "simpleqd_jobs_published_total"))
}

// Claims, settles and callbacks arrive from many goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	m := newMetrics(metrics.Options{Now: time.Now})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				id := strconv.Itoa(g) + "-" + strconv.Itoa(i)
				m.Claimed("q", store.ClaimedJob{ID: id, Attempt: 1, Probe: i%2 == 0, CreatedAt: time.Now()})
				settled(m, "q", store.Outcome{ID: id, Kind: store.OutcomeDefer, RetryAfter: time.Millisecond},
					store.Settled{Word: "DEFERRED", Detail: ms(time.Now())}, time.Millisecond)
				callback(m, "q", store.Callback{JobID: id, Kind: store.CallbackAck}, store.Settled{Word: "REOPENED"})
				m.Published("q", 1)
			}
		}()
	}
	wg.Wait()
	compare(t, m, `
		simpleqd_deliveries_total{outcome="backpressure",queue="q"} 1600
		simpleqd_jobs_published_total{queue="q"} 1600
	`, "simpleqd_deliveries_total", "simpleqd_jobs_published_total")
}

// BenchmarkPublishedAndSettled is the metrics work of one publish and one
// delivery, the two calls on the hot paths.
func BenchmarkPublishedAndSettled(b *testing.B) {
	m := metrics.New(metrics.Options{})
	m.InitQueues([]string{"q0"})
	o := store.Outcome{ID: "j", Kind: store.OutcomeOK, StatusCode: 200}
	s := store.Settled{Word: "COMPLETED"}
	for b.Loop() {
		m.Published("q0", 1)
		settled(m, "q0", o, s, time.Millisecond)
	}
}

// Redis script timings: every script's series exists from the start, a call
// lands in its bucket, and a failed call is counted, not timed.
func TestScriptCalls(t *testing.T) {
	m := newMetrics(metrics.Options{})
	require.Equal(t, len(lua.All), testutil.CollectAndCount(m.Registry(), "simpleqd_redis_script_duration_seconds"), "one series per script")
	require.Equal(t, len(lua.All), testutil.CollectAndCount(m.Registry(), "simpleqd_redis_script_errors_total"))
	m.ScriptCall("settle", 400*time.Microsecond, nil)
	m.ScriptCall("settle", 3*time.Millisecond, nil)
	m.ScriptCall("claim", time.Second, errors.New("i/o timeout"))

	_, text := scrape(t, m)
	require.Contains(t, text, `simpleqd_redis_script_duration_seconds_bucket{script="settle",le="0.00025"} 0`)
	require.Contains(t, text, `simpleqd_redis_script_duration_seconds_bucket{script="settle",le="0.0005"} 1`)
	require.Contains(t, text, `simpleqd_redis_script_duration_seconds_bucket{script="settle",le="0.005"} 2`)
	require.Contains(t, text, `simpleqd_redis_script_duration_seconds_count{script="settle"} 2`)
	require.Contains(t, text, `simpleqd_redis_script_duration_seconds_count{script="claim"} 0`, "a failed call is not timed")
	require.Contains(t, text, `simpleqd_redis_script_errors_total{script="claim"} 1`)
	require.Contains(t, text, `simpleqd_redis_script_errors_total{script="settle"} 0`)
}

// scrape serves m's handler once and returns the answer and its body.
func scrape(t *testing.T, m *metrics.Metrics) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// settled and callback report an outcome as the dispatcher's one outcome
// pipeline does: a delivery's, a callback's.
func settled(o interface{ Settled(store.Settlement) }, q string, out store.Outcome, s store.Settled, took time.Duration) {
	o.Settled(store.Settlement{Queue: q, JobID: out.ID, Source: store.FromDelivery, Outcome: out, Took: took, Result: s})
}

func callback(o interface{ Settled(store.Settlement) }, q string, cb store.Callback, s store.Settled) {
	o.Settled(store.Settlement{Queue: q, JobID: cb.JobID, Source: store.FromCallback, Callback: cb, Attempt: cb.Attempt, Result: s})
}
