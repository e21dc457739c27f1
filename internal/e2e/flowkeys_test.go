package test

// End-to-end tests of flow keys (keys.md): real redis-server processes (a
// single server, and a 3-master Redis Cluster), real simpleqd daemon
// processes, and a scripted webhook on loopback that answers per lane (the
// x-simpleq-flow-key header) and records, per lane, how many deliveries
// were in flight when each one started. Holds last a fraction of a second
// to a second; the tests wait on observed state.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

// ---- helpers (prefixed fk so they cannot collide with other test files) ----

// fkDelivery is one request the lane-aware webhook received.
type fkDelivery struct {
	Lane    string // the x-simpleq-flow-key header ("" for the default lane)
	JobID   string
	Attempt string
	N       int // 1-based index among this lane's deliveries, by start
	Start   time.Time
	End     time.Time // zero while it runs
	Status  int
	// LaneInflight and Inflight count the deliveries of this lane, and of
	// every lane, in flight when this one started (itself included).
	LaneInflight int
	Inflight     int
	Envelope     map[string]any
}

// fkReply is what the script answers. Hang keeps the request open until
// the daemon that sent it goes away (or the test ends).
type fkReply struct {
	Status     int
	RetryAfter string
	Delay      time.Duration
	Hang       bool
}

// fkHook is a webhook that answers per lane and records every delivery.
type fkHook struct {
	URL    string
	mu     sync.Mutex
	script func(d fkDelivery) fkReply
	all    []*fkDelivery
	lane   map[string]int // in flight per lane
	total  int
	done   chan struct{}
}

func fkNewHook(t *testing.T, script func(d fkDelivery) fkReply) *fkHook {
	t.Helper()
	h := &fkHook{script: script, lane: map[string]int{}, done: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(h.serve))
	h.URL = srv.URL + "/hook"
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(h.done) }) // runs first: no request is left hanging
	return h
}

func (h *fkHook) serve(w http.ResponseWriter, r *http.Request) {
	var env map[string]any
	_ = json.NewDecoder(r.Body).Decode(&env)
	lane := r.Header.Get("X-Simpleq-Flow-Key")
	h.mu.Lock()
	h.lane[lane]++
	h.total++
	n := 1
	for _, d := range h.all {
		if d.Lane == lane {
			n++
		}
	}
	d := &fkDelivery{Lane: lane, JobID: r.Header.Get("X-Simpleq-Job-Id"), Attempt: r.Header.Get("X-Simpleq-Attempt"),
		N: n, Start: time.Now(), LaneInflight: h.lane[lane], Inflight: h.total, Envelope: env}
	h.all = append(h.all, d)
	script := h.script
	h.mu.Unlock()
	rep := fkReply{Status: 200}
	if script != nil {
		rep = script(*d)
	}
	switch {
	case rep.Hang:
		select {
		case <-r.Context().Done():
		case <-h.done:
		case <-time.After(20 * time.Second):
		}
	case rep.Delay > 0:
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
		case <-h.done:
		}
	}
	if rep.RetryAfter != "" {
		w.Header().Set("Retry-After", rep.RetryAfter)
	}
	if rep.Status == 0 {
		rep.Status = 200
	}
	w.WriteHeader(rep.Status)
	h.mu.Lock()
	h.lane[lane]--
	h.total--
	d.End, d.Status = time.Now(), rep.Status
	h.mu.Unlock()
}

// Lane returns copies of one lane's deliveries so far, in start order.
func (h *fkHook) Lane(lane string) []fkDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []fkDelivery
	for _, d := range h.all {
		if d.Lane == lane {
			out = append(out, *d)
		}
	}
	return out
}

// All returns copies of every delivery so far, in start order.
func (h *fkHook) All() []fkDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]fkDelivery, len(h.all))
	for i, d := range h.all {
		out[i] = *d
	}
	return out
}

// Finished counts a lane's deliveries that have been answered.
func (h *fkHook) Finished(lane string) int {
	n := 0
	for _, d := range h.Lane(lane) {
		if !d.End.IsZero() {
			n++
		}
	}
	return n
}

