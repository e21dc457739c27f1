package test

// Integration tests of backpressure (seed/backpressure.md, semantics.md §2 and
// §4): 429/503/529 and defer callbacks hold the whole queue, one probe reopens
// it, defers never spend attempts, maxDefers and the job lifetime bound them,
// ack mode judges the probe on its ack, scope "job" holds one job, and GET
// /v1/queues/{q} shows all of it. Every test runs real redis-server and real
// simpleqd processes against a scripted webhook, with holds of fractions of a
// second, and waits on observed state. Timing assertions compare the webhook's
// clock with Redis' clock; both are this machine's wall clock.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ---- helpers (prefixed bp so they cannot collide with other test files) ----

const bpTimeLayout = "2006-01-02T15:04:05.000Z"

// bpCall is one delivery as the scripted webhook sees it when it starts.
type bpCall struct {
	Delivery
	N    int     // 1-based index among every delivery this hook received
	JobN int     // 1-based index among the deliveries of this job
	Hook *bpHook // the hook answering, for Wait
}

// bpHook is a Webhook that also records deliveries when they start (Webhook
// records them when they finish) and numbers them for the script.
type bpHook struct {
	*Webhook
	mu     sync.Mutex
	starts []Delivery
	perJob map[string]int
	done   chan struct{} // closed at cleanup: releases every gate
}

// bpGate holds webhook answers until the test has observed what it needs,
// so the order of events does not depend on timing.
type bpGate struct {
	once sync.Once
	ch   chan struct{}
}

func bpNewGate() *bpGate { return &bpGate{ch: make(chan struct{})} }

// Open releases every answer waiting on g.
func (g *bpGate) Open() { g.once.Do(func() { close(g.ch) }) }

// Wait blocks a webhook answer until g opens (or the test ends).
func (h *bpHook) Wait(g *bpGate) { h.WaitAtMost(g, 30*time.Second) }

// WaitAtMost is Wait for at most d: for gates that a broken daemon may never open.
func (h *bpHook) WaitAtMost(g *bpGate, d time.Duration) {
	select {
	case <-g.ch:
	case <-h.done:
	case <-time.After(d):
	}
}

func bpNewHook(t *testing.T, script func(c bpCall) Reply) *bpHook {
	t.Helper()
	h := &bpHook{perJob: map[string]int{}, done: make(chan struct{})}
	h.Webhook = NewWebhook(t, func(dl Delivery) Reply {
		h.mu.Lock()
		h.starts = append(h.starts, dl)
		h.perJob[dl.JobID]++
		c := bpCall{Delivery: dl, N: len(h.starts), JobN: h.perJob[dl.JobID], Hook: h}
		h.mu.Unlock()
		if script == nil {
			return Reply{Status: 200}
		}
		return script(c)
	})
	// Runs before the webhook server closes (cleanups run last-in first-out),
	// so no answer is left waiting on a gate the test never opened.
	t.Cleanup(func() { close(h.done) })
	return h
}

// Started returns the deliveries that have started so far, in start order.
func (h *bpHook) Started() []Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Delivery(nil), h.starts...)
}

// StartedFor returns the started deliveries of one job.
func (h *bpHook) StartedFor(id string) []Delivery {
	var out []Delivery
	for _, dl := range h.Started() {
		if dl.JobID == id {
			out = append(out, dl)
		}
	}
	return out
}

// Finished returns every finished delivery sorted by start time.
func (h *bpHook) Finished() []Delivery {
	ds := h.Deliveries()
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Start.Before(ds[j].Start) })
	return ds
}

// FinishedFor returns the finished deliveries of one job, by start time.
func (h *bpHook) FinishedFor(id string) []Delivery {
	var out []Delivery
	for _, dl := range h.Finished() {
		if dl.JobID == id {
			out = append(out, dl)
		}
	}
	return out
}

// WaitIdle waits until every delivery that started has finished.
func (h *bpHook) WaitIdle(t *testing.T, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return h.Count() == len(h.Started()) }, within, 5*time.Millisecond, "webhook idle")
}

func bpTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "not a time string: %#v", v)
	tm, err := time.Parse(bpTimeLayout, s)
	require.NoError(t, err)
	return tm
}

// bpNear requires |got-want| ≤ tol.
func bpNear(t *testing.T, want, got time.Time, tol time.Duration, msg string, args ...any) {
	t.Helper()
	diff := got.Sub(want)
	if diff < 0 {
		diff = -diff
	}
	require.LessOrEqual(t, diff, tol, "%s: want %s, got %s (off by %s)",
		fmt.Sprintf(msg, args...), want.Format(bpTimeLayout), got.Format(bpTimeLayout), got.Sub(want))
}

// bpNotBefore requires got ≥ want.
func bpNotBefore(t *testing.T, got, want time.Time, msg string, args ...any) {
	t.Helper()
	require.False(t, got.Before(want), "%s: %s is %s before %s", fmt.Sprintf(msg, args...),
		got.Format(bpTimeLayout), want.Sub(got), want.Format(bpTimeLayout))
}

// bpView is GET /v1/queues/{q}, decoded.
type bpView struct {
	State      string
	Until      *time.Time
	ProbeJobID string // "" for null
	Reason     string // "" for null
	Counts     map[string]int
}

func bpQueue(t *testing.T, d *Daemon, name string) bpView {
	t.Helper()
	m := d.Queue(name)
	hold, ok := m["hold"].(map[string]any)
	require.True(t, ok, "queue has no hold object: %v", m)
	v := bpView{State: fmt.Sprint(hold["state"]), Counts: map[string]int{}}
	for _, k := range []string{"state", "until", "probeJobId", "reason"} {
		_, present := hold[k]
		require.True(t, present, "hold.%s missing: %v", k, hold)
	}
	if hold["until"] != nil {
		u := bpTime(t, hold["until"])
		v.Until = &u
	}
	if hold["probeJobId"] != nil {
		v.ProbeJobID = hold["probeJobId"].(string)
	}
	if hold["reason"] != nil {
		v.Reason = hold["reason"].(string)
	}
	counts, ok := m["counts"].(map[string]any)
	require.True(t, ok, "queue has no counts: %v", m)
	for _, k := range []string{"pending", "processing", "awaitingAck", "dead"} {
		n, ok := counts[k].(float64)
		require.True(t, ok, "counts.%s missing: %v", k, counts)
		v.Counts[k] = int(n)
	}
	return v
}

func bpCounts(pending, processing, awaitingAck, dead int) map[string]int {
	return map[string]int{"pending": pending, "processing": processing, "awaitingAck": awaitingAck, "dead": dead}
}

func bpHist(t *testing.T, job map[string]any) []map[string]any {
	t.Helper()
	raw, ok := job["history"].([]any)
	require.True(t, ok, "history is not an array: %v", job["history"])
	out := make([]map[string]any, len(raw))
	for i, e := range raw {
		out[i] = e.(map[string]any)
	}
	return out
}

// bpEntry checks the common fields of one history entry.
// bpAcked checks an ack's entry: SimpleQ's "success", with acked true.
func bpAcked(t *testing.T, e map[string]any, attempt int, code any, probe bool) {
	t.Helper()
	bpEntry(t, e, "success", attempt, code, probe)
	require.Equal(t, true, e["acked"], "an ack's entry is marked acked: %v", e)
}

func bpEntry(t *testing.T, e map[string]any, status string, attempt int, code any, probe bool) {
	t.Helper()
	require.Equal(t, status, e["status"], "history entry %v", e)
	require.EqualValues(t, attempt, e["attempt"], "history entry %v", e)
	if code == nil {
		require.Nil(t, e["webhookStatusCode"], "history entry %v", e)
	} else {
		require.EqualValues(t, code, e["webhookStatusCode"], "history entry %v", e)
	}
	if probe {
		require.Equal(t, true, e["probe"], "history entry should be marked probe: %v", e)
	} else {
		require.Nil(t, e["probe"], "history entry should not be a probe: %v", e)
	}
}

// bpDeferEntry checks a "deferred" entry and returns its timestamp.
func bpDeferEntry(t *testing.T, e map[string]any, attempt int, code any, probe bool, retryAfter float64, scope string) time.Time {
	t.Helper()
	bpEntry(t, e, "deferred", attempt, code, probe)
	ra, ok := e["retryAfter"].(float64)
	require.True(t, ok, "deferred entry without retryAfter: %v", e)
	require.InDelta(t, retryAfter, ra, 0.0015, "retryAfter of %v", e)
	require.Equal(t, scope, e["scope"], "scope of %v", e)
	return bpTime(t, e["timestamp"])
}

func bpEnvelopeInt(t *testing.T, dl Delivery, key string) int {
	t.Helper()
	v, ok := dl.Envelope()[key].(float64)
	require.True(t, ok, "envelope has no %s: %s", key, dl.Body)
	return int(v)
}

// bpAttempts checks the attempt header and the envelope's attempt and deferCount of deliveries.
func bpAttempts(t *testing.T, ds []Delivery, attempts, deferCounts []int) {
	t.Helper()
	require.Len(t, ds, len(attempts))
	for i, dl := range ds {
		require.Equal(t, attempts[i], dl.Attempt, "x-simpleq-attempt of delivery %d of %s", i+1, dl.JobID)
		require.Equal(t, attempts[i], bpEnvelopeInt(t, dl, "attempt"), "envelope attempt of delivery %d of %s", i+1, dl.JobID)
		require.Equal(t, deferCounts[i], bpEnvelopeInt(t, dl, "deferCount"), "envelope deferCount of delivery %d of %s", i+1, dl.JobID)
	}
}

