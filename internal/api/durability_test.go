package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Under redis.durability: replicated a write no replica confirmed in time is
// a 503 with Retry-After on every write endpoint, with a body that says so
// (not the plain "Service unavailable" of a Redis that is down).
func TestNotReplicatedIs503(t *testing.T) {
	t.Parallel()
	short := fmt.Errorf("%w: script publish on queue emails: 0 of 1 replicas within 1s", store.ErrNotReplicated)
	h := newHarness(t)
	h.backend.publishFn = func(config.Queue, []store.NewJob) ([]store.Published, error) { return nil, short }
	h.backend.callbackFn = func(config.Queue, store.Callback) error { return short }
	h.backend.replayFn = func(config.Queue, []string) (int, error) { return 0, short }
	h.backend.replayAllFn = func(config.Queue) (int, error) { return 0, short }
	h.backend.pauseFn = func(config.Queue, string) error { return short }
	h.backend.resumeFn = func(config.Queue) error { return short }
	for _, rq := range []req{
		{method: http.MethodPost, path: "/v1/queues/emails/jobs", body: `{"payload":{},"idempotencyKey":"k"}`},
		{method: http.MethodPost, path: "/v1/queues/emails/jobs/batch", body: `{"jobs":[{"payload":{}}]}`},
		{method: http.MethodPost, path: "/v1/jobs/" + newID("tasks") + "/ack"},
		{method: http.MethodPost, path: "/v1/jobs/" + newID("tasks") + "/nack", body: `{}`},
		{method: http.MethodPost, path: "/v1/jobs/" + newID("tasks") + "/defer", body: `{"retryAfter":1}`},
		{method: http.MethodPost, path: "/v1/queues/emails/dead/replay", body: `{"ids":["x"]}`},
		{method: http.MethodPost, path: "/v1/queues/emails/dead/replay", body: `{"all":true}`},
		{method: http.MethodPost, path: "/v1/queues/emails/pause"},
		{method: http.MethodPost, path: "/v1/queues/emails/resume"},
	} {
		w := h.do(t, rq)
		requireError(t, w, http.StatusServiceUnavailable, "Service unavailable: no Redis replica confirmed the write in time")
		require.Equal(t, "1", w.Header().Get("Retry-After"), rq.path)
	}
	// The master stored the publishes and the resume: the dispatchers are
	// woken for them, since a retry (an idempotent repeat) wakes nobody.
	require.Equal(t, []string{"emails", "emails", "emails"}, h.waker.calls())

	// A Redis that is down keeps its plain message and wakes nobody.
	h = newHarness(t)
	h.backend.publishFn = func(config.Queue, []store.NewJob) ([]store.Published, error) {
		return nil, fmt.Errorf("dial: %w", store.ErrUnavailable)
	}
	requireError(t, h.post(t, "/v1/queues/emails/jobs", `{"payload":{}}`), http.StatusServiceUnavailable, "Service unavailable")
	require.Empty(t, h.waker.calls())
}