// Inflight is a lane's deliveries in flight now.
func (h *fkHook) Inflight(lane string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lane[lane]
}

// fkMax is the highest LaneInflight (lane) or Inflight (all) among ds.
func fkMax(ds []fkDelivery, all bool) int {
	m := 0
	for _, d := range ds {
		if all {
			m = max(m, d.Inflight)
		} else {
			m = max(m, d.LaneInflight)
		}
	}
	return m
}

// fkQ renders one queue entry of the queues: section.
func fkQ(name, url string, settings ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    webhookUrl: %s\n    signingSecret: whsec_test\n", name, url)
	for _, s := range settings {
		fmt.Fprintf(&b, "    %s\n", s)
	}
	return b.String()
}

// fkPublish publishes n jobs of lane flowKey ("" for the default lane) in
// batches and returns their ids in order.
func fkPublish(t *testing.T, d *Daemon, queue, flowKey string, n int) []string {
	t.Helper()
	var ids []string
	for from := 0; from < n; from += 1000 {
		items := make([]map[string]any, min(1000, n-from))
		for i := range items {
			items[i] = map[string]any{"payload": map[string]any{"lane": flowKey, "i": from + i}}
			if flowKey != "" {
				items[i]["flowKey"] = flowKey
			}
		}
		r := d.Do("POST", "/v1/queues/"+queue+"/jobs/batch", map[string]any{"jobs": items})
		require.Equal(t, 200, r.Status, string(r.Body))
		var out struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &out))
		require.Len(t, out.Jobs, len(items))
		for _, j := range out.Jobs {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// fkPublishOne publishes one job of lane flowKey and returns its id.
func fkPublishOne(t *testing.T, d *Daemon, queue, flowKey string) string {
	t.Helper()
	r := d.Do("POST", "/v1/queues/"+queue+"/jobs", map[string]any{"payload": map[string]any{"lane": flowKey}, "flowKey": flowKey})
	require.Equal(t, 201, r.Status, string(r.Body))
	return r.JSON(t)["id"].(string)
}

// fkCounts is GET /v1/queues/{q}'s counts.
func fkCounts(t *testing.T, d *Daemon, queue string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range d.Queue(queue)["counts"].(map[string]any) {
		out[k], _ = v.(float64)
	}
	return out
}

// fkWaitCompleted waits until every job is completed, within one deadline.
func fkWaitCompleted(t *testing.T, d *Daemon, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, id := range ids {
		d.WaitStatus(id, "completed", time.Until(deadline))
	}
}

// fkDrained requires that the queue keeps nothing: no job waits, runs or died.
func fkDrained(t *testing.T, d *Daemon, queue string) {
	t.Helper()
	require.Eventually(t, func() bool {
		c := fkCounts(t, d, queue)
		return c["pending"] == 0 && c["processing"] == 0 && c["awaitingAck"] == 0 && c["heldKeys"] == 0
	}, 10*time.Second, 10*time.Millisecond, "queue %s drained", queue)
	require.Zero(t, fkCounts(t, d, queue)["dead"], "no job of %s died", queue)
}

func fkHistory(t *testing.T, job map[string]any) []map[string]any {
	t.Helper()
	raw, ok := job["history"].([]any)
	require.True(t, ok, "history is not an array: %v", job["history"])
	out := make([]map[string]any, len(raw))
	for i, e := range raw {
		out[i] = e.(map[string]any)
	}
	return out
}

// fkStartFleet starts n daemon processes on one Redis with the same file.
func fkStartFleet(t *testing.T, n int, c DaemonConfig) []*Daemon {
	t.Helper()
	ds := make([]*Daemon, n)
	var wg sync.WaitGroup
	for i := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds[i] = StartDaemon(t, c)
		}()
	}
	wg.Wait()
	for _, d := range ds {
		require.NotNil(t, d, "a daemon failed to start")
	}
	return ds
}

// ---- a. a held lane is isolated, and probes once fleet-wide ----

