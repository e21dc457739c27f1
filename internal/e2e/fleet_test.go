package test

import (
	"fmt"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func startFleet(t *testing.T, n int, c DaemonConfig) []*Daemon {
	t.Helper()
	ds := make([]*Daemon, n)
	for i := range ds {
		ds[i] = StartDaemon(t, c)
	}
	return ds
}

func publishSpread(t *testing.T, ds []*Daemon, queue string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = ds[i%len(ds)].Publish(queue, map[string]any{"i": i})
	}
	return ids
}

func waitAllCompleted(t *testing.T, d *Daemon, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, id := range ids {
		d.WaitStatus(id, "completed", time.Until(deadline))
	}
}

// Three daemons never exceed the queue's concurrency, summed over the fleet,
// and keep its slots busy under backlog.
func TestFleetConcurrency(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const limit, jobs = 6, 120
	const work = 100 * time.Millisecond
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200, Delay: work} })
	ds := startFleet(t, 3, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info",
		YAML: QueueYAML("c", hook.URL, fmt.Sprintf("concurrency: %d", limit))})
	// Pause-free backlog: publish everything first through a batch.
	items := make([]map[string]any, jobs)
	for i := range items {
		items[i] = map[string]any{"payload": map[string]any{"i": i}}
	}
	r := ds[0].Do("POST", "/v1/queues/c/jobs/batch", map[string]any{"jobs": items})
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return hook.Count() >= jobs }, 30*time.Second, 10*time.Millisecond)

	require.LessOrEqual(t, hook.MaxInflight(), limit, "fleet-wide concurrency")
	require.Equal(t, limit, hook.MaxInflight(), "the limit is used, not just respected")
	dl := hook.Deliveries()
	sort.Slice(dl, func(i, j int) bool { return dl[i].Start.Before(dl[j].Start) })
	span := dl[len(dl)-1].End.Sub(dl[0].Start)
	var busy time.Duration
	for _, d := range dl {
		busy += d.End.Sub(d.Start)
	}
	util := float64(busy) / (float64(span) * limit)
	t.Logf("%d deliveries in %s, slot utilisation %.1f%%", len(dl), span, util*100)
	require.GreaterOrEqual(t, util, 0.9, "slots kept busy under backlog")
}

// Three daemons never start more than rateLimitMax deliveries in any sliding
// window, and under backlog they use at least 90% of it. The starts are the
// ones the fleet admitted, read on Redis' clock from the queue's window
// (lib.lua K_STARTS, each start kept there for a window): the webhook's
// arrival times would add the machine's transit jitter to what is checked.
func TestFleetRateLimit(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const max, jobs = 10, 60
	const window = 500 * time.Millisecond
	hook := NewWebhook(t, nil)
	ds := startFleet(t, 3, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info",
		YAML: QueueYAML("r", hook.URL, "concurrency: 50", fmt.Sprintf("rateLimitMax: %d", max), "rateLimitWindow: 500ms")})

	// Every start stays in the window for 500 ms; reading it every 2 ms
	// sees each one.
	stopWatch := watchZSets(t, rs.Client(t), "simpleq:{r}:starts")

	items := make([]map[string]any, jobs)
	for i := range items {
		items[i] = map[string]any{"payload": map[string]any{"i": i}}
	}
	r := ds[1].Do("POST", "/v1/queues/r/jobs/batch", map[string]any{"jobs": items})
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return hook.Count() >= jobs }, 30*time.Second, 10*time.Millisecond)
	admitted := stopWatch()["simpleq:{r}:starts"]
	require.Len(t, admitted, jobs, "every delivery's start was seen in the window")

	starts := make([]time.Duration, 0, jobs)
	for _, ms := range admitted {
		starts = append(starts, time.Duration(ms)*time.Millisecond)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && starts[j]-starts[i] < window; j++ {
			n++
		}
		require.LessOrEqual(t, n, max, "window starting at delivery %d", i)
	}
	span := starts[len(starts)-1] - starts[0]
	// jobs-max deliveries needed (jobs/max - 1) full windows after the first burst.
	ideal := time.Duration(jobs/max-1) * window
	t.Logf("%d deliveries in %s (ideal %s)", len(starts), span, ideal)
	require.LessOrEqual(t, float64(ideal)/float64(span), 1.0+1e-9)
	require.GreaterOrEqual(t, float64(ideal)/float64(span), 0.9, "uses ≥90%% of rateLimitMax")
}

// A daemon killed mid-delivery loses nothing: after the lease another daemon
// delivers the job again, and that costs exactly one attempt.
func TestFleetKillMidDelivery(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var mu sync.Mutex
	var attempts []int
	hook := NewWebhook(t, func(dl Delivery) Reply {
		mu.Lock()
		attempts = append(attempts, dl.Attempt)
		first := len(attempts) == 1
		mu.Unlock()
		if first {
			return Reply{Status: 200, Delay: 3 * time.Second} // the daemon dies meanwhile
		}
		return Reply{Status: 200}
	})
	cfg := DaemonConfig{RedisAddr: rs.Addr, YAML: "dispatch:\n  leaseMargin: 200ms\n" +
		QueueYAML("k", hook.URL, "timeout: 500ms")}
	victim := StartDaemon(t, cfg)
	id := victim.Publish("k", map[string]any{"x": 1})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(attempts) == 1 }, 5*time.Second, 5*time.Millisecond)
	victim.Kill()
	other := StartDaemon(t, cfg)
	job := other.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 2, job["attempts"], "the lost delivery spent one attempt")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 2}, attempts)
	h := job["history"].([]any)
	require.Contains(t, h[0].(map[string]any)["error"], "lease expired")
	require.Contains(t, other.Log(), "delivery lost or not acked in time", "the reaping daemon says so")
}

