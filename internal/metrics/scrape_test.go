package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/metrics"
	"github.com/simpleq/simpleqd/internal/store"
)

// /metrics needs no key, and its gauges cost one Redis inspect script per
// configured queue (review finding 10). These tests count those scripts
// with a fake StatusFunc that, like the daemon's, reads each queue once.

// inspectCounter is a StatusFunc reading queues one by one, counting the
// reads per queue, optionally blocking until release is closed.
type inspectCounter struct {
	queues  []string
	release chan struct{} // nil: never block
	err     error

	mu    sync.Mutex
	reads map[string]int
}

func (f *inspectCounter) status(ctx context.Context) ([]store.QueueStatus, error) {
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]store.QueueStatus, 0, len(f.queues))
	for _, q := range f.queues {
		f.reads[q]++
		out = append(out, store.QueueStatus{Name: q, Counts: store.Counts{Pending: int64(f.reads[q])}})
	}
	return out, f.err
}

func (f *inspectCounter) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.reads))
	for k, v := range f.reads {
		out[k] = v
	}
	return out
}

func newInspectCounter(queues ...string) *inspectCounter {
	return &inspectCounter{queues: queues, release: make(chan struct{}), reads: map[string]int{}}
}

// get scrapes srv and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConcurrentScrapesShareOneRead: N scrapes at once, all waiting while
// the first read is still running, run the inspect script once per queue,
// and scrapes within the cache window run none; without the cache and
// singleflight each scrape ran one per queue.
func TestConcurrentScrapesShareOneRead(t *testing.T) {
	t.Parallel()
	const n = 16
	f := newInspectCounter("emails", "tasks", "reports")
	m := newMetrics(metrics.Options{Status: f.status, StatusCacheTTL: time.Minute, MaxScrapesInFlight: n})
	waiting := make(chan struct{}, 2*n)
	metrics.SetBeforeStatusRead(m, func() { waiting <- struct{}{} })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	codes := make(chan int, n)
	for range n {
		go func() {
			code, body := get(t, srv.URL)
			if !strings.Contains(body, `simpleqd_jobs{queue="reports",status="pending"} 1`) {
				t.Errorf("scrape without the shared read's gauges:\n%s", body)
			}
			codes <- code
		}()
	}
	for range n {
		<-waiting // every scrape found no fresh read and waits on one
	}
	close(f.release)
	for range n {
		require.Equal(t, http.StatusOK, <-codes)
	}
	require.Equal(t, map[string]int{"emails": 1, "tasks": 1, "reports": 1}, f.counts(), "one inspect per queue for %d scrapes", n)

	// Within the cache window, later scrapes read nothing.
	for range n {
		code, body := get(t, srv.URL)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `simpleqd_jobs{queue="emails",status="pending"} 1`)
	}
	require.Empty(t, waiting, "a scrape within the window waited on a read")
	require.Equal(t, map[string]int{"emails": 1, "tasks": 1, "reports": 1}, f.counts())
}

// TestStatusCacheExpires: after the window a scrape reads again, so the
// gauges are never older than StatusCacheTTL plus one read.
func TestStatusCacheExpires(t *testing.T) {
	t.Parallel()
	f := newInspectCounter("emails")
	close(f.release)
	m := newMetrics(metrics.Options{Status: f.status, StatusCacheTTL: 20 * time.Millisecond})
	_, text := scrape(t, m)
	require.Contains(t, text, `simpleqd_jobs{queue="emails",status="pending"} 1`)
	require.Eventually(t, func() bool {
		_, text := scrape(t, m)
		return strings.Contains(text, `simpleqd_jobs{queue="emails",status="pending"} 2`)
	}, 5*time.Second, 5*time.Millisecond)
}

// TestStatusErrorsAreSharedToo: a failing read (Redis down) is shared and
// cached like an answer, so a flood of scrapes does not become a flood of
// attempts on a Redis that is already in trouble; each scrape still says up 0.
func TestStatusErrorsAreSharedToo(t *testing.T) {
	t.Parallel()
	f := newInspectCounter("emails")
	f.err = errors.New("redis down")
	close(f.release)
	m := newMetrics(metrics.Options{Status: f.status, StatusCacheTTL: time.Minute})
	for range 5 {
		resp, text := scrape(t, m)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, text, "simpleqd_queue_status_up 0")
	}
	require.Equal(t, map[string]int{"emails": 1}, f.counts())
}

// TestScrapesPastTheLimitGet503: past MaxScrapesInFlight scrapes at once,
// /metrics answers 503 at once instead of queueing more work.
func TestScrapesPastTheLimitGet503(t *testing.T) {
	t.Parallel()
	const limit = 2
	f := newInspectCounter("emails")
	m := newMetrics(metrics.Options{Status: f.status, MaxScrapesInFlight: limit})
	waiting := make(chan struct{}, limit)
	metrics.SetBeforeStatusRead(m, func() { waiting <- struct{}{} })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	codes := make(chan int, limit)
	for range limit {
		go func() {
			code, _ := get(t, srv.URL)
			codes <- code
		}()
	}
	for range limit {
		<-waiting
	}
	code, body := get(t, srv.URL)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	close(f.release)
	for range limit {
		require.Equal(t, http.StatusOK, <-codes)
	}
	code, _ = get(t, srv.URL)
	require.Equal(t, http.StatusOK, code, "a slot is free again")
}

// TestDefaultScrapeBounds: the zero Options get the cache and the bound.
func TestDefaultScrapeBounds(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Second, metrics.DefaultStatusCacheTTL)
	require.Positive(t, metrics.DefaultMaxScrapesInFlight)
	f := newInspectCounter("emails")
	close(f.release)
	m := newMetrics(metrics.Options{Status: f.status})
	for range 3 {
		scrape(t, m)
	}
	require.Equal(t, map[string]int{"emails": 1}, f.counts(), "three scrapes well within a second read once")
}