// TestFlowKeysHeldLaneIsolatedAcrossDaemons: three daemons, one queue with
// holdScope key and two lanes. The webhook answers 429 (Retry-After: 1) for
// tenant A only: A is held while B keeps all of the queue's slots busy;
// after each release exactly one delivery of A goes out fleet-wide (the
// probe), a probe's 429 holds A again, and only the probe's 2xx reopens A.
// maxAttempts is 1, so a defer that spent an attempt would kill the job:
// every job completes, A's deferred job with deferCount 2 and one attempt.
func TestFlowKeysHeldLaneIsolatedAcrossDaemons(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const conc = 6
	hook := fkNewHook(t, func(d fkDelivery) fkReply {
		if d.Lane != "A" {
			return fkReply{Status: 200, Delay: 40 * time.Millisecond}
		}
		switch d.N {
		case 1: // tenant A's provider says 429: A is held
			return fkReply{Status: 429, RetryAfter: "1"}
		case 2: // the first probe: still limited, A is held again
			return fkReply{Status: 429, RetryAfter: "1"}
		case 3: // the second probe succeeds, slowly: A stays probing meanwhile
			return fkReply{Status: 200, Delay: 300 * time.Millisecond}
		}
		return fkReply{Status: 200, Delay: 40 * time.Millisecond}
	})
	ds := fkStartFleet(t, 3, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: "queues:\n" +
		fkQ("tenants", hook.URL, fmt.Sprintf("concurrency: %d", conc), "maxAttempts: 1",
			"flowKeys: {holdScope: key}")})

	// B's backlog outlasts A's two holds; A's first job hits the 429 alone,
	// then A's backlog waits in the held lane.
	bIDs := fkPublish(t, ds[0], "tenants", "B", 450)
	first := fkPublishOne(t, ds[1], "tenants", "A")
	require.Eventually(t, func() bool { return hook.Finished("A") == 1 }, 5*time.Second, 5*time.Millisecond, "A's 429")
	require.Eventually(t, func() bool { return fkCounts(t, ds[2], "tenants")["heldKeys"] == 1 }, 5*time.Second, 5*time.Millisecond,
		"lane A held")
	aIDs := append([]string{first}, fkPublish(t, ds[2], "tenants", "A", 20)...)

	q := ds[1].Queue("tenants")
	require.Equal(t, "open", q["hold"].(map[string]any)["state"], "a lane's 429 leaves the queue open")
	job := ds[0].Job(first)
	require.Equal(t, "processing", job["status"], "SimpleQ's word for a job between deliveries")
	require.EqualValues(t, 0, job["attempts"], "a defer spends no attempt")
	require.EqualValues(t, 1, job["deferCount"])
	require.Equal(t, "A", job["flowKey"])

	// The lane reopens only after the second probe's 2xx, then A flows.
	require.Eventually(t, func() bool { return hook.Finished("A") >= 6 }, 10*time.Second, 5*time.Millisecond, "A reopened")
	fkWaitCompleted(t, ds[0], aIDs, 15*time.Second)
	fkWaitCompleted(t, ds[1], bIDs, 15*time.Second)

	a := hook.Lane("A")
	require.Len(t, a, len(aIDs)+2, "every A job delivered once, the first one twice more (two probes)")
	d1, p1, p2 := a[0], a[1], a[2]
	require.Equal(t, first, p1.JobID, "the deferred job waits first in line: it is the probe")
	require.Equal(t, first, p2.JobID, "a probe's 429 keeps it first in line: it probes again")
	// No A delivery during a hold; each release lets out one probe and
	// nothing else of A until the probe has answered.
	require.GreaterOrEqual(t, p1.Start.Sub(d1.End), time.Second-5*time.Millisecond, "A held for Retry-After")
	require.GreaterOrEqual(t, p2.Start.Sub(p1.End), time.Second-5*time.Millisecond, "A held again after the probe's 429")
	for _, d := range a[:3] {
		require.Equal(t, 1, d.LaneInflight, "one A delivery at a time while A is held or probing")
	}
	require.False(t, a[3].Start.Before(p2.End), "A reopens only after the probe's 2xx: %s before %s",
		a[3].Start.Format(time.StampMicro), p2.End.Format(time.StampMicro))
	require.GreaterOrEqual(t, fkMax(a[3:], false), 2, "reopened, A takes its share of the slots again")
	require.Equal(t, []string{"1", "1", "1"}, []string{d1.Attempt, p1.Attempt, p2.Attempt}, "defers spend no attempt")
	for i, d := range []fkDelivery{d1, p1, p2} {
		require.EqualValues(t, i, d.Envelope["deferCount"], "envelope of A's delivery %d", i+1)
	}

	// B kept the queue's slots busy throughout A's holds and probes.
	var during []fkDelivery
	for _, d := range hook.Lane("B") {
		if d.Start.After(d1.End) && d.Start.Before(p2.End) {
			during = append(during, d)
		}
	}
	window := p2.End.Sub(d1.End)
	ideal := float64(window) / float64(40*time.Millisecond) * conc
	t.Logf("while A was held or probing (%s): %d B deliveries (%.0f at full speed), B in flight up to %d",
		window.Round(time.Millisecond), len(during), ideal, fkMax(during, false))
	require.Equal(t, conc, fkMax(during, false), "B used every slot of the queue while A was held")
	require.GreaterOrEqual(t, float64(len(during)), 0.5*ideal, "B kept delivering at full speed")
	require.LessOrEqual(t, fkMax(hook.All(), true), conc, "the queue's concurrency holds fleet-wide")

	// The job that probed: deferred twice (the second time as the probe),
	// then the probe's success; one attempt of maxAttempts 1.
	job = ds[2].Job(first)
	require.EqualValues(t, 1, job["attempts"])
	require.EqualValues(t, 2, job["deferCount"])
	h := fkHistory(t, job)
	require.Len(t, h, 3, "%v", h)
	require.Equal(t, "deferred", h[0]["status"])
	require.Equal(t, "key", h[0]["scope"], "a keyed 429 holds the key: %v", h[0])
	require.Nil(t, h[0]["probe"])
	require.Equal(t, "deferred", h[1]["status"])
	require.Equal(t, true, h[1]["probe"], "%v", h[1])
	require.Equal(t, "success", h[2]["status"])
	require.Equal(t, true, h[2]["probe"], "%v", h[2])
	for _, id := range aIDs[1:] {
		j := ds[0].Job(id)
		require.EqualValues(t, 0, j["deferCount"], "a job waiting in a held lane spends nothing")
		require.EqualValues(t, 1, j["attempts"])
	}
	fkDrained(t, ds[0], "tenants")
}