// Daemons are killed (SIGKILL) and restarted over and over while hundreds of
// jobs flow: none is lost, and every duplicate delivery is reported.
func TestFleetRepeatedKills(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var mu sync.Mutex
	seen := map[string]int{}
	hook := NewWebhook(t, func(dl Delivery) Reply {
		mu.Lock()
		seen[dl.JobID]++
		mu.Unlock()
		return Reply{Status: 200, Delay: 20 * time.Millisecond}
	})
	cfg := DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: "dispatch:\n  leaseMargin: 200ms\n" +
		QueueYAML("kk", hook.URL, "timeout: 500ms", "concurrency: 8", "maxAttempts: 20",
			"backoff: {type: fixed, base: 20ms}")}
	ds := startFleet(t, 3, cfg)
	const jobs = 300
	ids := publishSpread(t, ds, "kk", jobs)
	kills := 0
	for round := 0; round < 6; round++ {
		// Each kill strikes after some more deliveries (while there is work).
		next := min(hook.Count()+10, jobs)
		require.Eventually(t, func() bool { return hook.Count() >= next }, 10*time.Second, time.Millisecond,
			"deliveries go on before kill %d", round+1)
		v := ds[round%3]
		v.Kill()
		kills++
		v.Restart()
	}
	waitAllCompleted(t, ds[0], ids, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, id := range ids {
		require.GreaterOrEqual(t, seen[id], 1, "job %s never delivered", id)
		dups += seen[id] - 1
	}
	t.Logf("%d jobs, %d SIGKILLs: lost 0, duplicate deliveries %d (%.1f%%)", jobs, kills, dups, 100*float64(dups)/jobs)
	q := ds[0].Queue("kk")
	counts := q["counts"].(map[string]any)
	require.EqualValues(t, 0, counts["dead"])
	require.EqualValues(t, 0, counts["pending"])
	require.EqualValues(t, 0, counts["processing"])
}

// A deep backlog on one queue does not starve another: each queue has its own
// pump, so a job published to an idle queue is delivered at once while the
// busy queue works through thousands.
func TestFleetBacklogDoesNotStarveOtherQueues(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	busy := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200, Delay: 20 * time.Millisecond} })
	quick := NewWebhook(t, nil)
	y := fmt.Sprintf("queues:\n  busy:\n    webhookUrl: %s\n    signingSecret: s\n    concurrency: 5\n"+
		"  idle:\n    webhookUrl: %s\n    signingSecret: s\n", busy.URL, quick.URL)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: y, LogLevel: "info"})
	items := make([]map[string]any, 1000)
	for i := range items {
		items[i] = map[string]any{"payload": map[string]any{"i": i}}
	}
	for b := 0; b < 3; b++ {
		r := d.Do("POST", "/v1/queues/busy/jobs/batch", map[string]any{"jobs": items})
		require.Equal(t, 200, r.Status, string(r.Body))
	}
	require.Eventually(t, func() bool { return busy.Count() > 20 }, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < 5; i++ {
		start := time.Now()
		id := d.Publish("idle", map[string]any{"n": i})
		d.WaitStatus(id, "completed", 5*time.Second)
		took := time.Since(start)
		require.Less(t, took, time.Second, "the idle queue is served while 3,000 jobs wait on another")
	}
	q := d.Queue("busy")
	require.Greater(t, q["counts"].(map[string]any)["pending"].(float64), float64(1000), "the backlog was still there")
}

// A second SIGTERM exits at once, without waiting out the grace period; the
// unfinished delivery is recovered through its lease like after a crash.
func TestFleetSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	started := make(chan struct{}, 1)
	hook := NewWebhook(t, func(Delivery) Reply {
		select {
		case started <- struct{}{}:
		default:
		}
		return Reply{Status: 200, Delay: 20 * time.Second}
	})
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: "shutdownGrace: 30s\n" + QueueYAML("s", hook.URL, "timeout: 25s")})
	d.Publish("s", map[string]any{"x": 1})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("delivery never started")
	}
	d.Signal(syscall.SIGTERM)
	require.Never(t, d.Exited, 200*time.Millisecond, 10*time.Millisecond, "the first signal waits for the delivery in flight")
	begin := time.Now()
	d.Signal(syscall.SIGTERM)
	require.Eventually(t, d.Exited, 3*time.Second, 10*time.Millisecond, "the second signal exits at once")
	require.Less(t, time.Since(begin), 3*time.Second)
	require.Contains(t, d.Log(), "second signal")
}

// watchZSets reads the sorted sets keys every 2 ms, until the function it
// returns is called or 30 s have passed; that function returns every member
// seen, with its last score, per key. A member that stays a few
// milliseconds (a start stays in a rate window for the window) is seen:
// the tests read Redis' own admission times this way, free of the
// webhook's transit jitter.
func watchZSets(t *testing.T, rc *redis.Client, keys ...string) (stop func() map[string]map[string]float64) {
	seen := map[string]map[string]float64{}
	for _, k := range keys {
		seen[k] = map[string]float64{}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(30 * time.Second)
		for {
			for _, k := range keys {
				for _, z := range rc.ZRangeWithScores(t.Context(), k, 0, -1).Val() {
					seen[k][z.Member.(string)] = z.Score
				}
			}
			select {
			case <-quit:
				return
			case <-deadline:
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[string]map[string]float64 {
		close(quit)
		<-done
		return seen
	}
}
