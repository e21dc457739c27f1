package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/events"
	"github.com/simpleq/simpleqd/internal/store"
)

func withEvents(l *events.Log) func(*Options) {
	return func(o *Options) { o.Events = l }
}

type eventsBody struct {
	Queue    string           `json:"queue"`
	Scope    string           `json:"scope"`
	Capacity int              `json:"capacity"`
	Events   []map[string]any `json:"events"`
}

func getEvents(t *testing.T, h *harness, path string) eventsBody {
	t.Helper()
	w := h.get(t, path)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var b eventsBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b))
	return b
}

func TestEventsOfAQueue(t *testing.T) {
	t.Parallel()
	l := events.New(8)
	h := newHarness(t, withEvents(l))
	release := t0.Add(1500 * time.Millisecond)
	id := newID("emails")
	l.Claimed("emails", store.ClaimedJob{ID: id, Attempt: 1})
	l.Settled(store.Settlement{Queue: "emails", JobID: id, Outcome: store.Outcome{ID: id, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 1500 * time.Millisecond},
		Result: store.Settled{Word: "DEFERRED", Detail: strconv.FormatInt(release.UnixMilli(), 10),
			Hold: store.QueueHold{Change: store.HoldStarted, Until: release, At: t0}}})
	l.Record("tasks", events.Event{Kind: events.KindPause})

	b := getEvents(t, h, "/v1/queues/emails/events")
	require.Equal(t, "emails", b.Queue)
	require.Equal(t, "daemon", b.Scope)
	require.Equal(t, 8, b.Capacity)
	require.Len(t, b.Events, 2)
	hold, del := b.Events[0], b.Events[1]
	require.Equal(t, "hold", hold["kind"])
	require.Equal(t, id, hold["jobId"])
	require.Equal(t, 1.5, hold["retryAfter"])
	require.Equal(t, "2026-01-02T03:04:07.178Z", hold["until"])
	require.Equal(t, "delivery", del["kind"])
	require.Equal(t, "deferred", del["result"])
	require.Equal(t, "defer", del["outcome"])
	require.Equal(t, 429.0, del["webhookStatusCode"])
	require.Equal(t, 1.0, del["attempt"])
	require.Nil(t, del["error"])
	require.Nil(t, del["count"])
	require.Greater(t, hold["seq"], del["seq"])
	_, err := time.Parse("2006-01-02T15:04:05.000Z", del["time"].(string))
	require.NoError(t, err)

	require.Len(t, getEvents(t, h, "/v1/queues/emails/events?limit=1&_=cachebuster").Events, 1)
	require.Len(t, getEvents(t, h, "/v1/queues/tasks/events").Events, 1)
}

func TestEventsRecordOperatorActions(t *testing.T) {
	t.Parallel()
	l := events.New(0)
	h := newHarness(t, withEvents(l))
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/tasks/pause", `{"reason":"deploy"}`).Code)
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/tasks/resume", ``).Code)
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/tasks/dead/replay", `{"ids":["a","b"]}`).Code)
	evs := getEvents(t, h, "/v1/queues/tasks/events").Events
	require.Len(t, evs, 3)
	require.Equal(t, "replay", evs[0]["kind"])
	require.Equal(t, 2.0, evs[0]["count"])
	require.Equal(t, "resume", evs[1]["kind"])
	require.Equal(t, "pause", evs[2]["kind"])
	require.Equal(t, "deploy", evs[2]["reason"])

	// A replay that moved nothing, or a failed pause, is not an event.
	h.backend.replayFn = func(_ config.Queue, _ []string) (int, error) { return 0, nil }
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/tasks/dead/replay", `{"ids":["a"]}`).Code)
	h.backend.pauseFn = func(config.Queue, string) error { return store.ErrUnavailable }
	require.Equal(t, http.StatusServiceUnavailable, h.post(t, "/v1/queues/tasks/pause", `{}`).Code)
	require.Len(t, getEvents(t, h, "/v1/queues/tasks/events").Events, 3)
}

func TestEventsValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withEvents(events.New(10)))
	requireError(t, h.get(t, "/v1/queues/nope/events"), http.StatusNotFound, "Queue 'nope' not found")
	for q, want := range map[string]string{
		"limit=0":                    "Number must be greater than or equal to 1",
		"limit=11":                   "Number must be less than or equal to 10",
		"limit=99999999999999999999": "Number must be less than or equal to 10",
		"limit=ten":                  "Expected integer, received 'ten'",
		"limit=1&limit=2":            "Duplicate field",
	} {
		vb := requireFieldErrors(t, h.get(t, "/v1/queues/emails/events?"+q), "limit")
		require.Equal(t, []string{want}, vb.Error.FieldErrors["limit"], q)
	}
	w := h.do(t, req{method: http.MethodGet, path: "/v1/queues/emails/events", auth: str("")})
	requireError(t, w, http.StatusUnauthorized, "unauthorized")
	w = h.post(t, "/v1/queues/emails/events", `{}`)
	requireError(t, w, http.StatusMethodNotAllowed, "Method not allowed")
}

func TestEventsWithoutALog(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	b := getEvents(t, h, "/v1/queues/emails/events")
	require.Empty(t, b.Events)
	require.NotNil(t, b.Events)
	require.Zero(t, b.Capacity)
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/emails/pause", `{}`).Code, "recording into no log is harmless")
}