// ---- b. per-lane limits fleet-wide ----

// TestFlowKeysLimitsFleetWide: flowKeys.concurrency 2 over three daemons:
// no lane ever has more than 2 deliveries in flight at the webhook, the
// queue's concurrency caps the total, and both are used, not just
// respected; the default lane is not capped by flowKeys. A per-lane rate
// limit holds each lane to its own starts per window while the queue's
// rate limit holds the total.
func TestFlowKeysLimitsFleetWide(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := fkNewHook(t, func(d fkDelivery) fkReply { return fkReply{Status: 200, Delay: 30 * time.Millisecond} })
	rateHook := fkNewHook(t, nil)
	ds := fkStartFleet(t, 3, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info", YAML: "queues:\n" +
		fkQ("caps", hook.URL, "concurrency: 5", "flowKeys: {concurrency: 2}") +
		fkQ("rates", rateHook.URL, "concurrency: 50", "rateLimitMax: 6", "rateLimitWindow: 400ms",
			"flowKeys: {rateLimitMax: 4, rateLimitWindow: 400ms}")})

	lanes := []string{"A", "B", "C", "D"}
	var ids []string
	for i, l := range lanes {
		ids = append(ids, fkPublish(t, ds[i%3], "caps", l, 30)...)
	}
	// The rate part reads the starts where they are admitted: Redis' own
	// windows, the queue's (starts: member the job, score the start in ms)
	// and the lanes' (lstarts: fk \0 start13 \0 id). Every start stays in
	// them for a window (400 ms), so reading them every 2 ms sees each one,
	// with Redis' clock: no transit jitter of the webhook's arrival times.
	stopWatch := watchZSets(t, rs.Client(t), "simpleq:{rates}:starts", "simpleq:{rates}:lstarts")
	var rateIDs []string
	for i, l := range []string{"X", "Y"} {
		rateIDs = append(rateIDs, fkPublish(t, ds[i], "rates", l, 12)...)
	}
	fkWaitCompleted(t, ds[0], ids, 20*time.Second)
	for _, l := range lanes {
		got := hook.Lane(l)
		require.Len(t, got, 30, "lane %s", l)
		require.LessOrEqual(t, fkMax(got, false), 2, "lane %s over flowKeys.concurrency", l)
		require.Equal(t, 2, fkMax(got, false), "lane %s used its 2 slots", l)
	}
	require.Equal(t, 5, fkMax(hook.All(), true), "the queue's concurrency is the total over all lanes, and it is used")

	// The default lane (jobs without a key) is capped by the queue only.
	dIDs := fkPublish(t, ds[1], "caps", "", 30)
	fkWaitCompleted(t, ds[1], dIDs, 20*time.Second)
	require.Equal(t, 5, fkMax(hook.Lane(""), false), "the default lane is not capped by flowKeys.concurrency")
	fkDrained(t, ds[2], "caps")

	// Rates: each window of 400 ms holds at most 4 starts per lane and 6 in
	// all, on Redis' clock.
	fkWaitCompleted(t, ds[2], rateIDs, 20*time.Second)
	watched := stopWatch()
	queueStarts, laneStarts := map[string]int64{}, map[string]map[string]int64{}
	for m, score := range watched["simpleq:{rates}:starts"] {
		queueStarts[m] = int64(score)
	}
	for m := range watched["simpleq:{rates}:lstarts"] {
		fk, rest, ok := strings.Cut(m, "\x00")
		if !ok || len(rest) < 13 {
			continue
		}
		ms, err := strconv.ParseInt(rest[:13], 10, 64)
		if err != nil {
			continue
		}
		if laneStarts[fk] == nil {
			laneStarts[fk] = map[string]int64{}
		}
		laneStarts[fk][m] = ms
	}
	window := int64(400)
	inWindow := func(admitted map[string]int64) int {
		starts := make([]int64, 0, len(admitted))
		for _, ms := range admitted {
			starts = append(starts, ms)
		}
		slices.Sort(starts)
		most := 0
		for i := range starts {
			n := 0
			for j := i; j < len(starts) && starts[j]-starts[i] < window; j++ {
				n++
			}
			most = max(most, n)
		}
		return most
	}
	for _, l := range []string{"X", "Y"} {
		require.Len(t, rateHook.Lane(l), 12)
		require.Len(t, laneStarts[l], 12, "every start of lane %s was seen in its window", l)
		require.LessOrEqual(t, inWindow(laneStarts[l]), 4, "lane %s over flowKeys.rateLimitMax", l)
	}
	require.Len(t, queueStarts, 24, "every start was seen in the queue's window")
	require.LessOrEqual(t, inWindow(queueStarts), 6, "the queue's rateLimitMax over all lanes")
	require.Equal(t, 6, inWindow(queueStarts), "the queue's rate is used")
	fkDrained(t, ds[0], "rates")
}

