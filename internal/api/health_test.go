package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

func TestHealthz(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/healthz")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"ok"}`, w.Body.String())
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/readyz")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"ok"}`, w.Body.String())

	h = newHarness(t)
	h.backend.pingErr = fmt.Errorf("ping: %w", store.ErrUnavailable)
	w = h.get(t, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.JSONEq(t, `{"status":"unavailable","error":"not ready"}`, w.Body.String())
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	requireError(t, h.get(t, "/v1/nothing/here"), http.StatusNotFound, "Not found")

	w := h.get(t, "/v1/jobs/"+newID("tasks")+"/ack")
	requireError(t, w, http.StatusMethodNotAllowed, "Method not allowed")
	require.Contains(t, w.Header().Get("Allow"), "POST")

	// (DELETE /v1/queues/{queue} is a route: queues over the API.)
	w = h.do(t, req{method: http.MethodDelete, path: "/v1/queues/emails/jobs"})
	requireError(t, w, http.StatusMethodNotAllowed, "Method not allowed")
}

func TestFormatTime(t *testing.T) {
	t.Parallel()
	require.Equal(t, "2026-01-01T00:00:00.000Z", formatTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	require.Equal(t, "2026-01-02T03:04:05.678Z", formatTime(t0))
	// Converted to UTC; sub-millisecond precision truncated.
	loc := time.FixedZone("x", 2*3600)
	require.Equal(t, "2025-12-31T22:00:00.123Z", formatTime(time.Date(2026, 1, 1, 0, 0, 0, 123_999_999, loc)))
	require.Nil(t, formatTimePtr(nil))
}

func TestInternalErrorIsLoggedWithoutDetailsOnTheWire(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	h := newHarness(t, func(o *Options) { o.Logger = zap.New(core) })
	h.backend.statusFn = func(_ config.Queue) (store.QueueStatus, error) {
		return store.QueueStatus{}, errors.New("boom secret detail")
	}
	w := h.get(t, "/v1/queues/emails")
	requireError(t, w, http.StatusInternalServerError, "internal error")
	require.NotContains(t, w.Body.String(), "boom")
	require.Equal(t, 1, logs.FilterMessage("internal error serving request").Len())
}

func TestRequestLogNeverContainsPayloadOrKey(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	h := newHarness(t, func(o *Options) { o.Logger = zap.New(core) })
	w := h.post(t, "/v1/queues/emails/jobs", `{"payload":{"secretField":"topsecret"}}`)
	require.Equal(t, http.StatusCreated, w.Code)
	entries := logs.All()
	require.NotEmpty(t, entries)
	for _, e := range entries {
		s := fmt.Sprint(e.Message, e.ContextMap())
		require.False(t, strings.Contains(s, "topsecret") || strings.Contains(s, testKey), s)
	}
	require.Equal(t, 1, logs.FilterMessage("http request").Len())
}

func TestPanicBecomesJSON500(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.statusFn = func(config.Queue) (store.QueueStatus, error) { panic("kaboom") }
	requireError(t, h.get(t, "/v1/queues/emails"), http.StatusInternalServerError, "internal error")
}

// Past MaxConcurrentRequests the API sheds load with 429 and Retry-After,
// while health checks still answer.
func TestShedLoadAnswers429(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	fb := &fakeBackend{}
	fb.getJobFn = func(q config.Queue, id string) (*store.Job, error) {
		entered <- struct{}{}
		<-release
		return nil, store.ErrNotFound
	}
	srv := New(Options{Backend: fb, Queues: func() map[string]config.Queue {
		return map[string]config.Queue{"emails": {Name: "emails"}}
	}, MaxConcurrentRequests: 1})
	h := srv.Handler()
	done := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, loopbackRequest("GET", "/v1/jobs/"+newID("emails")))
		done <- w.Code
	}()
	<-entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, loopbackRequest("GET", "/v1/jobs/"+newID("emails")))
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Contains(t, w.Body.String(), `"error"`)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	require.Equal(t, http.StatusOK, w.Code, "health checks are never shed")
	close(release)
	require.Equal(t, http.StatusNotFound, <-done)
}

// loopbackRequest is a request to a keyless daemon from this machine (see
// keylessGuard): httptest's default Host, example.com, would be refused.
func loopbackRequest(method, path string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	r.Host = "127.0.0.1:8080"
	return r
}
