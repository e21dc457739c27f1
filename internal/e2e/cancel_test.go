package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blockingHook is a webhook whose first delivery blocks until the request is
// aborted (the daemon closes the connection) or released; it records when
// each request started and ended, and whether, when each later request
// started, the first one's connection was already closed by the daemon.
type blockingHook struct {
	URL string

	mu          sync.Mutex
	starts      []time.Time
	ends        []time.Time
	ids         []string
	aborted     []bool
	firstClosed []bool
	first       net.Conn
	release     chan struct{}
}

// connKey carries a request's connection in its context.
type connKey struct{}

func newBlockingHook(t *testing.T) *blockingHook {
	h := &blockingHook{release: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client closing the
		// connection (and cancel r.Context()).
		_, _ = io.ReadAll(r.Body)
		h.mu.Lock()
		n := len(h.starts)
		if n == 0 {
			h.first, _ = r.Context().Value(connKey{}).(net.Conn)
		}
		h.firstClosed = append(h.firstClosed, n > 0 && (!h.ends[0].IsZero() || peerClosed(h.first)))
		h.starts = append(h.starts, time.Now())
		h.ids = append(h.ids, r.Header.Get("X-Simpleq-Job-Id"))
		h.ends = append(h.ends, time.Time{})
		h.aborted = append(h.aborted, false)
		h.mu.Unlock()
		aborted := false
		if n == 0 {
			select {
			case <-r.Context().Done():
				aborted = true
			case <-h.release:
			case <-time.After(20 * time.Second):
			}
		}
		h.mu.Lock()
		h.ends[n] = time.Now()
		h.aborted[n] = aborted
		h.mu.Unlock()
		if !aborted {
			w.WriteHeader(http.StatusOK)
		}
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Start()
	t.Cleanup(func() {
		close(h.release)
		srv.Close()
	})
	h.URL = srv.URL + "/hook"
	return h
}

func (h *blockingHook) snapshot() (starts, ends []time.Time, ids []string, aborted []bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.starts...), append([]time.Time(nil), h.ends...),
		append([]string(nil), h.ids...), append([]bool(nil), h.aborted...)
}

// closedWhenStarted reports, for request n, whether the first request's
// connection had been closed by the daemon when request n arrived.
func (h *blockingHook) closedWhenStarted(n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.firstClosed[n]
}

// peerClosed tells whether the client has closed c, from the kernel's
// socket rather than from the server's goroutine that reads it: a peek
// that finds the end of the stream (or a reset) means the FIN is already
// there, and a socket the server has closed already was closed by the
// client first (the first request only ends when it is aborted). The daemon closes an aborted request's connection before it
// settles the job, so on loopback the FIN is in the socket before the
// next request's bytes are: this orders the two by cause, not by when
// two goroutines happened to be scheduled.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	if err := raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (err == nil && n == 0) || errors.Is(err, syscall.ECONNRESET)
	}); err != nil {
		return true // the server closed it
	}
	return closed
}