// ---- c. fairness ----

// TestFlowKeysFairnessBound: one lane floods the queue with 2,000 jobs; a
// light lane publishes 20 jobs one by one meanwhile, each through another
// of three daemons. keys.md §4 bounds how far the flood can get ahead of a
// lane that can start: claimBatch + 1 per daemon, plus the flood's
// deliveries already claimed (at most the queue's concurrency). Each light
// job must start within that many flood deliveries of its publish; in
// FIFO order it would wait behind the whole backlog.
func TestFlowKeysFairnessBound(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const conc, batch, daemons = 8, 8, 3
	hook := fkNewHook(t, func(d fkDelivery) fkReply { return fkReply{Status: 200, Delay: 4 * time.Millisecond} })
	ds := fkStartFleet(t, daemons, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info",
		YAML: fmt.Sprintf("dispatch:\n  claimBatch: %d\nqueues:\n", batch) + fkQ("fair", hook.URL, fmt.Sprintf("concurrency: %d", conc))})
	flood := fkPublish(t, ds[0], "fair", "flood", 2000)
	require.Eventually(t, func() bool { return len(hook.Lane("flood")) >= 100 }, 10*time.Second, 5*time.Millisecond, "the flood flows")

	bound := conc + daemons*(batch+1)
	var light []string
	var ahead []int
	for i := 0; i < 20; i++ {
		published := time.Now()
		id := fkPublishOne(t, ds[i%daemons], "fair", "light")
		light = append(light, id)
		var got fkDelivery
		require.Eventually(t, func() bool {
			for _, d := range hook.Lane("light") {
				if d.JobID == id {
					got = d
					return true
				}
			}
			return false
		}, 5*time.Second, time.Millisecond, "light job %d delivered", i)
		n := 0
		for _, d := range hook.Lane("flood") {
			if d.Start.After(published) && d.Start.Before(got.Start) {
				n++
			}
		}
		ahead = append(ahead, n)
	}
	pending := fkCounts(t, ds[0], "fair")["pending"]
	sorted := append([]int(nil), ahead...)
	sort.Ints(sorted)
	t.Logf("flood deliveries started between a light job's publish and its delivery: median %d, max %d (bound %d); flood still waiting: %.0f",
		sorted[len(sorted)/2], sorted[len(sorted)-1], bound, pending)
	require.Positive(t, pending, "the flood still had a backlog: the light lane competed with it throughout")
	for i, n := range ahead {
		require.LessOrEqual(t, n, bound, "light job %d waited behind %d flood deliveries (all: %v)", i, n, ahead)
	}
	fkWaitCompleted(t, ds[1], light, 5*time.Second)
	fkWaitCompleted(t, ds[2], flood, 30*time.Second)
	fkDrained(t, ds[0], "fair")
}

