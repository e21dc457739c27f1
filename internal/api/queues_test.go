package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

func TestGetQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	until := t0.Add(30 * time.Second)
	probe := newID("emails")
	reason := "webhook answered 429"
	h.backend.statusFn = func(q config.Queue) (store.QueueStatus, error) {
		require.Equal(t, "emails", q.Name)
		return store.QueueStatus{
			Name:   "emails",
			Counts: store.Counts{Pending: 4, Processing: 3, AwaitingAck: 2, Dead: 1},
			Hold:   store.Hold{State: store.HoldHeld, Until: &until, ProbeJobID: &probe, Reason: &reason},
		}, nil
	}
	w := h.get(t, "/v1/queues/emails")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	want := `{"name":"emails","mode":"standard","webhookUrl":"https://hooks.example.com/emails","concurrency":10,` +
		`"rateLimitMax":100,"rateLimitWindow":1.5,"maxAttempts":5,"maxDefers":20,` +
		`"counts":{"pending":4,"processing":3,"awaitingAck":2,"dead":1,"heldKeys":0},` +
		`"hold":{"state":"held","until":"2026-01-02T03:04:35.678Z","probeJobId":"` + probe + `","reason":"webhook answered 429"},` +
		`"source":"file","signingSecretHint":"cret","flowKeys":{"concurrency":0,"rateLimitMax":0,"rateLimitWindow":0,"holdScope":"key"}}` + "\n"
	require.Equal(t, want, w.Body.String())
	require.NotContains(t, w.Body.String(), "whsec")
}

func TestListQueues(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/v1/queues")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var got struct {
		Queues []map[string]any `json:"queues"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Len(t, got.Queues, 2)
	require.Equal(t, "emails", got.Queues[0]["name"])
	require.Equal(t, "tasks", got.Queues[1]["name"])
	require.Equal(t, "ack", got.Queues[1]["mode"])
	require.Equal(t, float64(60), got.Queues[1]["rateLimitWindow"])
	require.Equal(t, "https://user:xxxxx@hooks.example.com/tasks", got.Queues[1]["webhookUrl"], "password redacted")
	require.Equal(t, map[string]any{"state": "open", "until": nil, "probeJobId": nil, "reason": nil}, got.Queues[1]["hold"])
	require.Equal(t, map[string]any{"pending": 0.0, "processing": 0.0, "awaitingAck": 0.0, "dead": 0.0, "heldKeys": 0.0}, got.Queues[1]["counts"])
}

func TestListQueuesEmptyAndReload(t *testing.T) {
	t.Parallel()
	current := map[string]config.Queue{}
	h := newHarness(t, func(o *Options) { o.Queues = func() map[string]config.Queue { return current } })
	w := h.get(t, "/v1/queues")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"queues":[]}`, w.Body.String())
	requireError(t, h.get(t, "/v1/queues/emails"), http.StatusNotFound, "Queue 'emails' not found")

	current = testQueues()
	require.Equal(t, http.StatusOK, h.get(t, "/v1/queues/emails").Code, "a reload is seen by the next request")

	h = newHarness(t, func(o *Options) { o.Queues = nil })
	require.JSONEq(t, `{"queues":[]}`, h.get(t, "/v1/queues").Body.String())
}

func TestGetQueueNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	requireError(t, h.get(t, "/v1/queues/nope"), http.StatusNotFound, "Queue 'nope' not found")
	requireError(t, h.get(t, "/v1/queues/it's%20odd"), http.StatusNotFound, "Queue 'it's odd' not found")
}

func TestQueueBackendErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.statusFn = func(config.Queue) (store.QueueStatus, error) {
		return store.QueueStatus{}, fmt.Errorf("x: %w", store.ErrUnavailable)
	}
	for _, p := range []string{"/v1/queues/emails", "/v1/queues"} {
		w := h.get(t, p)
		requireError(t, w, http.StatusServiceUnavailable, "Service unavailable")
		require.Equal(t, "1", w.Header().Get("Retry-After"))
	}
	h = newHarness(t)
	h.backend.statusFn = func(config.Queue) (store.QueueStatus, error) { return store.QueueStatus{}, errors.New("bad") }
	requireError(t, h.get(t, "/v1/queues"), http.StatusInternalServerError, "internal error")
}