// TestCancelInFlightThroughSecondDaemon is control.md §1's in-flight cancel
// across a fleet: daemon A holds a delivery whose webhook blocks; the cancel
// reaches daemon B. The job is dead / cancelled at once, A aborts the HTTP
// request within a second, a late callback gets 409, the slot (concurrency
// 1) stays taken until the aborted request has ended, and a replay brings
// the job back.
func TestCancelInFlightThroughSecondDaemon(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := newBlockingHook(t)
	cfg := DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("c", hook.URL, "mode: ack", "concurrency: 1",
		"timeout: 30s", "ackTimeout: 1m")}
	a := StartDaemon(t, cfg)
	id := a.Publish("c", map[string]any{"n": 1})

	require.Eventually(t, func() bool { s, _, _, _ := hook.snapshot(); return len(s) == 1 }, 10*time.Second, 5*time.Millisecond)
	b := StartDaemon(t, cfg) // joins after A holds the delivery
	next := b.Publish("c", map[string]any{"n": 2})

	cancelledAt := time.Now()
	r := b.Do(http.MethodPost, "/v1/jobs/"+id+"/cancel", map[string]any{"reason": "operator"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	job := r.JSON(t)
	require.Equal(t, "dead", job["status"])
	require.Equal(t, "cancelled", job["deadReason"])
	require.Equal(t, "cancelled: operator", job["lastError"])

	var firstEnd time.Time
	require.Eventually(t, func() bool {
		_, ends, _, _ := hook.snapshot()
		firstEnd = ends[0]
		return !firstEnd.IsZero()
	}, 3*time.Second, 5*time.Millisecond)
	_, _, _, aborted := hook.snapshot()
	require.True(t, aborted[0], "the webhook saw its request aborted")
	require.Less(t, firstEnd.Sub(cancelledAt), time.Second, "aborted within 1 s of the cancel")
	require.Eventually(t, func() bool { return strings.Contains(a.Log(), "delivery aborted: its job was cancelled") },
		5*time.Second, 10*time.Millisecond, "the daemon holding it aborted it")

	// The slot was kept until the aborted request ended: the next job went
	// out only after it.
	require.Eventually(t, func() bool { s, _, _, _ := hook.snapshot(); return len(s) == 2 }, 5*time.Second, 5*time.Millisecond)
	_, _, ids, _ := hook.snapshot()
	require.Equal(t, next, ids[1])
	require.True(t, hook.closedWhenStarted(1), "concurrency 1: the next delivery started after the aborted one ended")

	// A late callback changes nothing.
	r = a.Do(http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]any{})
	require.Equal(t, http.StatusConflict, r.Status, string(r.Body))
	job = b.Job(id)
	require.Equal(t, "dead", job["status"])
	require.Equal(t, "cancelled", job["deadReason"])
	require.Empty(t, job["history"], "a cancel adds no history entry")
	// Completed or dead: 409; unknown: 404.
	r = a.Do(http.MethodPost, "/v1/jobs/"+id+"/cancel", nil)
	require.Equal(t, http.StatusConflict, r.Status, string(r.Body))
	r = a.Do(http.MethodPost, "/v1/jobs/job_01m8t4fd63x0nnjfbq5mh1n313_c/cancel", nil)
	require.Equal(t, http.StatusNotFound, r.Status, string(r.Body))

	// The queue's counts leave the cancelled delivery out; a replay brings
	// the job back and it is delivered again.
	r = b.Do(http.MethodPost, "/v1/jobs/"+next+"/ack", map[string]any{})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	r = b.Do(http.MethodPost, "/v1/queues/c/dead/replay", map[string]any{"ids": []string{id}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.EqualValues(t, 1, r.JSON(t)["replayed"])
	require.Eventually(t, func() bool { s, _, _, _ := hook.snapshot(); return len(s) == 3 }, 5*time.Second, 5*time.Millisecond)
	r = b.Do(http.MethodPost, "/v1/jobs/"+id+"/ack", map[string]any{})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	b.WaitStatus(id, "completed", 5*time.Second)
}

// Bulk cancel over the API: filters, a 400 without one, and the queue empty
// afterwards; a flow key filter takes only that lane (here none has it).
func TestCancelBulkOverTheAPI(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("bulk", hook.URL)})
	r := d.Do(http.MethodPost, "/v1/queues/bulk/pause", map[string]any{})
	require.Equal(t, http.StatusOK, r.Status)
	jobs := make([]map[string]any, 1000)
	for i := range jobs {
		jobs[i] = map[string]any{"payload": map[string]any{"i": i}}
	}
	for i := 0; i < 3; i++ {
		r = d.Do(http.MethodPost, "/v1/queues/bulk/jobs/batch", map[string]any{"jobs": jobs})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	}
	r = d.Do(http.MethodPost, "/v1/queues/bulk/cancel", map[string]any{})
	require.Equal(t, http.StatusBadRequest, r.Status)
	require.Contains(t, string(r.Body), "Give at least one filter")
	r = d.Do(http.MethodPost, "/v1/queues/bulk/cancel", map[string]any{"flowKey": "tenant-a"})
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"cancelled":0,"done":true}`, string(r.Body))
	r = d.Do(http.MethodPost, "/v1/queues/bulk/cancel", map[string]any{"status": []string{"awaiting_ack"}})
	require.JSONEq(t, `{"cancelled":0,"done":true}`, string(r.Body))
	r = d.Do(http.MethodPost, "/v1/queues/bulk/cancel", map[string]any{"status": []string{"pending"}, "reason": "drain"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	require.JSONEq(t, `{"cancelled":3000,"done":true}`, string(r.Body))
	q := d.Queue("bulk")
	counts := q["counts"].(map[string]any)
	require.EqualValues(t, 0, counts["pending"])
	require.EqualValues(t, 3000, counts["dead"])
	r = d.Do(http.MethodPost, "/v1/queues/bulk/resume", map[string]any{})
	require.Equal(t, http.StatusOK, r.Status)
	r = d.Do(http.MethodGet, "/v1/queues/bulk/dead?limit=1", nil)
	require.Contains(t, string(r.Body), `"lastError":"cancelled: drain","deadReason":"cancelled"`)
	require.Zero(t, hook.Count(), "nothing cancelled is delivered")
}

// The seed's outage story with replaceKey: while the downstream holds the
// queue, 1,000 "latest state" publishes with one replace key collapse into
// one job, delivered once (with the latest state) after the release.
func TestReplaceKeyOutageIsOneDelivery(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var mu sync.Mutex
	var states []string
	held := true
	hook := NewWebhook(t, func(dl Delivery) Reply {
		mu.Lock()
		defer mu.Unlock()
		if held {
			held = false
			// Long enough that 1,000 publishes on a loaded machine end well
			// inside it; the test resumes the queue when they are in.
			return Reply{Status: 429, RetryAfter: "60"}
		}
		states = append(states, string(dl.Body))
		return Reply{Status: 200}
	})
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("state", hook.URL)})
	first := d.Publish("state", map[string]any{"warmup": true})
	require.Eventually(t, func() bool { return hook.Count() == 1 }, 5*time.Second, 5*time.Millisecond)
	// The webhook counts the 429 when it answers; the daemon records the
	// hold a moment later, so wait for the hold itself.
	require.Eventually(t, func() bool {
		return d.Queue("state")["hold"].(map[string]any)["state"] == "held"
	}, 5*time.Second, 5*time.Millisecond)
	var id string
	for i := 0; i < 1000; i++ {
		r := d.Do(http.MethodPost, "/v1/queues/state/jobs", map[string]any{"payload": map[string]any{"state": i}, "replaceKey": "device-7"})
		want := http.StatusOK
		if i == 0 {
			want = http.StatusCreated
		}
		require.Equal(t, want, r.Status, string(r.Body))
		m := r.JSON(t)
		if i == 0 {
			id = m["id"].(string)
			require.NotContains(t, m, "replaced")
		} else {
			require.Equal(t, id, m["id"])
			require.Equal(t, true, m["replaced"])
		}
	}
	require.Equal(t, "held", d.Queue("state")["hold"].(map[string]any)["state"], "still held: 1,000 publishes took well under 60 s")
	// The outage ends: resume cuts the hold short into probing.
	r0 := d.Do(http.MethodPost, "/v1/queues/state/resume", map[string]any{})
	require.Equal(t, http.StatusOK, r0.Status, string(r0.Body))
	d.WaitStatus(id, "completed", 15*time.Second)
	d.WaitStatus(first, "completed", 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, states, 2, "the probe and one delivery for 1,000 publishes")
	require.True(t, strings.Contains(states[1], `"payload":{"state":999}`) || strings.Contains(states[0], `"payload":{"state":999}`),
		fmt.Sprint(states))
	job := d.Job(id)
	require.Equal(t, "device-7", job["replaceKey"])
	// Delivered: the next publish is a new job.
	r := d.Do(http.MethodPost, "/v1/queues/state/jobs", map[string]any{"payload": map[string]any{"state": 1000}, "replaceKey": "device-7"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.NotEqual(t, id, r.JSON(t)["id"])
}