// ---- d. a daemon killed while it holds a lane's probe ----

// TestFlowKeysKilledProbeHolder: lane A is held by a 429; its probe goes
// out from the only daemon running, and the webhook keeps it waiting. Two
// more daemons start and the first is killed (SIGKILL) while it holds the
// probe. Nothing else of A goes out until the probe's lease expires; then
// a survivor's claim makes A's next job the probe (one delivery of A,
// marked probe), whose success reopens A. Every job completes.
func TestFlowKeysKilledProbeHolder(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := fkNewHook(t, func(d fkDelivery) fkReply {
		if d.Lane == "A" {
			switch d.N {
			case 1:
				return fkReply{Status: 429, RetryAfter: "0.3"}
			case 2:
				return fkReply{Hang: true} // the probe: its daemon dies meanwhile
			}
		}
		return fkReply{Status: 200, Delay: 10 * time.Millisecond}
	})
	cfg := DaemonConfig{RedisAddr: rs.Addr, YAML: "dispatch:\n  leaseMargin: 200ms\nqueues:\n" +
		fkQ("kp", hook.URL, "concurrency: 4", "timeout: 3s", "maxAttempts: 3", "backoff: {type: fixed, base: 50ms}")}
	victim := StartDaemon(t, cfg)
	first := fkPublishOne(t, victim, "kp", "A")
	require.Eventually(t, func() bool { return hook.Finished("A") == 1 }, 5*time.Second, 5*time.Millisecond, "A's 429")
	ids := append([]string{first}, fkPublish(t, victim, "kp", "A", 5)...)
	require.Eventually(t, func() bool { return len(hook.Lane("A")) == 2 }, 5*time.Second, 5*time.Millisecond, "A's probe")
	probe := hook.Lane("A")[1]
	require.Equal(t, first, probe.JobID)
	survivors := fkStartFleet(t, 2, cfg)
	require.Equal(t, 1, hook.Inflight("A"), "the probe is still out")
	victim.Kill()
	killed := time.Now()

	// B flows on the survivors while A's probe is lost somewhere.
	bIDs := fkPublish(t, survivors[0], "kp", "B", 20)
	fkWaitCompleted(t, survivors[1], bIDs, 10*time.Second)
	fkWaitCompleted(t, survivors[0], ids, 20*time.Second)

	a := hook.Lane("A")
	require.Len(t, a, len(ids)+2, "every A job once, the first one three times (429, lost probe, probe)")
	next := a[2]
	require.False(t, next.Start.Before(killed), "nothing of A went out before the kill")
	require.GreaterOrEqual(t, next.Start.Sub(probe.Start), 3*time.Second, "the lost probe blocks A until its lease (timeout 3s + leaseMargin) expires")
	require.Equal(t, 1, next.LaneInflight)
	for _, d := range a[3:] {
		require.False(t, d.Start.Before(next.End), "A reopens only after the new probe's success")
	}
	job := survivors[1].Job(next.JobID)
	h := fkHistory(t, job)
	last := h[len(h)-1]
	require.Equal(t, "success", last["status"])
	require.Equal(t, true, last["probe"], "after the lost lease the lane's next job is the probe: %v", h)
	lost := survivors[0].Job(first)
	require.Contains(t, fmt.Sprint(fkHistory(t, lost)), "lease expired", "the killed daemon's probe was recovered through its lease")
	require.False(t, survivors[0].Exited())
	fkDrained(t, survivors[0], "kp")
}

