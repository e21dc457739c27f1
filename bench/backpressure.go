package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// rateLimitedWebhook answers 429 with Retry-After: 1 for outage after its first
// delivery, then 200, and records when every rate-limited delivery started.
type rateLimitedWebhook struct {
	url    string
	srv    *http.Server
	outage time.Duration

	mu         sync.Mutex
	first      time.Time // first delivery
	recovered  time.Time // when it starts answering 200
	deliveries int
	limited    []time.Time // start times of the deliveries answered 429
	last429    time.Time   // when the last 429 was answered
	firstAfter time.Time   // first delivery start after recovery
	lastDone   time.Time
	okCount    atomic.Int64
}

func newRateLimitedWebhook(outage time.Duration) *rateLimitedWebhook {
	h := &rateLimitedWebhook{outage: outage}
	h.url, h.srv = serveLoopback(h.serve)
	return h
}

func (h *rateLimitedWebhook) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	h.mu.Lock()
	if h.first.IsZero() {
		h.first = now
		h.recovered = now.Add(h.outage)
	}
	h.deliveries++
	limited := now.Before(h.recovered)
	if limited {
		h.limited = append(h.limited, now)
	} else if h.firstAfter.IsZero() {
		h.firstAfter = now
	}
	h.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // a little work
	h.mu.Lock()
	if limited {
		h.last429 = time.Now()
	} else {
		h.lastDone = time.Now()
	}
	h.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	h.okCount.Add(1)
	w.WriteHeader(http.StatusOK)
}

// rounds groups rate-limited deliveries into rounds: a gap of half the
// Retry-After between two starts begins a new round. The first round is the
// wave of deliveries already in flight when the first 429 came back; every
// later one should be a single probe.
func rounds(starts []time.Time) []int {
	var out []int
	for i, t := range starts {
		if i == 0 || t.Sub(starts[i-1]) >= 500*time.Millisecond {
			out = append(out, 0)
		}
		out[len(out)-1]++
	}
	return out
}

// backpressureRun measures the seed's promise: a rate-limit round costs one
// delivery, however many jobs wait. With keys > 0 the jobs are spread
// round-robin over that many flow keys and the queue holds as a whole
// (flowKeys.holdScope: queue, keys.md §3): the queue-level figure must hold
// with flow keys in use.
func backpressureRun(ctx context.Context, bin, work string, n, keys int, add func(name, value, target string)) error {
	name := fmt.Sprintf("bp%d", n)
	label := fmt.Sprintf("N=%d", n)
	if keys > 0 {
		name += fmt.Sprintf("k%d", keys)
		label += fmt.Sprintf(", %d flow keys, holdScope queue", keys)
		os.Setenv("SIMPLEQ_QUEUES_Q0_FLOWKEYS_HOLDSCOPE", "queue")
		defer os.Unsetenv("SIMPLEQ_QUEUES_Q0_FLOWKEYS_HOLDSCOPE")
	}
	rs, err := startRedis(ctx, work, name, false)
	if err != nil {
		return err
	}
	defer rs.stop()
	hook := newRateLimitedWebhook(5 * time.Second)
	defer hook.srv.Close()
	d, err := startDaemon(ctx, bin, work, name, []string{rs.addr}, nil, hook.url, 50, 1)
	if err != nil {
		return err
	}
	defer d.stop()
	api := newAPI(d.url)
	if err := api.post(ctx, "/v1/queues/q0/pause", `{}`); err != nil {
		return err
	}
	if keys > 0 {
		api.flowKey = roundRobinKeys(keys)
		err = api.publishKeyedBatches(ctx, "q0", n, 1000, 2, "x")
	} else {
		err = api.publishBatches(ctx, "q0", n, 1000, 2, "x")
	}
	if err != nil {
		return err
	}
	if err := api.post(ctx, "/v1/queues/q0/resume", `{}`); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for hook.okCount.Load() < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("N=%d: only %d delivered", n, hook.okCount.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h := hook
	h.mu.Lock()
	defer h.mu.Unlock()
	rr := rounds(h.limited)
	wave, biggestProbe := 0, 0
	if len(rr) > 0 {
		wave = rr[0]
	}
	for _, n := range rr[1:] {
		biggestProbe = max(biggestProbe, n)
	}
	gap := h.firstAfter.Sub(h.last429.Add(time.Second))
	bound := wave + len(rr) - 1
	verdict := "ok"
	if len(h.limited) > bound || biggestProbe > 1 {
		verdict = "OVER"
	}
	add(fmt.Sprintf("backpressure %s: deliveries received / of them 429", label),
		fmt.Sprintf("%d / %d", h.deliveries, len(h.limited)), "")
	add(fmt.Sprintf("backpressure %s: in flight at first 429 + probe rounds", label),
		fmt.Sprintf("%d + %d (%s)", wave, len(rr)-1, verdict), "429s ≤ in flight + rounds")
	add(fmt.Sprintf("backpressure %s: deliveries per probe round (max)", label),
		fmt.Sprintf("%d", biggestProbe), "1")
	add(fmt.Sprintf("backpressure %s: first delivery after the release time", label),
		fmt.Sprintf("%.1f ms", float64(gap.Microseconds())/1000), "≤ 50 ms")
	add(fmt.Sprintf("backpressure %s: drain after recovery", label),
		fmt.Sprintf("%.2f s", h.lastDone.Sub(h.recovered).Seconds()), "")
	if verdict != "ok" {
		fmt.Fprintf(os.Stderr, "  backpressure bound exceeded for %s: rounds %v\n", label, rr)
	}
	return nil
}
