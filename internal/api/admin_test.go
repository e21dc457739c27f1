package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

func deadJob(id string) *store.Job {
	reason, lastErr, msg := "max_attempts_exhausted", "webhook responded 500", "webhook responded 500"
	code := 500
	done := t0.Add(time.Minute)
	return &store.Job{
		ID: id, Queue: "emails", Status: store.StatusDead, Attempts: 5, MaxAttempts: 5,
		Payload: json.RawMessage(`{"b":1,"a":2}`), ScheduledFor: t0, ExpiresAt: t0.Add(24 * time.Hour),
		LastError: &lastErr, DeadReason: &reason, CreatedAt: t0, CompletedAt: &done,
		History: []store.Attempt{{Attempt: 5, Status: "failed", Error: &msg, WebhookStatusCode: &code, Timestamp: done}},
	}
}

func TestListDeadFirstPageDefaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/v1/queues/emails/dead")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, `{"jobs":[],"nextCursor":null}`+"\n", w.Body.String())
	require.Equal(t, []adminCall{{Method: "ListDead", Queue: "emails"}}, h.backend.adminCalls(),
		"no limit and no cursor reach the backend as 0 and \"\": its defaults")
}

func TestListDeadPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id1, id2 := newID("emails"), newID("emails")
	h.backend.listDeadFn = func(q config.Queue, limit int, cursor string) ([]*store.Job, string, error) {
		require.Equal(t, "emails", q.Name)
		return []*store.Job{deadJob(id2), deadJob(id1)}, "next-page", nil
	}
	// Unknown parameters are ignored; an empty cursor is the first page.
	w := h.get(t, "/v1/queues/emails/dead?limit=2&cursor=opaque_cursor-1&_=123")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, []adminCall{{Method: "ListDead", Queue: "emails", Limit: 2, Cursor: "opaque_cursor-1"}}, h.backend.adminCalls())

	var got struct {
		Jobs       []json.RawMessage `json:"jobs"`
		NextCursor *string           `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Equal(t, "next-page", *got.NextCursor)
	require.Len(t, got.Jobs, 2)
	// Each entry is the full Job of GET /v1/jobs/{id}, payload bytes as stored.
	require.Equal(t, `{"id":"`+id2+`","queue":"emails","status":"dead","attempts":5,"maxAttempts":5,"deferCount":0,`+
		`"idempotencyKey":null,"payload":{"b":1,"a":2},"scheduledFor":"2026-01-02T03:04:05.678Z",`+
		`"expiresAt":"2026-01-03T03:04:05.678Z","lastError":"webhook responded 500","deadReason":"max_attempts_exhausted",`+
		`"history":[{"attempt":5,"status":"failed","error":"webhook responded 500","webhookStatusCode":500,"timestamp":"2026-01-02T03:05:05.678Z"}],`+
		`"createdAt":"2026-01-02T03:04:05.678Z","completedAt":"2026-01-02T03:05:05.678Z","priority":0,"replaceKey":null,"flowKey":null}`,
		string(got.Jobs[0]))
	require.Contains(t, string(got.Jobs[1]), `"id":"`+id1+`"`)

	h.backend.admin = nil
	w = h.get(t, "/v1/queues/emails/dead?cursor=&limit=1000")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, []adminCall{{Method: "ListDead", Queue: "emails", Limit: 1000}}, h.backend.adminCalls())
}

func TestListDeadQueryValidation(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"limit=0":                       "limit",
		"limit=-1":                      "limit",
		"limit=1001":                    "limit",
		"limit=99999999999999999999999": "limit",
		"limit=abc":                     "limit",
		"limit=1.5":                     "limit",
		"limit=%201":                    "limit",
		"limit=1&limit=2":               "limit",
		"cursor=a&cursor=b":             "cursor",
		"cursor=" + strings.Repeat("c", maxCursorLen+1): "cursor",
	}
	for query, field := range cases {
		t.Run(query[:min(len(query), 40)], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			w := h.get(t, "/v1/queues/emails/dead?"+query)
			vb := requireFieldErrors(t, w, field)
			require.NotEmpty(t, vb.Error.FieldErrors[field][0])
			require.Empty(t, h.backend.adminCalls())
		})
	}
	h := newHarness(t)
	vb := requireValidation(t, h.get(t, "/v1/queues/emails/dead?limit=%zz"))
	require.Equal(t, []string{"Invalid query string"}, vb.Error.FormErrors)
	vb = requireFieldErrors(t, h.get(t, "/v1/queues/emails/dead?limit=1001&cursor=x&cursor=y"), "limit", "cursor")
	require.Equal(t, []string{"Number must be less than or equal to 1000"}, vb.Error.FieldErrors["limit"])
	require.Equal(t, []string{"Duplicate field"}, vb.Error.FieldErrors["cursor"])
	require.Empty(t, h.backend.adminCalls())
}

func TestListDeadInvalidCursor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.listDeadFn = func(config.Queue, int, string) ([]*store.Job, string, error) {
		return nil, "", fmt.Errorf("list: %w", &store.InvalidCursorError{Cursor: "x", Reason: "cursor belongs to another queue"})
	}
	vb := requireFieldErrors(t, h.get(t, "/v1/queues/emails/dead?cursor=x"), "cursor")
	require.Equal(t, []string{"Invalid cursor: cursor belongs to another queue"}, vb.Error.FieldErrors["cursor"])
	require.Empty(t, vb.Error.FormErrors)
}

func TestReplayIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a, b := newID("emails"), newID("emails")
	h.backend.replayFn = func(q config.Queue, ids []string) (int, error) { return 1, nil }
	w := h.post(t, "/v1/queues/emails/dead/replay", `{"ids":["`+a+`","`+b+`"]}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, `{"replayed":1}`+"\n", w.Body.String())
	require.Equal(t, []adminCall{{Method: "Replay", Queue: "emails", IDs: []string{a, b}}}, h.backend.adminCalls())
	require.Equal(t, []string{"emails"}, h.waker.calls())

	// null counts as not given, like every optional member.
	h = newHarness(t)
	w = h.post(t, "/v1/queues/emails/dead/replay", `{"ids":null,"all":true}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, []adminCall{{Method: "ReplayAll", Queue: "emails"}}, h.backend.adminCalls())
}

func TestReplayAll(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.replayAllFn = func(config.Queue) (int, error) { return 7, nil }
	w := h.post(t, "/v1/queues/tasks/dead/replay", `{"all":true}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.JSONEq(t, `{"replayed":7}`, w.Body.String())
	require.Equal(t, []adminCall{{Method: "ReplayAll", Queue: "tasks"}}, h.backend.adminCalls())
	require.Equal(t, []string{"tasks"}, h.waker.calls())

	// Nothing moved: nothing to wake.
	h = newHarness(t)
	w = h.post(t, "/v1/queues/tasks/dead/replay", `{"all":true}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.JSONEq(t, `{"replayed":0}`, w.Body.String())
	require.Empty(t, h.waker.calls())
}

func TestReplayValidation(t *testing.T) {
	t.Parallel()
	id := newID("emails")
	many := make([]string, maxReplayIDs+1)
	for i := range many {
		many[i] = `"` + id + `"`
	}
	cases := []struct {
		body   string
		fields []string
	}{
		{`{}`, []string{"ids", "all"}},
		{`{"ids":null,"all":null}`, []string{"ids", "all"}},
		{`{"ids":["` + id + `"],"all":true}`, []string{"ids", "all"}},
		{`{"ids":[]}`, []string{"ids"}},
		{`{"ids":"` + id + `"}`, []string{"ids"}},
		{`{"ids":{}}`, []string{"ids"}},
		{`{"ids":[` + strings.Join(many, ",") + `]}`, []string{"ids"}},
		{`{"ids":[1,"` + id + `","",null]}`, []string{"ids.0", "ids.2", "ids.3"}},
		{`{"all":false}`, []string{"all"}},
		{`{"all":"true"}`, []string{"all"}},
		{`{"all":1}`, []string{"all"}},
		{`{"all":true,"force":true}`, []string{"force"}},
		{`{"all":true,"all":true}`, []string{"all"}},
	}
	for _, c := range cases {
		t.Run(c.body[:min(len(c.body), 40)], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.MaxPayloadBytes = 1 << 20 })
			requireFieldErrors(t, h.post(t, "/v1/queues/emails/dead/replay", c.body), c.fields...)
			require.Empty(t, h.backend.adminCalls())
			require.Empty(t, h.waker.calls())
		})
	}
	h := newHarness(t)
	vb := requireFieldErrors(t, h.post(t, "/v1/queues/emails/dead/replay", `{}`), "ids", "all")
	require.Equal(t, []string{"Specify either ids or all: true"}, vb.Error.FieldErrors["ids"])
	vb = requireFieldErrors(t, h.post(t, "/v1/queues/emails/dead/replay", `{"all":false}`), "all")
	require.Equal(t, []string{"Invalid literal value, expected true"}, vb.Error.FieldErrors["all"])
	vb = requireFieldErrors(t, h.post(t, "/v1/queues/emails/dead/replay", `{"ids":[3]}`), "ids.0")
	require.Equal(t, []string{"Expected string, received number"}, vb.Error.FieldErrors["ids.0"])

	// The body is required and must be JSON.
	vb = requireValidation(t, h.do(t, req{method: http.MethodPost, path: "/v1/queues/emails/dead/replay"}))
	require.Equal(t, []string{"Invalid JSON body"}, vb.Error.FormErrors)
	requireError(t, h.do(t, req{method: http.MethodPost, path: "/v1/queues/emails/dead/replay", body: `{"all":true}`, contentType: str("text/plain")}),
		http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	require.Empty(t, h.backend.adminCalls())
}

func TestPause(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	paused := false
	var reason *string
	h.backend.pauseFn = func(q config.Queue, r string) error {
		paused = true
		if r != "" {
			reason = &r
		}
		return nil
	}
	h.backend.statusFn = func(q config.Queue) (store.QueueStatus, error) {
		st := store.QueueStatus{Name: q.Name, Counts: store.Counts{Pending: 3}, Hold: store.Hold{State: store.HoldOpen}}
		if paused {
			st.Hold = store.Hold{State: store.HoldPaused, Reason: reason}
		}
		return st, nil
	}
	w := h.post(t, "/v1/queues/emails/pause", `{"reason":"deploying the worker"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	want := `{"name":"emails","mode":"standard","webhookUrl":"https://hooks.example.com/emails","concurrency":10,` +
		`"rateLimitMax":100,"rateLimitWindow":1.5,"maxAttempts":5,"maxDefers":20,` +
		`"counts":{"pending":3,"processing":0,"awaitingAck":0,"dead":0,"heldKeys":0},` +
		`"hold":{"state":"paused","until":null,"probeJobId":null,"reason":"deploying the worker"},` +
		`"source":"file","signingSecretHint":"cret","flowKeys":{"concurrency":0,"rateLimitMax":0,"rateLimitWindow":0,"holdScope":"key"}}` + "\n"
	require.Equal(t, want, w.Body.String())
	require.Equal(t, []adminCall{{Method: "Pause", Queue: "emails", Reason: "deploying the worker"}}, h.backend.adminCalls())
	require.Empty(t, h.waker.calls(), "a pause starts nothing")

	// The body is optional: none at all (still content-type:
	// application/json, browser.go), or {}.
	for _, rq := range []req{
		{method: http.MethodPost, path: "/v1/queues/emails/pause"},
		{method: http.MethodPost, path: "/v1/queues/emails/pause", contentType: str("application/json; charset=utf-8")},
		{method: http.MethodPost, path: "/v1/queues/emails/pause", body: `{}`},
		{method: http.MethodPost, path: "/v1/queues/emails/pause", body: `{"reason":null}`},
	} {
		h := newHarness(t)
		w := h.do(t, rq)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		require.Equal(t, []adminCall{{Method: "Pause", Queue: "emails"}}, h.backend.adminCalls())
	}
}

func TestPauseValidation(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"reason":5}`: "reason",
		`{"reason":"` + strings.Repeat("é", maxReasonLen+1) + `"}`: "reason",
		`{"why":"x"}`: "why",
	}
	for body, field := range cases {
		h := newHarness(t)
		requireFieldErrors(t, h.post(t, "/v1/queues/emails/pause", body), field)
		require.Empty(t, h.backend.adminCalls())
	}
	h := newHarness(t)
	w := h.post(t, "/v1/queues/emails/pause", `{"reason":"`+strings.Repeat("é", maxReasonLen)+`"}`)
	require.Equal(t, http.StatusOK, w.Code, "500 characters (not bytes) are allowed")
	vb := requireValidation(t, h.post(t, "/v1/queues/emails/pause", `[]`))
	require.Equal(t, []string{"Request body must be a JSON object"}, vb.Error.FormErrors)
}

func TestResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	probe := newID("tasks")
	until := t0
	h.backend.statusFn = func(q config.Queue) (store.QueueStatus, error) {
		return store.QueueStatus{Name: q.Name, Hold: store.Hold{State: store.HoldProbing, Until: &until, ProbeJobID: &probe}}, nil
	}
	w := h.post(t, "/v1/queues/tasks/resume", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Equal(t, "tasks", got["name"])
	require.Equal(t, map[string]any{"state": "probing", "until": "2026-01-02T03:04:05.678Z", "probeJobId": probe, "reason": nil}, got["hold"])
	require.Equal(t, []adminCall{{Method: "Resume", Queue: "tasks"}}, h.backend.adminCalls())
	require.Equal(t, []string{"tasks"}, h.waker.calls())

	h = newHarness(t)
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/tasks/resume", `{}`).Code)
	requireFieldErrors(t, h.post(t, "/v1/queues/tasks/resume", `{"reason":"x"}`), "reason")
	require.Len(t, h.backend.adminCalls(), 1)
}

func TestAdminUnknownQueueAuthAndMethods(t *testing.T) {
	t.Parallel()
	routes := []req{
		{method: http.MethodGet, path: "/v1/queues/%s/dead"},
		{method: http.MethodPost, path: "/v1/queues/%s/dead/replay", body: `{"all":true}`},
		{method: http.MethodPost, path: "/v1/queues/%s/pause"},
		{method: http.MethodPost, path: "/v1/queues/%s/resume"},
	}
	for _, rt := range routes {
		h := newHarness(t)
		rq := rt
		rq.path = fmt.Sprintf(rt.path, "nope")
		requireError(t, h.do(t, rq), http.StatusNotFound, "Queue 'nope' not found")

		rq.path = fmt.Sprintf(rt.path, "emails")
		rq.auth = str("Bearer wrong")
		requireError(t, h.do(t, rq), http.StatusUnauthorized, "unauthorized")
		rq.auth = str("")
		requireError(t, h.do(t, rq), http.StatusUnauthorized, "unauthorized")
		require.Empty(t, h.backend.adminCalls())
		require.Empty(t, h.waker.calls())
	}
	h := newHarness(t)
	w := h.do(t, req{method: http.MethodDelete, path: "/v1/queues/emails/dead"})
	requireError(t, w, http.StatusMethodNotAllowed, "Method not allowed")
	require.Contains(t, w.Header().Get("Allow"), "GET")
	w = h.get(t, "/v1/queues/emails/pause")
	requireError(t, w, http.StatusMethodNotAllowed, "Method not allowed")
	require.Contains(t, w.Header().Get("Allow"), "POST")
}

func TestAdminBackendErrors(t *testing.T) {
	t.Parallel()
	unavailable := fmt.Errorf("x: %w", store.ErrUnavailable)
	h := newHarness(t)
	h.backend.listDeadFn = func(config.Queue, int, string) ([]*store.Job, string, error) { return nil, "", unavailable }
	h.backend.replayFn = func(config.Queue, []string) (int, error) { return 0, unavailable }
	h.backend.replayAllFn = func(config.Queue) (int, error) { return 0, unavailable }
	h.backend.pauseFn = func(config.Queue, string) error { return unavailable }
	h.backend.resumeFn = func(config.Queue) error { return unavailable }
	for _, rq := range []req{
		{method: http.MethodGet, path: "/v1/queues/emails/dead"},
		{method: http.MethodPost, path: "/v1/queues/emails/dead/replay", body: `{"all":true}`},
		{method: http.MethodPost, path: "/v1/queues/emails/dead/replay", body: `{"ids":["x"]}`},
		{method: http.MethodPost, path: "/v1/queues/emails/pause"},
		{method: http.MethodPost, path: "/v1/queues/emails/resume"},
	} {
		w := h.do(t, rq)
		requireError(t, w, http.StatusServiceUnavailable, "Service unavailable")
		require.Equal(t, "1", w.Header().Get("Retry-After"))
	}
	require.Empty(t, h.waker.calls(), "nothing changed, nothing to wake")

	// ReplayAll moved some batches before Redis failed: those jobs are
	// pending, so the dispatchers are still woken.
	h = newHarness(t)
	h.backend.replayAllFn = func(config.Queue) (int, error) { return 500, unavailable }
	requireError(t, h.post(t, "/v1/queues/emails/dead/replay", `{"all":true}`), http.StatusServiceUnavailable, "Service unavailable")
	require.Equal(t, []string{"emails"}, h.waker.calls())

	// The pause was applied but the queue cannot be read back: 503 (a
	// repeated pause is harmless), never a 200 with made-up state.
	h = newHarness(t)
	h.backend.statusFn = func(config.Queue) (store.QueueStatus, error) { return store.QueueStatus{}, unavailable }
	requireError(t, h.post(t, "/v1/queues/emails/pause", ""), http.StatusServiceUnavailable, "Service unavailable")
	require.Len(t, h.backend.adminCalls(), 1)

	h = newHarness(t)
	h.backend.listDeadFn = func(config.Queue, int, string) ([]*store.Job, string, error) { return nil, "", errors.New("boom") }
	requireError(t, h.get(t, "/v1/queues/emails/dead"), http.StatusInternalServerError, "internal error")
}