// bpQ renders one queue entry of the queues: section.
func bpQ(name, url string, settings ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    webhookUrl: %s\n    signingSecret: whsec_test\n", name, url)
	for _, s := range settings {
		fmt.Fprintf(&b, "    %s\n", s)
	}
	return b.String()
}

// bpStart starts n daemons sharing rs, all with the same queues.
func bpStart(t *testing.T, n int, redisAddr string, queues ...string) []*Daemon {
	t.Helper()
	yaml := "shutdownGrace: 1s\nqueues:\n" + strings.Join(queues, "")
	ds := make([]*Daemon, n)
	for i := range ds {
		ds[i] = StartInProcess(t, DaemonConfig{RedisAddr: redisAddr, YAML: yaml})
	}
	return ds
}

// bpPublishBatch publishes n jobs in one call (one script call: they are all
// ready at the same instant) and returns their ids in order.
func bpPublishBatch(t *testing.T, d *Daemon, queue string, n int) []string {
	t.Helper()
	jobs := make([]map[string]any, n)
	for i := range jobs {
		jobs[i] = map[string]any{"payload": map[string]any{"i": i}}
	}
	r := d.Do("POST", "/v1/queues/"+queue+"/jobs/batch", map[string]any{"jobs": jobs})
	require.Equal(t, 200, r.Status, string(r.Body))
	var out struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out))
	require.Len(t, out.Jobs, n)
	ids := make([]string, n)
	for i, j := range out.Jobs {
		ids[i] = j.ID
	}
	// Jobs ready in the same millisecond are delivered in id order; batch ids ascend.
	require.True(t, sort.StringsAreSorted(ids), "batch ids not ascending: %v", ids)
	return ids
}

func bpCallback(d *Daemon, id, kind string, body any) Response {
	if body == nil {
		body = map[string]any{}
	}
	return d.Do("POST", "/v1/jobs/"+id+"/"+kind, body)
}