// ---- e. reload changes flowKeys ----

// TestFlowKeysReloadChangesLimits: flowKeys.concurrency 1 → 3 → 1 through
// the config file while two lanes have a backlog: each change takes effect
// without a restart (the reload log names it), and no job is lost.
func TestFlowKeysReloadChangesLimits(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := fkNewHook(t, func(d fkDelivery) fkReply { return fkReply{Status: 200, Delay: 40 * time.Millisecond} })
	yaml := func(perLane int) string {
		return "queues:\n" + fkQ("rl", hook.URL, "concurrency: 10", fmt.Sprintf("flowKeys: {concurrency: %d}", perLane))
	}
	initial := yaml(1)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: initial, LogLevel: "info"})
	ed := newConfigEditor(t, d, initial)
	ids := append(fkPublish(t, d, "rl", "A", 40), fkPublish(t, d, "rl", "B", 40)...)
	require.Eventually(t, func() bool { return hook.Finished("A") >= 3 && hook.Finished("B") >= 3 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, fkMax(hook.Lane("A"), false))
	require.Equal(t, 1, fkMax(hook.Lane("B"), false))

	ed.write(d.Config, yaml(3))
	require.Eventually(t, func() bool { return reloadsBy(t, d, "file change") == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []any{"rl: flowKeys.concurrency 1→3"}, logLines(t, d, "configuration reloaded")[0]["queuesChanged"])
	require.Eventually(t, func() bool { return fkMax(hook.Lane("A"), false) == 3 && fkMax(hook.Lane("B"), false) == 3 },
		10*time.Second, 5*time.Millisecond, "the lanes never used their 3 slots after the reload")
	fk := d.Queue("rl")["flowKeys"].(map[string]any)
	require.EqualValues(t, 3, fk["concurrency"])

	ed.write(d.Config, yaml(1))
	require.Eventually(t, func() bool { return reloadsBy(t, d, "file change") == 2 }, 10*time.Second, 10*time.Millisecond)
	lowered := time.Now()
	more := append(fkPublish(t, d, "rl", "A", 10), fkPublish(t, d, "rl", "B", 10)...)
	// Once the deliveries started under the old cap have ended, each lane
	// is back to one at a time.
	var drainedAt time.Time
	require.Eventually(t, func() bool {
		drainedAt = time.Time{}
		for _, dl := range hook.All() {
			if dl.Start.Before(lowered) {
				if dl.End.IsZero() {
					return false
				}
				if dl.End.After(drainedAt) {
					drainedAt = dl.End
				}
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the deliveries started before the reload end")
	fkWaitCompleted(t, d, append(ids, more...), 20*time.Second)
	for _, l := range []string{"A", "B"} {
		var after []fkDelivery
		for _, dl := range hook.Lane(l) {
			if dl.Start.After(drainedAt) {
				after = append(after, dl)
			}
		}
		require.NotEmpty(t, after, "lane %s delivered after the second reload", l)
		require.Equal(t, 1, fkMax(after, false), "lane %s is back to flowKeys.concurrency 1", l)
		require.Len(t, hook.Lane(l), 50, "lane %s: every job delivered once", l)
	}
	fkDrained(t, d, "rl")
}

// ---- f. Redis Cluster ----

// TestFlowKeysCluster: keyed publishes, a lane hold and its probe on a
// 3-master Redis Cluster with two daemons. A script that touched a key in
// another slot would fail there (CROSSSLOT); the scenario completing, and
// every key the queue has while its lane is held carrying its hash tag on
// one master, show that a lane's keys are the queue's.
func TestFlowKeysCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	hook := fkNewHook(t, func(d fkDelivery) fkReply {
		if d.Lane == "A" && d.N == 1 {
			return fkReply{Status: 429, RetryAfter: "0.5"}
		}
		return fkReply{Status: 200, Delay: 5 * time.Millisecond}
	})
	cfg := DaemonConfig{RedisAddrs: cl.Addrs(), LogLevel: "info", YAML: "queues:\n" +
		fkQ("clq", hook.URL, "concurrency: 4", "flowKeys: {concurrency: 2, rateLimitMax: 50, rateLimitWindow: 1s}")}
	ds := fkStartFleet(t, 2, cfg)
	first := fkPublishOne(t, ds[0], "clq", "A")
	require.Eventually(t, func() bool { return fkCounts(t, ds[1], "clq")["heldKeys"] == 1 }, 5*time.Second, 5*time.Millisecond, "lane A held")
	ids := append([]string{first}, fkPublish(t, ds[1], "clq", "A", 10)...)
	ids = append(ids, fkPublish(t, ds[0], "clq", "B", 10)...)
	ids = append(ids, fkPublish(t, ds[1], "clq", "", 5)...)

	// While A is held: every key of the queue is on one master, in the
	// slot of its hash tag, the lane's state among them.
	ctx := context.Background()
	var queueKeys []string
	masters := map[string]bool{}
	for _, n := range cl.Nodes {
		c := n.Client(t)
		var cursor uint64
		for i := 0; i < 1000; i++ {
			keys, next, err := c.Scan(ctx, cursor, "*", 500).Result()
			require.NoError(t, err)
			for _, k := range keys {
				if strings.Contains(k, "clq") {
					require.Contains(t, k, "{clq}", "a key of the queue without its hash tag on %s", n.Addr)
					queueKeys = append(queueKeys, k)
					masters[n.Addr] = true
				}
			}
			cursor = next
			if cursor == 0 {
				break
			}
		}
	}
	require.Len(t, masters, 1, "the queue's keys are on one master: %v", queueKeys)
	require.Contains(t, queueKeys, "simpleq:{clq}:lanes")
	require.Contains(t, queueKeys, "simpleq:{clq}:lheld")

	fkWaitCompleted(t, ds[0], ids, 20*time.Second)
	a := hook.Lane("A")
	require.Len(t, a, 12, "A's 10 jobs and the first one twice")
	require.Equal(t, first, a[1].JobID, "the deferred job probes")
	require.GreaterOrEqual(t, a[1].Start.Sub(a[0].End), 500*time.Millisecond-5*time.Millisecond)
	for _, d := range a[2:] {
		require.False(t, d.Start.Before(a[1].End), "A reopens after its probe's success")
	}
	require.LessOrEqual(t, fkMax(a, false), 2)
	h := fkHistory(t, ds[1].Job(first))
	require.Equal(t, true, h[len(h)-1]["probe"], "%v", h)
	for _, d := range ds {
		require.NotContains(t, d.Log(), "CROSSSLOT")
		require.NotContains(t, d.Log(), "non local key")
	}
	fkDrained(t, ds[1], "clq")
}