// bpAccepted sends a callback and requires 200 {"id":…,"accepted":true}.
func bpAccepted(t *testing.T, d *Daemon, id, kind string, body any) {
	t.Helper()
	r := bpCallback(d, id, kind, body)
	require.Equal(t, 200, r.Status, "%s %s: %s", kind, id, r.Body)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"accepted":true}`, id), string(r.Body))
}

// bpConflict sends a callback and requires 409 with an error body.
func bpConflict(t *testing.T, d *Daemon, id, kind string, body any) map[string]any {
	t.Helper()
	r := bpCallback(d, id, kind, body)
	require.Equal(t, 409, r.Status, "%s %s: %s", kind, id, r.Body)
	m := r.JSON(t)
	require.NotEmpty(t, m["error"], "409 without an error: %s", r.Body)
	return m
}

// bpLogHas reports whether one log line contains every part.
func bpLogHas(log string, parts ...string) bool {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		for _, p := range parts {
			if !strings.Contains(sc.Text(), p) {
				continue next
			}
		}
		return true
	}
	return false
}

// ---- 1. triggers ----

// TestBackpressureTriggers: 429, 503 and 529 answers hold the queue for the
// Retry-After given as delta-seconds, a decimal or an HTTP-date, and for
// defaultRetryAfter when it is missing or unparsable. No attempt is spent: the
// redelivery carries the same attempt, deferCount is 1, and the history has a
// "deferred" entry with retryAfter, scope, reason and webhookStatusCode.
// A 504 with a Retry-After is a plain failure (control).
func TestBackpressureTriggers(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const defaultRA = 300 * time.Millisecond
	type trigger struct {
		queue  string
		status int
		header string        // the Retry-After sent; "date" sends an HTTP-date ~2s ahead
		wait   time.Duration // the hold expected (not used for "date")
		dflt   bool          // no usable Retry-After: defaultRetryAfter applies
		hook   *bpHook
		date   atomic.Pointer[time.Time]
		id     string
		until  *time.Time
		seenAt time.Time // when the test first saw the hold
		seen   *bpGate   // the probe answers only once the hold was seen
	}
	cases := []*trigger{
		{queue: "trig-429-seconds", status: 429, header: "1", wait: time.Second},
		{queue: "trig-503-decimal", status: 503, header: "0.3", wait: 300 * time.Millisecond},
		{queue: "trig-529-date", status: 529, header: "date"},
		{queue: "trig-429-missing", status: 429, header: "", wait: defaultRA, dflt: true},
		{queue: "trig-503-unparsable", status: 503, header: "soon, please", wait: defaultRA, dflt: true},
		{queue: "trig-529-missing", status: 529, header: "", wait: defaultRA, dflt: true},
	}
	var queues []string
	for _, c := range cases {
		c.seen = bpNewGate()
		c.hook = bpNewHook(t, func(call bpCall) Reply {
			if call.JobN > 1 {
				// The hold (its until) stays visible until the probe answers.
				call.Hook.Wait(c.seen)
				return Reply{Status: 200}
			}
			h := c.header
			if h == "date" {
				at := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second)
				c.date.Store(&at)
				h = at.Format(http.TimeFormat)
			}
			return Reply{Status: c.status, RetryAfter: h}
		})
		queues = append(queues, bpQ(c.queue, c.hook.URL, "concurrency: 1", "defaultRetryAfter: 300ms"))
	}
	control := bpNewHook(t, func(call bpCall) Reply {
		if call.JobN == 1 {
			return Reply{Status: 504, RetryAfter: "0.1"}
		}
		return Reply{Status: 200}
	})
	queues = append(queues, bpQ("trig-504-failure", control.URL, "concurrency: 1", "defaultRetryAfter: 300ms",
		"backoff: {type: fixed, base: 100ms, jitter: false}"))
	d := bpStart(t, 1, rs.Addr, queues...)[0]

	for _, c := range cases {
		c.id = d.Publish(c.queue, map[string]any{"queue": c.queue})
	}
	controlID := d.Publish("trig-504-failure", map[string]any{})

	// Catch every queue's hold: its release time stays visible (held, then
	// probing) until the probe answers, which waits for this.
	require.Eventually(t, func() bool {
		all := true
		for _, c := range cases {
			if c.until != nil {
				continue
			}
			v := bpQueue(t, d, c.queue)
			if v.Until == nil {
				all = false
				continue
			}
			require.Contains(t, []string{"held", "probing"}, v.State, c.queue)
			require.Contains(t, v.Reason, strconv.Itoa(c.status), "%s: hold reason", c.queue)
			c.until, c.seenAt = v.Until, time.Now()
			c.seen.Open()
		}
		return all
	}, 10*time.Second, 5*time.Millisecond, "every trigger queue to show its hold")

	for _, c := range cases {
		job := d.WaitStatus(c.id, "completed", 10*time.Second)
		c.hook.WaitIdle(t, 5*time.Second)
		ds := c.hook.Finished()
		require.Len(t, ds, 2, "%s: one rate-limited delivery and one redelivery", c.queue)
		// No attempt spent: the redelivery is attempt 1 again, with deferCount 1.
		bpAttempts(t, ds, []int{1, 1}, []int{0, 1})
		require.EqualValues(t, 1, job["attempts"], c.queue)
		require.EqualValues(t, 1, job["deferCount"], c.queue)

		h := bpHist(t, job)
		require.Len(t, h, 2, "%s history: %v", c.queue, h)
		wantRA := c.wait.Seconds()
		if c.header == "date" {
			date := *c.date.Load()
			ra, ok := h[0]["retryAfter"].(float64)
			require.True(t, ok, "%s: deferred entry without retryAfter: %v", c.queue, h[0])
			require.Greater(t, ra, 0.0, "%s: an HTTP-date 1-2s ahead", c.queue)
			require.LessOrEqual(t, ra, 2.0, "%s: an HTTP-date 1-2s ahead", c.queue)
			wantRA = ra
			// The hold ends at the date given, give or take the time between
			// the daemon reading the answer and recording the defer (which
			// lies between the webhook answering and the test seeing it).
			bpNotBefore(t, *c.until, date.Add(-2*time.Millisecond), "%s: hold.until vs the Retry-After date", c.queue)
			bpNotBefore(t, date.Add(c.seenAt.Sub(ds[0].End)), *c.until, "%s: hold.until vs the Retry-After date", c.queue)
		}
		ts := bpDeferEntry(t, h[0], 1, c.status, false, wantRA, "queue")
		reason, _ := h[0]["reason"].(string)
		require.Contains(t, reason, strconv.Itoa(c.status), "%s: defer reason", c.queue)
		bpEntry(t, h[1], "success", 1, 200, true)

		// The hold's release time is the defer's time plus the wait, on Redis' clock.
		bpNear(t, ts.Add(time.Duration(wantRA*float64(time.Second))), *c.until, 2*time.Millisecond,
			"%s: hold.until = defer time + Retry-After", c.queue)
		if c.dflt {
			// …which is "now + defaultRetryAfter", now being between the
			// webhook's answer and the test seeing the hold.
			bpNotBefore(t, *c.until, ds[0].End.Add(defaultRA-time.Millisecond), "%s: hold.until vs answer + default", c.queue)
			bpNotBefore(t, c.seenAt.Add(defaultRA), *c.until, "%s: hold.until vs seen + default", c.queue)
		}
		// No redelivery before the release time.
		bpNotBefore(t, ds[1].Start, *c.until, "%s: redelivery vs hold.until", c.queue)
		v := bpQueue(t, d, c.queue)
		require.Equal(t, "open", v.State, "%s: the probe's success reopens", c.queue)
		require.Nil(t, v.Until, c.queue)
	}

	// Control: 504 is a failure even with a Retry-After: an attempt is spent.
	job := d.WaitStatus(controlID, "completed", 10*time.Second)
	control.WaitIdle(t, 5*time.Second)
	bpAttempts(t, control.Finished(), []int{1, 2}, []int{0, 0})
	require.EqualValues(t, 2, job["attempts"])
	require.EqualValues(t, 0, job["deferCount"])
	h := bpHist(t, job)
	require.Len(t, h, 2)
	bpEntry(t, h[0], "failed", 1, 504, false)
	bpEntry(t, h[1], "success", 2, 200, false)
}

// ---- 2. the hold and the probe ----

// TestBackpressureHoldAndProbeAcrossDaemons: three daemons on one Redis. While
// the queue is held no daemon delivers anything; when the hold ends exactly
// one delivery (the probe, the job first in line) starts and nothing else
// until it answers; GET shows held, then probing with probeJobId; the probe's
// 200 reopens the queue and the backlog flows at the configured concurrency.
func TestBackpressureHoldAndProbeAcrossDaemons(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	const conc = 3
	allInFlight, probeSeen, backlogInFlight := bpNewGate(), bpNewGate(), bpNewGate()
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch {
		case c.N <= conc: // in flight when the hold begins: all rate-limited
			if c.N == conc {
				allInFlight.Open()
			}
			c.Hook.Wait(allInFlight)
			return Reply{Status: 429, RetryAfter: "1"}
		case c.N == conc+1: // the probe: answers once the test saw it probing
			c.Hook.Wait(probeSeen)
			return Reply{Status: 200}
		case c.N <= 2*conc+1: // the first backlog deliveries: answer once all are in flight
			if c.N == 2*conc+1 {
				backlogInFlight.Open()
			}
			c.Hook.WaitAtMost(backlogInFlight, 3*time.Second)
			return Reply{Status: 200}
		default:
			return Reply{Status: 200, Delay: 50 * time.Millisecond}
		}
	})
	ds := bpStart(t, 3, rs.Addr, bpQ("fleet", hook.URL, fmt.Sprintf("concurrency: %d", conc)))
	ids := bpPublishBatch(t, ds[0], "fleet", 8)

	require.Eventually(t, func() bool { return bpQueue(t, ds[1], "fleet").State == "held" }, 5*time.Second, 5*time.Millisecond, "queue held")
	for _, id := range ids[:conc] {
		require.Eventually(t, func() bool { return ds[1].Job(id)["deferCount"] == 1.0 }, 5*time.Second, 5*time.Millisecond, "the in-flight jobs' defers")
	}
	held := bpQueue(t, ds[1], "fleet")
	require.Equal(t, "held", held.State)
	require.NotNil(t, held.Until)
	require.Contains(t, held.Reason, "429")
	require.Empty(t, held.ProbeJobID)

	// While the probe is in flight, every daemon reports probing and the probe.
	require.Eventually(t, func() bool { return len(hook.Started()) > conc }, 5*time.Second, 5*time.Millisecond, "the probe to start")
	probing := bpQueue(t, ds[2], "fleet")
	require.Equal(t, "probing", probing.State)
	require.Equal(t, ids[0], probing.ProbeJobID, "the probe is the job first in line")
	require.NotNil(t, probing.Until)
	require.Never(t, func() bool {
		return len(hook.Started()) > conc+1
	}, 200*time.Millisecond, 10*time.Millisecond, "a second delivery while the probe is out")
	probeSeen.Open()

	for i, id := range ids {
		ds[i%3].WaitStatus(id, "completed", 10*time.Second)
	}
	hook.WaitIdle(t, 5*time.Second)
	all := hook.Finished()
	require.Len(t, all, 8+conc, "8 jobs, 3 of them redelivered after their defer")

	// The first three deliveries were the three first jobs, and each deferred.
	first := []string{all[0].JobID, all[1].JobID, all[2].JobID}
	require.ElementsMatch(t, ids[:conc], first)
	var holdBegan, lastDefer time.Time
	for i, id := range ids[:conc] {
		job := ds[0].Job(id)
		h := bpHist(t, job)
		require.Len(t, h, 2, "%s: %v", id, h)
		ts := bpDeferEntry(t, h[0], 1, 429, false, 1, "queue")
		if i == 0 || ts.Before(holdBegan) {
			holdBegan = ts
		}
		if ts.After(lastDefer) {
			lastDefer = ts
		}
		bpEntry(t, h[1], "success", 1, 200, id == ids[0])
		require.EqualValues(t, 1, job["attempts"])
		require.EqualValues(t, 1, job["deferCount"])
		bpAttempts(t, hook.FinishedFor(id), []int{1, 1}, []int{0, 1})
	}
	// The latest release time asked for is the hold's until.
	until := lastDefer.Add(time.Second)
	bpNear(t, until, *held.Until, 2*time.Millisecond, "hold.until while held")
	bpNear(t, until, *probing.Until, 2*time.Millisecond, "hold.until while probing")

	// Nothing started between the hold's start and its release...
	for _, dl := range all[conc:] {
		bpNotBefore(t, dl.Start, until, "delivery of %s (attempt %d) during the hold", dl.JobID, dl.Attempt)
	}
	// (Redis times are whole milliseconds.)
	bpNotBefore(t, holdBegan, all[conc-1].Start.Truncate(time.Millisecond), "the deliveries in flight when the hold began started before it")
	// ...then exactly one delivery, the probe, and nothing else until it answered.
	probe := all[conc]
	require.Equal(t, ids[0], probe.JobID)
	bpNotBefore(t, all[conc+1].Start, probe.End, "the delivery after the probe")

	// Reopened: the backlog runs at the configured concurrency, never above.
	maxAfter := 0
	for _, dl := range all[conc+1:] {
		maxAfter = max(maxAfter, dl.Inflight)
	}
	require.Equal(t, conc, maxAfter, "backlog concurrency after the probe succeeded")
	require.LessOrEqual(t, hook.MaxInflight(), conc)

	// Jobs that waited behind the hold spent nothing.
	for _, id := range ids[conc:] {
		job := ds[0].Job(id)
		require.EqualValues(t, 0, job["deferCount"], id)
		require.EqualValues(t, 1, job["attempts"], id)
		h := bpHist(t, job)
		require.Len(t, h, 1, id)
		bpEntry(t, h[0], "success", 1, 200, false)
		require.Len(t, hook.FinishedFor(id), 1, id)
	}
	v := bpQueue(t, ds[0], "fleet")
	require.Equal(t, "open", v.State)
	require.Nil(t, v.Until)
	require.Empty(t, v.ProbeJobID)
	require.Equal(t, bpCounts(0, 0, 0, 0), v.Counts)
}

// TestBackpressureLatestReleaseWins: the seed's example, scaled down. A asks
// for 2s at T. B, in flight since T, answers at ≈T+1.2 with a Retry-After
// shorter than A's that still releases 0.3s after A's release: the hold moves
// out to B's release (release times are compared, not Retry-After values),
// with B's reason. Then C asks 0.1s, an earlier release: nothing changes.
// No delivery starts before the latest release.
func TestBackpressureLatestReleaseWins(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	gateB, gateC := bpNewGate(), bpNewGate()
	var raB atomic.Pointer[string]
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch c.N {
		case 1:
			return Reply{Status: 429, RetryAfter: "2"}
		case 2:
			c.Hook.Wait(gateB)
			return Reply{Status: 429, RetryAfter: *raB.Load()}
		case 3:
			c.Hook.Wait(gateC)
			return Reply{Status: 429, RetryAfter: "0.1"}
		default:
			return Reply{Status: 200}
		}
	})
	ds := bpStart(t, 2, rs.Addr, bpQ("overlap", hook.URL, "concurrency: 3"))
	ids := bpPublishBatch(t, ds[0], "overlap", 3)
	require.Eventually(t, func() bool { return len(hook.Started()) >= 3 }, 5*time.Second, 5*time.Millisecond, "three deliveries in flight")
	started := hook.Started()
	jobA, jobB, jobC := started[0].JobID, started[1].JobID, started[2].JobID

	deferredAt := func(id string) (time.Time, bool) {
		for _, e := range bpHist(t, ds[1].Job(id)) {
			if e["status"] == "deferred" {
				return bpTime(t, e["timestamp"]), true
			}
		}
		return time.Time{}, false
	}
	// The hold's release time, and its reason: that of the defer in force.
	untilNow := func(wantRetryAfter string) time.Time {
		v := bpQueue(t, ds[0], "overlap")
		require.Equal(t, "held", v.State)
		require.NotNil(t, v.Until)
		require.Equal(t, "webhook responded 429 (Retry-After: "+wantRetryAfter+")", v.Reason)
		return *v.Until
	}
	var tsA time.Time
	require.Eventually(t, func() bool { var ok bool; tsA, ok = deferredAt(jobA); return ok }, 5*time.Second, 5*time.Millisecond, "the first defer")
	u1 := untilNow("2")
	bpNear(t, tsA.Add(2*time.Second), u1, 2*time.Millisecond, "release after the first defer")

	// B answers at ≈T+1.2, asking for less than A's 2s but releasing later.
	time.Sleep(time.Until(tsA.Add(1200 * time.Millisecond))) //nolint:testsleep // B must answer at a moment of the hold: the scenario is timed
	ra := strconv.FormatFloat(u1.Add(300*time.Millisecond).Sub(time.Now()).Seconds(), 'f', 3, 64)
	raB.Store(&ra)
	gateB.Open()
	var tsB time.Time
	require.Eventually(t, func() bool { var ok bool; tsB, ok = deferredAt(jobB); return ok }, 5*time.Second, 5*time.Millisecond, "the second defer")
	u2 := untilNow(ra)
	raSeconds, err := strconv.ParseFloat(ra, 64)
	require.NoError(t, err)
	require.Less(t, raSeconds, 2.0, "B's Retry-After is shorter than A's")
	require.True(t, tsB.Before(u1), "precondition: the second defer arrives during the hold (at %s, hold until %s)", tsB, u1)
	bpNear(t, tsB.Add(time.Duration(raSeconds*1000)*time.Millisecond), u2, 2*time.Millisecond, "release after the second defer")
	require.True(t, u2.After(u1), "a later defer asking less time still pushes the release out: %s → %s", u1, u2)

	gateC.Open()
	var tsC time.Time
	require.Eventually(t, func() bool { var ok bool; tsC, ok = deferredAt(jobC); return ok }, 5*time.Second, 5*time.Millisecond, "the third defer")
	u3 := untilNow(ra)
	require.True(t, tsC.Add(100*time.Millisecond).Before(u2), "precondition: the third defer asks an earlier release")
	require.Equal(t, u2, u3, "an earlier release time changes nothing")

	for _, id := range ids {
		ds[0].WaitStatus(id, "completed", 10*time.Second)
	}
	hook.WaitIdle(t, 5*time.Second)
	all := hook.Finished()
	require.Len(t, all, 6)
	for _, dl := range all[3:] {
		bpNotBefore(t, dl.Start, u2, "delivery of %s before the latest release", dl.JobID)
	}
	require.Equal(t, ids[0], all[3].JobID, "the probe is the job first in line")
	bpNotBefore(t, all[4].Start, all[3].End, "nothing else during the probe")
}

// TestBackpressureInflightSuccessDoesNotReopen: deliveries in flight when the
// hold began finish normally; their 200s complete their jobs but leave the
// queue held (before the release) or probing (after it). Only the probe's
// success reopens it.
func TestBackpressureInflightSuccessDoesNotReopen(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	whileHeld, whileProbing, probeAnswer := bpNewGate(), bpNewGate(), bpNewGate()
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch c.N {
		case 1:
			return Reply{Status: 429, RetryAfter: "1"}
		case 2: // finishes while held
			c.Hook.Wait(whileHeld)
			return Reply{Status: 200}
		case 3: // finishes while the probe is out
			c.Hook.Wait(whileProbing)
			return Reply{Status: 200}
		case 4: // the probe
			c.Hook.Wait(probeAnswer)
			return Reply{Status: 200}
		default:
			return Reply{Status: 200}
		}
	})
	d := bpStart(t, 1, rs.Addr, bpQ("inflight", hook.URL, "concurrency: 3"))[0]
	ids := bpPublishBatch(t, d, "inflight", 4)
	require.Eventually(t, func() bool { return len(hook.Started()) >= 3 }, 5*time.Second, 5*time.Millisecond, "three deliveries in flight")
	started := hook.Started()
	deferred, early, late := started[0].JobID, started[1].JobID, started[2].JobID
	require.ElementsMatch(t, ids[:3], []string{deferred, early, late})

	require.Eventually(t, func() bool { return bpQueue(t, d, "inflight").State == "held" }, 5*time.Second, 5*time.Millisecond, "the hold")
	whileHeld.Open()
	d.WaitStatus(early, "completed", 5*time.Second)
	v := bpQueue(t, d, "inflight")
	require.NotEqual(t, "open", v.State, "an in-flight success while held does not reopen")
	require.NotNil(t, v.Until)

	require.Eventually(t, func() bool { return len(hook.Started()) >= 4 }, 5*time.Second, 5*time.Millisecond, "the probe")
	require.Equal(t, deferred, hook.Started()[3].JobID, "the deferred job waited where it was in line and probes")
	whileProbing.Open()
	d.WaitStatus(late, "completed", 5*time.Second)
	v = bpQueue(t, d, "inflight")
	require.Equal(t, "probing", v.State, "an in-flight success while probing does not reopen")
	require.Equal(t, deferred, v.ProbeJobID)
	require.Empty(t, hook.StartedFor(ids[3]), "the backlog waits for the probe")
	probeAnswer.Open()

	d.WaitStatus(ids[3], "completed", 5*time.Second)
	d.WaitStatus(deferred, "completed", 5*time.Second)
	hook.WaitIdle(t, 5*time.Second)
	probe := hook.FinishedFor(deferred)
	require.Len(t, probe, 2)
	backlog := hook.FinishedFor(ids[3])
	require.Len(t, backlog, 1)
	bpNotBefore(t, backlog[0].Start, probe[1].End, "backlog delivery vs the probe's answer")
	for _, id := range []string{early, late} {
		job := d.Job(id)
		h := bpHist(t, job)
		require.Len(t, h, 1)
		bpEntry(t, h[0], "success", 1, 200, false)
		require.EqualValues(t, 0, job["deferCount"])
	}
	require.Equal(t, "open", bpQueue(t, d, "inflight").State)
}

// TestBackpressureProbeSuccessAfterNewerDeferKeepsHold: a delivery that was
// in flight when the hold began defers while the probe is out, pushing the
// release later; the probe's 200 then completes its job but does not reopen
// the queue. The next round's probe (the next job in line) does.
func TestBackpressureProbeSuccessAfterNewerDeferKeepsHold(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	answerB, answerProbe := bpNewGate(), bpNewGate()
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch c.N {
		case 1:
			return Reply{Status: 429, RetryAfter: "0.3"}
		case 2: // in flight since before the hold; defers while the probe is out
			c.Hook.Wait(answerB)
			return Reply{Status: 429, RetryAfter: "1"}
		case 3: // the first probe: succeeds after the hold was pushed out
			c.Hook.Wait(answerProbe)
			return Reply{Status: 200}
		default:
			return Reply{Status: 200}
		}
	})
	ds := bpStart(t, 2, rs.Addr, bpQ("pushed", hook.URL, "concurrency: 2"))
	ids := bpPublishBatch(t, ds[0], "pushed", 3)
	require.Eventually(t, func() bool { return len(hook.Started()) >= 3 }, 5*time.Second, 5*time.Millisecond, "the first probe")
	started := hook.Started()
	jobA, jobB := started[0].JobID, started[1].JobID
	require.ElementsMatch(t, ids[:2], []string{jobA, jobB})
	require.Equal(t, jobA, started[2].JobID, "first probe")
	answerB.Open()
	require.Eventually(t, func() bool { return ds[1].Job(jobB)["deferCount"] == 1.0 }, 5*time.Second, 5*time.Millisecond, "B's defer")
	answerProbe.Open()

	ds[1].WaitStatus(jobA, "completed", 5*time.Second)
	v := bpQueue(t, ds[0], "pushed")
	require.Equal(t, "held", v.State, "a probe success before the pushed-out release does not reopen")
	require.Empty(t, v.ProbeJobID)
	hB := bpHist(t, ds[0].Job(jobB))
	require.Len(t, hB, 1)
	tsB := bpDeferEntry(t, hB[0], 1, 429, false, 1, "queue")
	bpNear(t, tsB.Add(time.Second), *v.Until, 2*time.Millisecond, "hold.until after the newer defer")
	until := *v.Until

	for _, id := range ids {
		ds[0].WaitStatus(id, "completed", 10*time.Second)
	}
	hook.WaitIdle(t, 5*time.Second)
	all := hook.Finished()
	require.Len(t, all, 5)
	bpNotBefore(t, tsB, all[2].Start.Truncate(time.Millisecond), "precondition: the newer defer arrived while the first probe was out")
	require.True(t, tsB.Before(all[2].End), "precondition: the newer defer arrived while the first probe was out")
	hA := bpHist(t, ds[0].Job(jobA))
	require.Len(t, hA, 2)
	bpEntry(t, hA[1], "success", 1, 200, true)
	require.Equal(t, jobB, all[3].JobID, "second probe: the next job in line")
	bpNotBefore(t, all[3].Start, until, "second probe vs the pushed-out release")
	bpEntry(t, bpHist(t, ds[0].Job(jobB))[1], "success", 1, 200, true)
	require.Equal(t, ids[2], all[4].JobID)
	bpNotBefore(t, all[4].Start, all[3].End, "the backlog waits for the second probe")
	require.Equal(t, "open", bpQueue(t, ds[0], "pushed").State)
}

// TestBackpressureProbeDefersAgain: a probe that reports backpressure holds
// the queue again for its new Retry-After and spends one of its own defers;
// the same job (still first in line) probes the next round; jobs behind it
// are never sent until a probe succeeds.
func TestBackpressureProbeDefersAgain(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	bothInFlight := bpNewGate()
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch c.N {
		case 1, 2:
			if c.N == 2 {
				bothInFlight.Open()
			}
			c.Hook.Wait(bothInFlight)
			return Reply{Status: 429, RetryAfter: "0.3"}
		case 3: // first probe: rate-limited again
			return Reply{Status: 503, RetryAfter: "1"}
		default:
			return Reply{Status: 200}
		}
	})
	ds := bpStart(t, 2, rs.Addr, bpQ("reprobe", hook.URL, "concurrency: 2"))
	ids := bpPublishBatch(t, ds[0], "reprobe", 3)

	// After the first probe's defer: held again, until = its time + 1s.
	var job0 map[string]any
	require.Eventually(t, func() bool {
		job0 = ds[1].Job(ids[0])
		return job0["deferCount"] == 2.0
	}, 5*time.Second, 5*time.Millisecond, "the probe's defer")
	h := bpHist(t, job0)
	require.Len(t, h, 2)
	tsProbeDefer := bpDeferEntry(t, h[1], 1, 503, true, 1, "queue")
	v := bpQueue(t, ds[0], "reprobe")
	require.Equal(t, "held", v.State)
	require.NotNil(t, v.Until)
	bpNear(t, tsProbeDefer.Add(time.Second), *v.Until, 2*time.Millisecond, "hold.until after the probe's defer")
	until2 := *v.Until

	for _, id := range ids {
		ds[0].WaitStatus(id, "completed", 10*time.Second)
	}
	hook.WaitIdle(t, 5*time.Second)
	all := hook.Finished()
	require.Len(t, all, 3+2+1, "two rounds on ids[0], one redelivery of ids[1], one delivery of ids[2]")
	require.ElementsMatch(t, ids[:2], []string{all[0].JobID, all[1].JobID})
	require.Equal(t, ids[0], all[2].JobID, "first probe")
	require.Equal(t, ids[0], all[3].JobID, "second probe: the same job, still first in line")
	bpNotBefore(t, all[3].Start, until2, "second probe vs the renewed hold")
	bpNotBefore(t, all[4].Start, all[3].End, "nothing else until the second probe answered")

	job0 = ds[0].Job(ids[0])
	require.EqualValues(t, 2, job0["deferCount"], "the probe's defer spends its own maxDefers")
	require.EqualValues(t, 1, job0["attempts"], "no attempt spent by defers")
	h = bpHist(t, job0)
	require.Len(t, h, 3)
	bpDeferEntry(t, h[0], 1, 429, false, 0.3, "queue")
	bpDeferEntry(t, h[1], 1, 503, true, 1, "queue")
	bpEntry(t, h[2], "success", 1, 200, true)
	bpAttempts(t, hook.FinishedFor(ids[0]), []int{1, 1, 1}, []int{0, 1, 2})

	require.EqualValues(t, 1, ds[0].Job(ids[1])["deferCount"])
	job2 := ds[0].Job(ids[2])
	require.EqualValues(t, 0, job2["deferCount"], "a job held behind the probe spends nothing")
	require.Len(t, hook.FinishedFor(ids[2]), 1)
	bpNotBefore(t, hook.FinishedFor(ids[2])[0].Start, all[3].End, "the held job waited for a successful probe")
}

// TestBackpressureFailedProbeNextJobProbes: a probe that fails (500) spends an
// attempt and retries after backoff as usual; the queue stays probing and the
// next job becomes the probe, one at a time, until one succeeds.
func TestBackpressureFailedProbeNextJobProbes(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	allInFlight, seen := bpNewGate(), bpNewGate()
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch {
		case c.N <= 3:
			if c.N == 3 {
				allInFlight.Open()
			}
			c.Hook.Wait(allInFlight)
			return Reply{Status: 429, RetryAfter: "0.3"}
		case c.N == 4:
			return Reply{Status: 500, Body: "probe one broke"}
		case c.N == 5:
			// Out until the test has looked, and long enough that the first
			// probe's retry (backoff 200ms) falls due meanwhile.
			c.Hook.Wait(seen)
			time.Sleep(time.Until(c.Start.Add(400 * time.Millisecond))) //nolint:testsleep // the webhook answers late, in wall time, past the retry's due time
			return Reply{Status: 500, Body: "probe two broke"}
		default:
			return Reply{Status: 200}
		}
	})
	ds := bpStart(t, 2, rs.Addr, bpQ("failprobe", hook.URL, "concurrency: 3",
		"backoff: {type: fixed, base: 200ms, jitter: false}"))
	ids := bpPublishBatch(t, ds[0], "failprobe", 5)

	require.Eventually(t, func() bool { return len(hook.Started()) >= 5 }, 5*time.Second, 5*time.Millisecond, "the second probe to start")
	v := bpQueue(t, ds[1], "failprobe")
	require.Equal(t, "probing", v.State, "a failed probe keeps the queue probing")
	require.Equal(t, ids[1], v.ProbeJobID, "the next job in line is the probe")
	seen.Open()

	for _, id := range ids {
		ds[0].WaitStatus(id, "completed", 10*time.Second)
	}
	hook.WaitIdle(t, 5*time.Second)
	all := hook.Finished()
	require.Len(t, all, 3+3+4, "3 rate-limited, 3 probes, then 2 retries and 2 first deliveries")
	require.Equal(t, []string{ids[0], ids[1], ids[2]}, []string{all[3].JobID, all[4].JobID, all[5].JobID},
		"probes in line order")
	for i := 4; i <= 6; i++ {
		bpNotBefore(t, all[i].Start, all[i-1].End, "delivery %d must wait for probe %d's answer", i+1, i)
	}
	for _, id := range ids[:2] {
		job := ds[0].Job(id)
		require.EqualValues(t, 2, job["attempts"], "a failed probe spends an attempt")
		require.EqualValues(t, 1, job["deferCount"])
		h := bpHist(t, job)
		require.Len(t, h, 3, "%s: %v", id, h)
		bpDeferEntry(t, h[0], 1, 429, false, 0.3, "queue")
		bpEntry(t, h[1], "failed", 1, 500, true)
		bpEntry(t, h[2], "success", 2, 200, false)
		bpAttempts(t, hook.FinishedFor(id), []int{1, 1, 2}, []int{0, 1, 1})
	}
	h := bpHist(t, ds[0].Job(ids[2]))
	require.Len(t, h, 2)
	bpEntry(t, h[1], "success", 1, 200, true)
	require.Equal(t, "open", bpQueue(t, ds[0], "failprobe").State)
}

// TestBackpressureIdleHoldFirstNewJobProbes: when nothing is ready as the
// hold ends, the queue stays probing with no probe; the first job published
// afterwards is the probe (delivered alone) and its success reopens.
// maxDefers 0 makes the reporting job die of its first defer, so nothing waits.
func TestBackpressureIdleHoldFirstNewJobProbes(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	seen := bpNewGate()
	hook := bpNewHook(t, func(c bpCall) Reply {
		switch c.N {
		case 1:
			return Reply{Status: 429, RetryAfter: "1"}
		case 2: // the probe
			c.Hook.Wait(seen)
			return Reply{Status: 200}
		default:
			return Reply{Status: 200}
		}
	})
	d := bpStart(t, 1, rs.Addr, bpQ("idle", hook.URL, "concurrency: 3", "maxDefers: 0"))[0]
	first := d.Publish("idle", map[string]any{"n": 1})
	job := d.WaitStatus(first, "dead", 5*time.Second)
	v := bpQueue(t, d, "idle")
	require.Equal(t, "held", v.State, "the queue is held although the reporting job died")
	require.Equal(t, "defer_cap_exhausted", job["deadReason"])
	require.EqualValues(t, 0, job["attempts"])
	require.EqualValues(t, 1, job["deferCount"])
	h := bpHist(t, job)
	require.Len(t, h, 1)
	ts := bpDeferEntry(t, h[0], 1, 429, false, 1, "queue")
	require.Equal(t, ts, bpTime(t, job["completedAt"]), "a dead job's completedAt is when it died")
	bpNear(t, ts.Add(time.Second), *v.Until, 2*time.Millisecond, "hold.until")

	require.Eventually(t, func() bool {
		v = bpQueue(t, d, "idle")
		return v.State == "probing"
	}, 5*time.Second, 5*time.Millisecond, "probing with nothing ready")
	require.Empty(t, v.ProbeJobID)
	require.Equal(t, bpCounts(0, 0, 0, 1), v.Counts)

	ids := bpPublishBatch(t, d, "idle", 2)
	require.Eventually(t, func() bool { return len(hook.Started()) >= 2 }, 5*time.Second, 5*time.Millisecond, "the probe to start")
	v = bpQueue(t, d, "idle")
	require.Equal(t, "probing", v.State)
	require.Equal(t, ids[0], v.ProbeJobID, "the first job to become ready is the probe")
	require.Never(t, func() bool {
		return len(hook.Started()) > 2
	}, 200*time.Millisecond, 10*time.Millisecond, "a second new job delivered while the probe is out")
	seen.Open()
	for _, id := range ids {
		d.WaitStatus(id, "completed", 5*time.Second)
	}
	hook.WaitIdle(t, 5*time.Second)
	all := hook.Finished()
	require.Len(t, all, 3)
	require.Equal(t, []string{ids[0], ids[1]}, []string{all[1].JobID, all[2].JobID})
	bpNotBefore(t, all[2].Start, all[1].End, "the second new job waits for the probe's answer")
	bpEntry(t, bpHist(t, d.Job(ids[0]))[0], "success", 1, 200, true)
	bpEntry(t, bpHist(t, d.Job(ids[1]))[0], "success", 1, 200, false)
	require.Equal(t, "open", bpQueue(t, d, "idle").State)
}

// ---- 4. ack mode ----

// TestBackpressureAckCallbacks: the ack/nack/defer API. A 2xx leaves the job
// awaiting_ack; callbacks answer {"id","accepted":true}; 404 for an unknown
// job; 409 on a standard queue, for a job not awaiting an outcome (pending,
// dead, completed for nack/defer) and for a stale attempt; a repeated ack
// answers 200 again.
func TestBackpressureAckCallbacks(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	ackHook := bpNewHook(t, nil)
	stdHook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr,
		bpQ("ackapi", ackHook.URL, "mode: ack", "concurrency: 5", "ackTimeout: 30s",
			"backoff: {type: fixed, base: 100ms, jitter: false}"),
		bpQ("stdapi", stdHook.URL))[0]

	// ack
	j1 := d.Publish("ackapi", map[string]any{"n": 1})
	job := d.WaitStatus(j1, "awaiting_ack", 5*time.Second)
	require.Empty(t, bpHist(t, job), "the 2xx alone is no outcome yet")
	require.Equal(t, 1, bpQueue(t, d, "ackapi").Counts["awaitingAck"])
	bpAccepted(t, d, j1, "ack", nil)
	job = d.Job(j1)
	require.Equal(t, "completed", job["status"])
	require.EqualValues(t, 1, job["attempts"])
	require.NotNil(t, job["completedAt"])
	h := bpHist(t, job)
	require.Len(t, h, 1)
	bpAcked(t, h[0], 1, 200, false)
	bpAccepted(t, d, j1, "ack", nil) // repeated ack: 200 again
	bpAccepted(t, d, j1, "ack", map[string]any{"attempt": 1})
	require.Len(t, bpHist(t, d.Job(j1)), 1, "a repeated ack records nothing")
	m := bpConflict(t, d, j1, "nack", nil)
	require.Contains(t, m["error"], "completed")
	bpConflict(t, d, j1, "defer", map[string]any{"retryAfter": 1})

	// nack (retryable) → redelivery with attempt 2; a stale attempt is refused
	j2 := d.Publish("ackapi", map[string]any{"n": 2})
	d.WaitStatus(j2, "awaiting_ack", 5*time.Second)
	bpConflict(t, d, j2, "ack", map[string]any{"attempt": 2})
	bpAccepted(t, d, j2, "nack", map[string]any{"retryable": true, "reason": "flaky", "attempt": 1})
	require.Eventually(t, func() bool { return len(ackHook.StartedFor(j2)) == 2 }, 5*time.Second, 5*time.Millisecond, "redelivery of the nacked job")
	d.WaitStatus(j2, "awaiting_ack", 5*time.Second)
	require.Equal(t, 2, ackHook.StartedFor(j2)[1].Attempt)
	m = bpConflict(t, d, j2, "ack", map[string]any{"attempt": 1})
	require.Contains(t, m["error"], "1")
	bpAccepted(t, d, j2, "ack", map[string]any{"attempt": 2})
	job = d.Job(j2)
	require.Equal(t, "completed", job["status"])
	require.EqualValues(t, 2, job["attempts"])
	h = bpHist(t, job)
	require.Len(t, h, 2)
	bpEntry(t, h[0], "nacked", 1, 200, false)
	require.Equal(t, "flaky", h[0]["error"])
	bpAcked(t, h[1], 2, 200, false)

	// nack retryable:false → dead / nacked; a dead job accepts no callback
	j3 := d.Publish("ackapi", map[string]any{"n": 3})
	d.WaitStatus(j3, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, j3, "nack", map[string]any{"retryable": false})
	job = d.Job(j3)
	require.Equal(t, "dead", job["status"])
	require.Equal(t, "nacked", job["deadReason"])
	m = bpConflict(t, d, j3, "ack", nil)
	require.Contains(t, m["error"], "dead")
	bpConflict(t, d, j3, "defer", map[string]any{"retryAfter": 1})

	// a pending job (delayed) is not awaiting an outcome
	j4r := d.Do("POST", "/v1/queues/ackapi/jobs", map[string]any{"payload": map[string]any{"n": 4}, "delay": 60})
	require.Equal(t, 201, j4r.Status, string(j4r.Body))
	j4 := j4r.JSON(t)["id"].(string)
	for _, kind := range []string{"ack", "nack"} {
		m = bpConflict(t, d, j4, kind, nil)
		require.Contains(t, m["error"], "pending")
	}
	bpConflict(t, d, j4, "defer", map[string]any{"retryAfter": 1})
	require.Empty(t, ackHook.StartedFor(j4))

	// unknown job: 404
	unknown := "job_" + strings.Repeat("0", 26) + "_ackapi"
	for kind, body := range map[string]any{"ack": nil, "nack": nil, "defer": map[string]any{"retryAfter": 1}} {
		r := bpCallback(d, unknown, kind, body)
		require.Equal(t, 404, r.Status, "%s: %s", kind, r.Body)
		require.JSONEq(t, `{"error":"Job not found"}`, string(r.Body))
	}

	// standard-mode queue: 409 whatever the job's state
	s1 := d.Publish("stdapi", map[string]any{"n": 1})
	d.WaitStatus(s1, "completed", 5*time.Second)
	for _, kind := range []string{"ack", "nack", "defer"} {
		r := bpCallback(d, s1, kind, map[string]any{"retryAfter": 1})
		require.Equal(t, 409, r.Status, "%s on a standard queue: %s", kind, r.Body)
	}

	// defer answers 200 accepted (and holds the queue; the probe is acked here)
	j5 := d.Publish("ackapi", map[string]any{"n": 5})
	d.WaitStatus(j5, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, j5, "defer", map[string]any{"retryAfter": 1, "reason": "anthropic 429", "attempt": 1})
	job = d.Job(j5)
	require.Equal(t, "processing", job["status"], "a deferred job that was delivered waits as processing")
	bpConflict(t, d, j5, "ack", nil) // not awaiting an outcome while deferred
	require.Eventually(t, func() bool { return len(ackHook.StartedFor(j5)) == 2 }, 5*time.Second, 5*time.Millisecond, "redelivery after the defer")
	d.WaitStatus(j5, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, j5, "ack", map[string]any{"attempt": 1})
	h = bpHist(t, d.Job(j5))
	require.Len(t, h, 2)
	bpDeferEntry(t, h[0], 1, 200, false, 1, "queue")
	require.Equal(t, "anthropic 429", h[0]["reason"])
	bpAcked(t, h[1], 1, 200, true)
	require.Equal(t, "open", bpQueue(t, d, "ackapi").State)
}

// TestBackpressureAckCallbackBeforeWebhookAnswers: the worker calls back on
// the daemon's API from inside the webhook handler, before returning 200. The
// callback counts; the late 2xx is then ignored.
func TestBackpressureAckCallbackBeforeWebhookAnswers(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var daemonURL atomic.Pointer[string]
	type result struct {
		status int
		body   string
	}
	results := make(chan result, 8)
	call := func(id, kind, body string) {
		resp, err := http.Post(*daemonURL.Load()+"/v1/jobs/"+id+"/"+kind, "application/json", strings.NewReader(body))
		if err != nil {
			results <- result{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		results <- result{status: resp.StatusCode, body: string(b)}
	}
	ackHook := bpNewHook(t, func(c bpCall) Reply {
		call(c.JobID, "ack", `{}`)
		return Reply{Status: 200}
	})
	deferHook := bpNewHook(t, func(c bpCall) Reply {
		if c.JobN == 1 {
			call(c.JobID, "defer", `{"retryAfter":0.2,"reason":"early"}`)
		} else {
			call(c.JobID, "ack", `{}`)
		}
		return Reply{Status: 200}
	})
	d := bpStart(t, 1, rs.Addr,
		bpQ("early-ack", ackHook.URL, "mode: ack", "ackTimeout: 30s"),
		bpQ("early-defer", deferHook.URL, "mode: ack", "ackTimeout: 30s"))[0]
	daemonURL.Store(&d.URL)

	a := d.Publish("early-ack", map[string]any{})
	r := <-results
	require.Equal(t, 200, r.status, r.body)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"accepted":true}`, a), r.body)
	d.WaitStatus(a, "completed", 5*time.Second)
	// The daemon reads the 2xx after the ack and must ignore it.
	require.Eventually(t, func() bool {
		return bpLogHas(d.Log(), "outcome ignored", a)
	}, 5*time.Second, 5*time.Millisecond, "the late 2xx to be recorded as stale")
	job := d.Job(a)
	require.Equal(t, "completed", job["status"])
	require.EqualValues(t, 1, job["attempts"])
	h := bpHist(t, job)
	require.Len(t, h, 1, "history: %v", h)
	require.Equal(t, "success", h[0]["status"])
	require.Equal(t, true, h[0]["acked"])
	require.EqualValues(t, 1, h[0]["attempt"])
	require.Equal(t, bpCounts(0, 0, 0, 0), bpQueue(t, d, "early-ack").Counts)
	require.Len(t, ackHook.StartedFor(a), 1)

	b := d.Publish("early-defer", map[string]any{})
	r = <-results
	require.Equal(t, 200, r.status, r.body)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"accepted":true}`, b), r.body)
	r = <-results // the probe's early ack
	require.Equal(t, 200, r.status, r.body)
	job = d.WaitStatus(b, "completed", 5*time.Second)
	deferHook.WaitIdle(t, 5*time.Second)
	h = bpHist(t, job)
	require.Len(t, h, 2, "history: %v", h)
	ts := bpDeferEntry(t, h[0], 1, nil, false, 0.2, "queue")
	require.Equal(t, "success", h[1]["status"])
	require.Equal(t, true, h[1]["acked"])
	require.Equal(t, true, h[1]["probe"])
	require.EqualValues(t, 1, job["attempts"])
	require.EqualValues(t, 1, job["deferCount"])
	ds := deferHook.Finished()
	bpAttempts(t, ds, []int{1, 1}, []int{0, 1})
	bpNotBefore(t, ds[1].Start, ts.Add(200*time.Millisecond), "redelivery vs the early defer's release")
	require.Equal(t, "open", bpQueue(t, d, "early-defer").State)
}

// TestBackpressureAckTimeout: with no callback, ackTimeout is a failure:
// retried with attempt 2 (ackTimeoutAction retry) or dead / ack_timeout.
func TestBackpressureAckTimeout(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	retryHook := bpNewHook(t, nil)
	deadHook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr,
		bpQ("acktimeout-retry", retryHook.URL, "mode: ack", "ackTimeout: 500ms", "ackTimeoutAction: retry",
			"backoff: {type: fixed, base: 100ms, jitter: false}"),
		bpQ("acktimeout-dead", deadHook.URL, "mode: ack", "ackTimeout: 500ms", "ackTimeoutAction: dead"))[0]
	r := d.Publish("acktimeout-retry", map[string]any{})
	x := d.Publish("acktimeout-dead", map[string]any{})

	require.Eventually(t, func() bool { return len(retryHook.StartedFor(r)) == 2 }, 5*time.Second, 5*time.Millisecond, "the redelivery")
	job := d.WaitStatus(r, "awaiting_ack", 5*time.Second)
	require.EqualValues(t, 1, job["attempts"], "the ack timeout spent one attempt")
	bpAccepted(t, d, r, "ack", map[string]any{"attempt": 2})
	job = d.Job(r)
	require.Equal(t, "completed", job["status"])
	require.EqualValues(t, 2, job["attempts"])
	h := bpHist(t, job)
	require.Len(t, h, 2)
	bpEntry(t, h[0], "failed", 1, 200, false)
	require.Contains(t, h[0]["error"], "ack timeout")
	bpAcked(t, h[1], 2, 200, false)
	retryHook.WaitIdle(t, 5*time.Second)
	ds := retryHook.Finished()
	bpAttempts(t, ds, []int{1, 2}, []int{0, 0})
	require.GreaterOrEqual(t, ds[1].Start.Sub(ds[0].End), 500*time.Millisecond, "redelivered only after ackTimeout")

	job = d.WaitStatus(x, "dead", 5*time.Second)
	require.Equal(t, "ack_timeout", job["deadReason"])
	require.EqualValues(t, 1, job["attempts"])
	h = bpHist(t, job)
	require.Len(t, h, 1)
	bpEntry(t, h[0], "failed", 1, 200, false)
	deadHook.WaitIdle(t, 5*time.Second)
	require.Len(t, deadHook.Finished(), 1)
	died := bpTime(t, job["completedAt"])
	require.GreaterOrEqual(t, died.Sub(deadHook.Finished()[0].End), 490*time.Millisecond, "dead only after ackTimeout")
	require.Equal(t, 1, bpQueue(t, d, "acktimeout-dead").Counts["dead"])
}

// TestBackpressureAckProbeJudgedOnAck: in ack mode the probe's 200 only says
// the worker received it; the queue stays probing (nothing else delivered)
// until the ack, which reopens it.
func TestBackpressureAckProbeJudgedOnAck(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, nil)
	ds := bpStart(t, 2, rs.Addr, bpQ("ackprobe", hook.URL, "mode: ack", "concurrency: 3", "ackTimeout: 30s"))
	j1 := ds[0].Publish("ackprobe", map[string]any{"n": 1})
	ds[0].WaitStatus(j1, "awaiting_ack", 5*time.Second)
	bpAccepted(t, ds[1], j1, "defer", map[string]any{"retryAfter": 1, "reason": "anthropic 429"})
	v := bpQueue(t, ds[0], "ackprobe")
	require.Equal(t, "held", v.State)
	require.Equal(t, "anthropic 429", v.Reason)
	rest := bpPublishBatch(t, ds[0], "ackprobe", 2)

	ds[1].WaitStatus(j1, "awaiting_ack", 5*time.Second)
	probe := hook.StartedFor(j1)
	require.Len(t, probe, 2)
	bpNotBefore(t, probe[1].Start, *v.Until, "the probe vs the hold's release")
	v = bpQueue(t, ds[0], "ackprobe")
	require.Equal(t, "probing", v.State, "the probe's 200 does not reopen an ack-mode queue")
	require.Equal(t, j1, v.ProbeJobID)
	require.Never(t, func() bool {
		return len(hook.Started()) > 2
	}, 400*time.Millisecond, 10*time.Millisecond, "a job delivered while the probe awaits its ack")

	bpAccepted(t, ds[1], j1, "ack", nil)
	require.Equal(t, "open", bpQueue(t, ds[0], "ackprobe").State, "the probe's ack reopens")
	for _, id := range rest {
		ds[0].WaitStatus(id, "awaiting_ack", 5*time.Second)
		bpAccepted(t, ds[0], id, "ack", nil)
	}
	h := bpHist(t, ds[0].Job(j1))
	require.Len(t, h, 2)
	bpDeferEntry(t, h[0], 1, 200, false, 1, "queue")
	bpAcked(t, h[1], 1, 200, true)
	bpAttempts(t, hook.StartedFor(j1), []int{1, 1}, []int{0, 1})
}

// ---- 5. budgets and lifetime ----

// TestBackpressureMaxDefersExhausted: with maxDefers 2 the third defer kills
// the job (defer_cap_exhausted) and still holds the queue; the job behind it
// is the next probe.
func TestBackpressureMaxDefersExhausted(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, func(c bpCall) Reply {
		if c.N <= 2 {
			return Reply{Status: 429, RetryAfter: "0.1"}
		}
		if c.N == 3 {
			return Reply{Status: 429, RetryAfter: "1"}
		}
		return Reply{Status: 200}
	})
	d := bpStart(t, 1, rs.Addr, bpQ("capped", hook.URL, "concurrency: 1", "maxDefers: 2"))[0]
	ids := bpPublishBatch(t, d, "capped", 2)
	job := d.WaitStatus(ids[0], "dead", 5*time.Second)
	v := bpQueue(t, d, "capped")
	require.Equal(t, "held", v.State, "the defer that exhausted the cap still holds the queue")
	require.Equal(t, "defer_cap_exhausted", job["deadReason"])
	require.EqualValues(t, 0, job["attempts"], "defers never spend attempts")
	require.EqualValues(t, 3, job["deferCount"], "deferCount counts the defer that killed it")
	h := bpHist(t, job)
	require.Len(t, h, 3)
	bpDeferEntry(t, h[0], 1, 429, false, 0.1, "queue")
	bpDeferEntry(t, h[1], 1, 429, true, 0.1, "queue")
	ts := bpDeferEntry(t, h[2], 1, 429, true, 1, "queue")
	bpNear(t, ts.Add(time.Second), *v.Until, 2*time.Millisecond, "hold.until after the fatal defer")
	require.Equal(t, ts, bpTime(t, job["completedAt"]))
	require.Equal(t, 1, v.Counts["dead"])
	bpAttempts(t, hook.StartedFor(ids[0]), []int{1, 1, 1}, []int{0, 1, 2})

	job = d.WaitStatus(ids[1], "completed", 5*time.Second)
	hook.WaitIdle(t, 5*time.Second)
	next := hook.FinishedFor(ids[1])
	require.Len(t, next, 1)
	bpNotBefore(t, next[0].Start, *v.Until, "the job behind waits out the hold")
	bpEntry(t, bpHist(t, job)[0], "success", 1, 200, true)
	require.EqualValues(t, 0, job["deferCount"])
}

// TestBackpressureDeferBeyondLifetime: a defer callback whose retryAfter
// reaches past the job's lifetime answers 200 accepted and dead-letters the
// job (retry_after_exceeds_lifetime); a queue-scope defer holds the queue
// anyway, a job-scope one leaves it open.
func TestBackpressureDeferBeyondLifetime(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, nil)
	jobHook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr,
		bpQ("lifetime-queue", hook.URL, "mode: ack", "jobLifetime: 2s", "ackTimeout: 30s"),
		bpQ("lifetime-job", jobHook.URL, "mode: ack", "jobLifetime: 2s", "ackTimeout: 30s"))[0]

	a := d.Publish("lifetime-queue", map[string]any{})
	d.WaitStatus(a, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, a, "defer", map[string]any{"retryAfter": 5, "reason": "anthropic 429"})
	job := d.Job(a)
	require.Equal(t, "dead", job["status"])
	require.Equal(t, "retry_after_exceeds_lifetime", job["deadReason"])
	require.EqualValues(t, 0, job["attempts"])
	h := bpHist(t, job)
	require.Len(t, h, 1)
	ts := bpDeferEntry(t, h[0], 1, 200, false, 5, "queue")
	v := bpQueue(t, d, "lifetime-queue")
	require.Equal(t, "held", v.State, "the downstream's signal holds the queue even though the job died")
	bpNear(t, ts.Add(5*time.Second), *v.Until, 2*time.Millisecond, "hold.until")
	require.Equal(t, "anthropic 429", v.Reason)
	require.Equal(t, bpCounts(0, 0, 0, 1), v.Counts)

	b := d.Publish("lifetime-job", map[string]any{})
	d.WaitStatus(b, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, b, "defer", map[string]any{"retryAfter": 5, "scope": "job"})
	job = d.Job(b)
	require.Equal(t, "dead", job["status"])
	require.Equal(t, "retry_after_exceeds_lifetime", job["deadReason"])
	bpDeferEntry(t, bpHist(t, job)[0], 1, 200, false, 5, "job")
	v = bpQueue(t, d, "lifetime-job")
	require.Equal(t, "open", v.State, "a job-scope defer never holds the queue")
	require.Nil(t, v.Until)
}

// TestBackpressureLifetimeExceededWhileHeld: jobs waiting behind a long hold
// die of lifetime_exceeded when their lifetime ends, while the queue is still
// held; they were never delivered. The reporting job, whose own redelivery
// would fall past its lifetime, dies of retry_after_exceeds_lifetime.
func TestBackpressureLifetimeExceededWhileHeld(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, func(bpCall) Reply { return Reply{Status: 429, RetryAfter: "30"} })
	d := bpStart(t, 1, rs.Addr, bpQ("expiring", hook.URL, "concurrency: 1", "jobLifetime: 1s"))[0]
	ids := bpPublishBatch(t, d, "expiring", 3)

	job := d.WaitStatus(ids[0], "dead", 5*time.Second)
	require.Equal(t, "retry_after_exceeds_lifetime", job["deadReason"])
	ts := bpDeferEntry(t, bpHist(t, job)[0], 1, 429, false, 30, "queue")
	for _, id := range ids[1:] {
		job := d.WaitStatus(id, "dead", 5*time.Second)
		require.Equal(t, "lifetime_exceeded", job["deadReason"], id)
		require.EqualValues(t, 0, job["attempts"])
		require.EqualValues(t, 0, job["deferCount"])
		require.Empty(t, bpHist(t, job), "never delivered")
		expires, died := bpTime(t, job["expiresAt"]), bpTime(t, job["completedAt"])
		bpNotBefore(t, died, expires, "%s died before its lifetime ended", id)
		require.Less(t, died.Sub(expires), 1500*time.Millisecond, "%s died late (the hold lasts 30s)", id)
	}
	v := bpQueue(t, d, "expiring")
	require.Equal(t, "held", v.State, "the queue is still held")
	bpNear(t, ts.Add(30*time.Second), *v.Until, 2*time.Millisecond, "hold.until")
	require.Equal(t, bpCounts(0, 0, 0, 3), v.Counts)
	require.Len(t, hook.Started(), 1, "only the reporting job was ever delivered")
}

// ---- 6. scope job ----

// TestBackpressureScopeJob: a defer with scope "job" holds only that job: the
// queue stays open and keeps delivering; the job comes back after retryAfter
// with the same attempt.
func TestBackpressureScopeJob(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr, bpQ("jobscope", hook.URL, "mode: ack", "concurrency: 2", "ackTimeout: 30s"))[0]
	j1 := d.Publish("jobscope", map[string]any{"n": 1})
	d.WaitStatus(j1, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, j1, "defer", map[string]any{"retryAfter": 0.5, "scope": "job", "reason": "resource not ready"})
	v := bpQueue(t, d, "jobscope")
	require.Equal(t, "open", v.State, "a job-scope defer does not hold the queue")
	require.Nil(t, v.Until)
	require.Equal(t, bpCounts(0, 1, 0, 0), v.Counts)

	others := bpPublishBatch(t, d, "jobscope", 2)
	for _, id := range others {
		d.WaitStatus(id, "awaiting_ack", 5*time.Second)
		bpAccepted(t, d, id, "ack", nil)
	}
	require.Equal(t, "open", bpQueue(t, d, "jobscope").State)
	d.WaitStatus(j1, "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, j1, "ack", map[string]any{"attempt": 1})

	job := d.Job(j1)
	require.EqualValues(t, 1, job["attempts"])
	require.EqualValues(t, 1, job["deferCount"])
	h := bpHist(t, job)
	require.Len(t, h, 2)
	ts := bpDeferEntry(t, h[0], 1, 200, false, 0.5, "job")
	require.Equal(t, "resource not ready", h[0]["reason"])
	bpAcked(t, h[1], 1, 200, false)

	hook.WaitIdle(t, 5*time.Second)
	mine := hook.FinishedFor(j1)
	bpAttempts(t, mine, []int{1, 1}, []int{0, 1})
	bpNotBefore(t, mine[1].Start, ts.Add(500*time.Millisecond), "the deferred job's redelivery")
	require.Less(t, mine[1].Start.Sub(ts), 3*time.Second, "redelivered about retryAfter later")
	for _, id := range others {
		dl := hook.FinishedFor(id)
		require.Len(t, dl, 1)
		require.True(t, dl[0].Start.Before(mine[1].Start),
			"%s was delivered while the other job was deferred", id)
	}
}

// ---- 7. visibility ----

// TestBackpressureQueueVisibility: GET /v1/queues/{q} through a whole cycle:
// open → held (until, reason) → probing (probeJobId) → a failed probe hands
// over to the next job → open; counts follow; pause/resume when implemented,
// and resume ends a hold early into probing.
func TestBackpressureQueueVisibility(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr, bpQ("vis", hook.URL, "mode: ack", "concurrency: 2", "ackTimeout: 30s"))[0]

	v := bpQueue(t, d, "vis")
	require.Equal(t, bpView{State: "open", Counts: bpCounts(0, 0, 0, 0)}, v)

	j1 := d.Publish("vis", map[string]any{"n": 1})
	d.WaitStatus(j1, "awaiting_ack", 5*time.Second)
	v = bpQueue(t, d, "vis")
	require.Equal(t, "open", v.State)
	require.Equal(t, bpCounts(0, 0, 1, 0), v.Counts)

	bpAccepted(t, d, j1, "defer", map[string]any{"retryAfter": 1, "reason": "anthropic 429"})
	ids := bpPublishBatch(t, d, "vis", 2)
	v = bpQueue(t, d, "vis")
	ts := bpTime(t, bpHist(t, d.Job(j1))[0]["timestamp"])
	require.Equal(t, "held", v.State)
	require.NotNil(t, v.Until)
	bpNear(t, ts.Add(time.Second), *v.Until, 2*time.Millisecond, "until")
	require.Empty(t, v.ProbeJobID)
	require.Equal(t, "anthropic 429", v.Reason)
	require.Equal(t, bpCounts(2, 1, 0, 0), v.Counts)
	until := *v.Until

	d.WaitStatus(j1, "awaiting_ack", 5*time.Second)
	v = bpQueue(t, d, "vis")
	require.Equal(t, "probing", v.State)
	require.Equal(t, until, *v.Until, "until stays the release time while probing")
	require.Equal(t, j1, v.ProbeJobID)
	require.Equal(t, "anthropic 429", v.Reason)
	require.Equal(t, bpCounts(2, 0, 1, 0), v.Counts)

	bpAccepted(t, d, j1, "nack", map[string]any{"retryable": false, "reason": "gave up"})
	d.WaitStatus(ids[0], "awaiting_ack", 5*time.Second)
	v = bpQueue(t, d, "vis")
	require.Equal(t, "probing", v.State)
	require.Equal(t, ids[0], v.ProbeJobID, "the next job probes after a failed probe")
	require.Equal(t, bpCounts(1, 0, 1, 1), v.Counts)

	bpAccepted(t, d, ids[0], "ack", nil)
	v = bpQueue(t, d, "vis")
	require.Equal(t, "open", v.State)
	require.Nil(t, v.Until)
	require.Empty(t, v.ProbeJobID)
	require.Empty(t, v.Reason)
	d.WaitStatus(ids[1], "awaiting_ack", 5*time.Second)
	bpAccepted(t, d, ids[1], "ack", nil)
	require.Equal(t, bpCounts(0, 0, 0, 1), bpQueue(t, d, "vis").Counts)

	// Operator pause/resume (api/admin.go). Skipped, with a log line, until
	// the routes exist.
	r := d.Do("POST", "/v1/queues/vis/pause", map[string]any{"reason": "maintenance"})
	if r.Status == 404 || r.Status == 405 {
		t.Logf("POST /v1/queues/{q}/pause answered %d (%s): not implemented yet; skipping the paused-state and resume assertions",
			r.Status, strings.TrimSpace(string(r.Body)))
		return
	}
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "paused", r.JSON(t)["hold"].(map[string]any)["state"])
	v = bpQueue(t, d, "vis")
	require.Equal(t, "paused", v.State)
	require.Equal(t, "maintenance", v.Reason)
	j4 := d.Publish("vis", map[string]any{"n": 4})
	require.Never(t, func() bool { return len(hook.StartedFor(j4)) > 0 }, 300*time.Millisecond, 10*time.Millisecond, "a delivery while paused")
	r = d.Do("POST", "/v1/queues/vis/resume", nil)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "open", bpQueue(t, d, "vis").State)
	d.WaitStatus(j4, "awaiting_ack", 5*time.Second)

	// resume also ends a backpressure hold early, into probing.
	bpAccepted(t, d, j4, "defer", map[string]any{"retryAfter": 30})
	require.Equal(t, "held", bpQueue(t, d, "vis").State)
	r = d.Do("POST", "/v1/queues/vis/resume", nil)
	require.Equal(t, 200, r.Status, string(r.Body))
	d.WaitStatus(j4, "awaiting_ack", 5*time.Second) // redelivered as the probe, long before 30s
	v = bpQueue(t, d, "vis")
	require.Equal(t, "probing", v.State, "resume ends a hold into probing, never straight to open")
	require.Equal(t, j4, v.ProbeJobID)
	bpAccepted(t, d, j4, "ack", nil)
	require.Equal(t, "open", bpQueue(t, d, "vis").State)
}
