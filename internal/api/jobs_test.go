package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

func TestPublishCreatesJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.post(t, "/v1/queues/emails/jobs", `{"payload":{"to":"a@b.com"},"idempotencyKey":"k-1","delay":1.5}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))

	var got map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Len(t, got, 3)
	q, ok := QueueOfJob(got["id"].(string))
	require.True(t, ok)
	require.Equal(t, "emails", q)
	require.Equal(t, "pending", got["status"])
	require.Equal(t, "2026-01-02T03:04:05.678Z", got["createdAt"])
	// The hand-formatted answer is exactly what encoding the struct gives.
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(publishedJSON{ID: got["id"].(string), Status: "pending", CreatedAt: "2026-01-02T03:04:05.678Z"}))
	require.Equal(t, want.String(), w.Body.String())
	require.Equal(t, strconv.Itoa(want.Len()), w.Header().Get("Content-Length"))
	require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))

	calls := h.backend.publishCalls()
	require.Len(t, calls, 1)
	require.Len(t, calls[0], 1)
	require.Equal(t, `{"to":"a@b.com"}`, string(calls[0][0].Payload))
	require.Equal(t, "k-1", calls[0][0].IdempotencyKey)
	require.Equal(t, 1500*time.Millisecond, calls[0][0].Delay)
	require.Equal(t, []string{"emails"}, h.waker.calls())
}

func TestPublishPayloadBytesPreserved(t *testing.T) {
	t.Parallel()
	payloads := []string{
		`{"b":1,"a":12345678901234567890}`,
		`{ "z" : [ 1.0000000000000000001 , 2e400 ] ,"a":"\u00e9<>&" , "n":{"y":null,"x":true} }`,
		`{}`,
		"{\n\t\"key\": \"value with unicode é 😀\"\n}",
	}
	for i, p := range payloads {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			w := h.post(t, "/v1/queues/emails/jobs", `{ "delay" : 0, "payload" :  `+p+`  }`)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			calls := h.backend.publishCalls()
			require.Len(t, calls, 1)
			require.Equal(t, p, string(calls[0][0].Payload))
		})
	}
}

func TestPublishIdempotentRepeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	existing := newID("emails")
	h.backend.publishFn = func(_ config.Queue, jobs []store.NewJob) ([]store.Published, error) {
		return []store.Published{{ID: existing, Status: store.StatusCompleted, CreatedAt: t0, Duplicate: true}}, nil
	}
	w := h.post(t, "/v1/queues/emails/jobs", `{"payload":{},"idempotencyKey":"k"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"status":"completed","createdAt":"2026-01-02T03:04:05.678Z"}`, existing), w.Body.String())
	require.Empty(t, h.waker.calls(), "a duplicate stores nothing, so nothing to wake")
}

func TestPublishUnknownQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	requireError(t, h.post(t, "/v1/queues/nope/jobs", `{"payload":{}}`), http.StatusNotFound, "Queue 'nope' not found")
	// Queue names are case-sensitive.
	requireError(t, h.post(t, "/v1/queues/Emails/jobs", `{"payload":{}}`), http.StatusNotFound, "Queue 'Emails' not found")
	requireError(t, h.post(t, "/v1/queues/nope/jobs/batch", `{"jobs":[]}`), http.StatusNotFound, "Queue 'nope' not found")
	require.Empty(t, h.backend.publishCalls())
}

func TestPublishContentType(t *testing.T) {
	t.Parallel()
	cases := map[string]int{
		"application/json":                  http.StatusCreated,
		"application/json; charset=utf-8":   http.StatusCreated,
		"Application/JSON; charset=UTF-8":   http.StatusCreated,
		"":                                  http.StatusUnsupportedMediaType,
		"text/plain":                        http.StatusUnsupportedMediaType,
		"application/x-www-form-urlencoded": http.StatusUnsupportedMediaType,
		"application/json; charset=latin1":  http.StatusUnsupportedMediaType,
		"application/jsonx":                 http.StatusUnsupportedMediaType,
		"application/json;;;":               http.StatusUnsupportedMediaType,
	}
	for ct, want := range cases {
		t.Run(ct, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			w := h.do(t, req{method: http.MethodPost, path: "/v1/queues/emails/jobs", body: `{"payload":{}}`, contentType: str(ct)})
			if want == http.StatusUnsupportedMediaType {
				requireError(t, w, want, "Content-Type must be application/json")
				require.Empty(t, h.backend.publishCalls())
				return
			}
			require.Equal(t, want, w.Code, w.Body.String())
		})
	}
}

func TestPublishTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // MaxPayloadBytes 4096
	big := `{"payload":{"x":"` + strings.Repeat("a", 4096) + `"}}`
	requireError(t, h.post(t, "/v1/queues/emails/jobs", big), http.StatusRequestEntityTooLarge, "Payload too large")

	require.Empty(t, h.backend.publishCalls())

	// Exactly at the limit is fine.
	fits := `{"payload":{"x":"`
	fits += strings.Repeat("a", 4096-len(fits)-len(`"}}`)) + `"}}`
	require.Len(t, fits, 4096)
	require.Equal(t, http.StatusCreated, h.post(t, "/v1/queues/emails/jobs", fits).Code)
}

func TestPublishTooLargeChunked(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	big := `{"payload":{"x":"` + strings.Repeat("a", 5000) + `"}}`
	r := newChunkedRequest(http.MethodPost, "/v1/queues/emails/jobs", big)
	w := serve(h, r)
	requireError(t, w, http.StatusRequestEntityTooLarge, "Payload too large")
	require.Empty(t, h.backend.publishCalls())
}

func TestPublishDefaultLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxPayloadBytes = 0 })
	require.Equal(t, DefaultMaxPayloadBytes, h.srv.maxBytes)
	body := `{"payload":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`
	requireError(t, h.post(t, "/v1/queues/emails/jobs", body), http.StatusRequestEntityTooLarge, "Payload too large")
}

func TestPublishMalformedBody(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"payload":`:                    "Invalid JSON body",
		`{"payload":{}} x`:               "Invalid JSON body",
		`{"payload":{}}{}`:               "Invalid JSON body",
		``:                               "Invalid JSON body",
		`{'payload':{}}`:                 "Invalid JSON body",
		"{\"payload\":{\"a\":\"\xff\"}}": "Invalid JSON body",
		`[{"payload":{}}]`:               "Request body must be a JSON object",
		`"payload"`:                      "Request body must be a JSON object",
		`null`:                           "Request body must be a JSON object",
		`42`:                             "Request body must be a JSON object",
	}
	for body, msg := range cases {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			vb := requireValidation(t, h.post(t, "/v1/queues/emails/jobs", body))
			require.Equal(t, []string{msg}, vb.Error.FormErrors)
			require.Empty(t, vb.Error.FieldErrors)
			require.Empty(t, h.backend.publishCalls())
		})
	}
}

func TestPublishValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		body  string
		field string
		msg   string
	}{
		{"payload missing", `{}`, "payload", "Required"},
		{"payload null", `{"payload":null}`, "payload", "Expected object, received null"},
		{"payload array", `{"payload":[1]}`, "payload", "Expected object, received array"},
		{"payload string", `{"payload":"{}"}`, "payload", "Expected object, received string"},
		{"payload number", `{"payload":1}`, "payload", "Expected object, received number"},
		{"key number", `{"payload":{},"idempotencyKey":5}`, "idempotencyKey", "Expected string, received number"},
		{"key empty", `{"payload":{},"idempotencyKey":""}`, "idempotencyKey", "String must contain at least 1 character(s)"},
		{"key too long", `{"payload":{},"idempotencyKey":"` + strings.Repeat("k", 256) + `"}`, "idempotencyKey", "String must contain at most 255 character(s)"},
		{"delay string", `{"payload":{},"delay":"5"}`, "delay", "Expected number, received string"},
		{"delay bool", `{"payload":{},"delay":true}`, "delay", "Expected number, received boolean"},
		{"delay negative", `{"payload":{},"delay":-1}`, "delay", "Number must be greater than or equal to 0"},
		{"delay tiny negative", `{"payload":{},"delay":-0.001}`, "delay", "Number must be greater than or equal to 0"},
		{"delay over a day", `{"payload":{},"delay":86400.001}`, "delay", "Number must be less than or equal to 86400"},
		{"delay huge", `{"payload":{},"delay":1e400}`, "delay", "Number must be less than or equal to 86400"},
		{"delay huge negative", `{"payload":{},"delay":-1e400}`, "delay", "Number must be greater than or equal to 0"},
		{"unknown field", `{"payload":{},"colour":1}`, "colour", "Unrecognized field"},
		{"priority above 9", `{"payload":{},"priority":10}`, "priority", "Number must be less than or equal to 9"},
		{"priority negative", `{"payload":{},"priority":-1}`, "priority", "Number must be greater than or equal to 0"},
		{"priority fractional", `{"payload":{},"priority":1.5}`, "priority", "Expected integer, received float"},
		{"priority a string", `{"payload":{},"priority":"9"}`, "priority", "Expected integer, received string"},
		{"field name is case-sensitive", `{"payload":{},"Delay":1}`, "Delay", "Unrecognized field"},
		{"duplicate field", `{"payload":{},"payload":{"a":1}}`, "payload", "Duplicate field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			vb := requireFieldErrors(t, h.post(t, "/v1/queues/emails/jobs", tc.body), tc.field)
			require.Equal(t, []string{tc.msg}, vb.Error.FieldErrors[tc.field])
			require.Empty(t, vb.Error.FormErrors)
			require.Empty(t, h.backend.publishCalls())
			require.Empty(t, h.waker.calls())
		})
	}
}

func TestPublishValidationReportsAllFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.post(t, "/v1/queues/emails/jobs", `{"idempotencyKey":1,"delay":"x","extra":0}`)
	requireFieldErrors(t, w, "payload", "idempotencyKey", "delay", "extra")
}

func TestPublishAcceptedBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body  string
		delay time.Duration
		key   string
	}{
		{`{"payload":{},"delay":0}`, 0, ""},
		{`{"payload":{},"delay":86400}`, 86400 * time.Second, ""},
		{`{"payload":{},"delay":0.25}`, 250 * time.Millisecond, ""},
		{`{"payload":{},"delay":1e2}`, 100 * time.Second, ""},
		{`{"payload":{},"delay":null,"idempotencyKey":null}`, 0, ""},
		{`{"payload":{},"idempotencyKey":"` + strings.Repeat("é", 255) + `"}`, 0, strings.Repeat("é", 255)},
		{`{"payload":{},"idempotencyKey":"a\u0062c"}`, 0, "abc"},
		{`{"p\u0061yload":{}}`, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.body, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.MaxPayloadBytes = 1 << 20 })
			w := h.post(t, "/v1/queues/emails/jobs", tc.body)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			calls := h.backend.publishCalls()
			require.Equal(t, tc.delay, calls[0][0].Delay)
			require.Equal(t, tc.key, calls[0][0].IdempotencyKey)
		})
	}
}

func TestPublishBackendErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.publishFn = func(config.Queue, []store.NewJob) ([]store.Published, error) {
		return nil, fmt.Errorf("publish: dial tcp: %w", store.ErrUnavailable)
	}
	w := h.post(t, "/v1/queues/emails/jobs", `{"payload":{}}`)
	requireError(t, w, http.StatusServiceUnavailable, "Service unavailable")
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Empty(t, h.waker.calls())

	h = newHarness(t)
	h.backend.publishFn = func(config.Queue, []store.NewJob) ([]store.Published, error) {
		return nil, errors.New("script error: something odd")
	}
	w = h.post(t, "/v1/queues/emails/jobs", `{"payload":{}}`)
	requireError(t, w, http.StatusInternalServerError, "internal error")
	require.Empty(t, w.Header().Get("Retry-After"))
}

func TestPublishBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dup := newID("emails")
	h.backend.publishFn = func(q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
		var g store.IDGen
		out := make([]store.Published, len(jobs))
		for i, j := range jobs {
			out[i] = store.Published{ID: g.New(q.Name), Status: store.StatusPending, CreatedAt: t0}
			if j.IdempotencyKey == "seen" {
				out[i] = store.Published{ID: dup, Status: store.StatusCompleted, CreatedAt: t0.Add(-time.Hour), Duplicate: true}
			}
		}
		return out, nil
	}
	body := `{"jobs":[{"payload":{"b":1,"a":12345678901234567890}},{"payload":{},"idempotencyKey":"seen"},{"payload":{"x":[]},"delay":2.5}]}`
	w := h.post(t, "/v1/queues/emails/jobs/batch", body)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())

	var got struct {
		Jobs []map[string]any `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Len(t, got.Jobs, 3)
	for i, j := range got.Jobs {
		require.Len(t, j, 4, "item %d: %v", i, j)
	}
	require.Equal(t, false, got.Jobs[0]["duplicate"])
	require.Equal(t, "pending", got.Jobs[0]["status"])
	require.Equal(t, "2026-01-02T03:04:05.678Z", got.Jobs[0]["createdAt"])
	require.Equal(t, dup, got.Jobs[1]["id"])
	require.Equal(t, true, got.Jobs[1]["duplicate"])
	require.Equal(t, "completed", got.Jobs[1]["status"])
	require.Equal(t, "2026-01-02T02:04:05.678Z", got.Jobs[1]["createdAt"])

	calls := h.backend.publishCalls()
	require.Len(t, calls, 1, "one Backend call for the whole batch")
	require.Len(t, calls[0], 3)
	require.Equal(t, `{"b":1,"a":12345678901234567890}`, string(calls[0][0].Payload))
	require.Equal(t, "seen", calls[0][1].IdempotencyKey)
	require.Equal(t, 2500*time.Millisecond, calls[0][2].Delay)
	require.Equal(t, []string{"emails"}, h.waker.calls(), "wake once")
}

func TestPublishBatchAllDuplicatesDoesNotWake(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.publishFn = func(_ config.Queue, jobs []store.NewJob) ([]store.Published, error) {
		out := make([]store.Published, len(jobs))
		for i := range jobs {
			out[i] = store.Published{ID: newID("emails"), Status: store.StatusPending, CreatedAt: t0, Duplicate: true}
		}
		return out, nil
	}
	w := h.post(t, "/v1/queues/emails/jobs/batch", `{"jobs":[{"payload":{},"idempotencyKey":"a"}]}`)
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, h.waker.calls())
}

func TestPublishBatchValidation(t *testing.T) {
	t.Parallel()
	many := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"payload":{}}`
		}
		return `{"jobs":[` + strings.Join(items, ",") + `]}`
	}
	cases := []struct {
		name   string
		body   string
		errors map[string][]string
	}{
		{"jobs missing", `{}`, map[string][]string{"jobs": {"Required"}}},
		{"jobs null", `{"jobs":null}`, map[string][]string{"jobs": {"Expected array, received null"}}},
		{"jobs object", `{"jobs":{"payload":{}}}`, map[string][]string{"jobs": {"Expected array, received object"}}},
		{"jobs empty", `{"jobs":[]}`, map[string][]string{"jobs": {"Array must contain at least 1 element(s)"}}},
		{"too many", many(1001), map[string][]string{"jobs": {"Array must contain at most 1000 element(s)"}}},
		{"unknown top-level", `{"jobs":[{"payload":{}}],"x":1}`, map[string][]string{"x": {"Unrecognized field"}}},
		{"item not object", `{"jobs":[{"payload":{}},"nope"]}`, map[string][]string{"jobs.1": {"Expected object, received string"}}},
		{"item fields", `{"jobs":[{"payload":{}},{"payload":[],"delay":-1},{"idempotencyKey":"","extra":true}]}`, map[string][]string{
			"jobs.1.payload":        {"Expected object, received array"},
			"jobs.1.delay":          {"Number must be greater than or equal to 0"},
			"jobs.2.payload":        {"Required"},
			"jobs.2.idempotencyKey": {"String must contain at least 1 character(s)"},
			"jobs.2.extra":          {"Unrecognized field"},
		}},
		{"item duplicate field", `{"jobs":[{"payload":{},"delay":1,"delay":2}]}`, map[string][]string{"jobs.0.delay": {"Duplicate field"}}},
		{"item delay too big", `{"jobs":[{"payload":{},"delay":86401}]}`, map[string][]string{"jobs.0.delay": {"Number must be less than or equal to 86400"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.MaxPayloadBytes = 1 << 20 })
			vb := requireValidation(t, h.post(t, "/v1/queues/emails/jobs/batch", tc.body))
			require.Equal(t, tc.errors, vb.Error.FieldErrors)
			require.Empty(t, h.backend.publishCalls(), "an invalid item rejects the whole batch")
			require.Empty(t, h.waker.calls())
		})
	}
}

func TestPublishBatchMaxItemsAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxPayloadBytes = 1 << 20 })
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"payload":{"i":%d}}`, i)
	}
	w := h.post(t, "/v1/queues/emails/jobs/batch", `{"jobs":[`+strings.Join(items, ",")+`]}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	calls := h.backend.publishCalls()
	require.Len(t, calls[0], 1000)
	require.Equal(t, `{"i":999}`, string(calls[0][999].Payload))
}

func TestPublishBatchBackendErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.publishFn = func(config.Queue, []store.NewJob) ([]store.Published, error) {
		return nil, store.ErrUnavailable
	}
	w := h.post(t, "/v1/queues/emails/jobs/batch", `{"jobs":[{"payload":{}}]}`)
	requireError(t, w, http.StatusServiceUnavailable, "Service unavailable")
	require.Equal(t, "1", w.Header().Get("Retry-After"))

	h = newHarness(t)
	h.backend.publishFn = func(config.Queue, []store.NewJob) ([]store.Published, error) {
		return []store.Published{}, nil // wrong count: a backend bug, not the client's
	}
	requireError(t, h.post(t, "/v1/queues/emails/jobs/batch", `{"jobs":[{"payload":{}}]}`), http.StatusInternalServerError, "internal error")
}

func TestGetJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID("tasks")
	key := "order-1"
	lastErr := "HTTP 500"
	code500, code503 := 500, 503
	retryAfter := 30.5
	reason := "rate limited"
	probeErr := "HTTP 502"
	completed := t0.Add(3 * time.Minute)
	h.backend.getJobFn = func(q config.Queue, gotID string) (*store.Job, error) {
		require.Equal(t, "tasks", q.Name)
		require.Equal(t, id, gotID)
		return &store.Job{
			ID: id, Queue: "tasks", Status: store.StatusCompleted,
			Attempts: 3, MaxAttempts: 3, DeferCount: 1,
			IdempotencyKey: &key,
			Payload:        json.RawMessage(`{"b":1,"a":12345678901234567890,"h":"<&>"}`),
			ScheduledFor:   t0.Add(time.Minute),
			ExpiresAt:      t0.Add(24 * time.Hour),
			LastError:      &lastErr,
			History: []store.Attempt{
				{Attempt: 1, Status: "failed", Error: &lastErr, WebhookStatusCode: &code500, Timestamp: t0.Add(time.Second)},
				{Attempt: 2, Status: "deferred", WebhookStatusCode: &code503, Timestamp: t0.Add(2 * time.Second), RetryAfter: &retryAfter, Scope: "queue", Reason: &reason},
				{Attempt: 3, Status: "failed", Error: &probeErr, Timestamp: t0.Add(3 * time.Second), Probe: true},
				{Attempt: 3, Status: "success", Acked: true, Timestamp: t0.Add(4 * time.Second)},
			},
			CreatedAt:   t0,
			CompletedAt: &completed,
		}, nil
	}
	w := h.get(t, "/v1/jobs/"+id)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	want := `{"id":"` + id + `","queue":"tasks","status":"completed","attempts":3,"maxAttempts":3,"deferCount":1,` +
		`"idempotencyKey":"order-1","payload":{"b":1,"a":12345678901234567890,"h":"<&>"},` +
		`"scheduledFor":"2026-01-02T03:05:05.678Z","expiresAt":"2026-01-03T03:04:05.678Z","lastError":"HTTP 500","deadReason":null,` +
		`"history":[` +
		`{"attempt":1,"status":"failed","error":"HTTP 500","webhookStatusCode":500,"timestamp":"2026-01-02T03:04:06.678Z"},` +
		`{"attempt":2,"status":"deferred","error":null,"webhookStatusCode":503,"timestamp":"2026-01-02T03:04:07.678Z","retryAfter":30.5,"scope":"queue","reason":"rate limited"},` +
		`{"attempt":3,"status":"failed","error":"HTTP 502","webhookStatusCode":null,"timestamp":"2026-01-02T03:04:08.678Z","probe":true},` +
		`{"attempt":3,"status":"success","error":null,"webhookStatusCode":null,"timestamp":"2026-01-02T03:04:09.678Z","acked":true}` +
		`],"createdAt":"2026-01-02T03:04:05.678Z","completedAt":"2026-01-02T03:07:05.678Z","priority":0,"replaceKey":null,"flowKey":null}` + "\n"
	require.Equal(t, want, w.Body.String(), "exact bytes: field order, nulls, payload verbatim")
}

func TestGetJobNullsAndEmptyHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID("emails")
	h.backend.getJobFn = func(config.Queue, string) (*store.Job, error) {
		return &store.Job{ID: id, Queue: "emails", Status: store.StatusPending, MaxAttempts: 5,
			Payload: json.RawMessage(`{}`), ScheduledFor: t0, ExpiresAt: t0, CreatedAt: t0}, nil
	}
	w := h.get(t, "/v1/jobs/"+id)
	require.Equal(t, http.StatusOK, w.Code)
	var got map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	for _, k := range []string{"idempotencyKey", "lastError", "deadReason", "completedAt"} {
		v, ok := got[k]
		require.True(t, ok, k)
		require.Nil(t, v, k)
	}
	require.Equal(t, []any{}, got["history"])
}

func TestGetJobNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Well-formed id, but the store has no such job (purged).
	requireError(t, h.get(t, "/v1/jobs/"+newID("emails")), http.StatusNotFound, "Job not found")

	// Malformed ids and ids of unconfigured queues never reach the backend.
	h = newHarness(t)
	for _, id := range []string{"nope", "job_123", newID("unknownqueue"), strings.Replace(newID("emails"), "_", "-", 1)} {
		requireError(t, h.get(t, "/v1/jobs/"+id), http.StatusNotFound, "Job not found")
	}
	require.Empty(t, h.backend.gets)
}

func TestGetJobBackendErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.getJobFn = func(config.Queue, string) (*store.Job, error) { return nil, fmt.Errorf("x: %w", store.ErrUnavailable) }
	w := h.get(t, "/v1/jobs/"+newID("emails"))
	requireError(t, w, http.StatusServiceUnavailable, "Service unavailable")
	require.Equal(t, "1", w.Header().Get("Retry-After"))

	h = newHarness(t)
	h.backend.getJobFn = func(config.Queue, string) (*store.Job, error) {
		return &store.Job{Payload: json.RawMessage(`{corrupt`)}, nil
	}
	requireError(t, h.get(t, "/v1/jobs/"+newID("emails")), http.StatusInternalServerError, "internal error")
}

// The publish endpoints' short cut past the mux routes exactly what the mux
// would: plain names only, everything else the general way.
func TestPublishPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]struct {
		queue     string
		batch, ok bool
	}{
		"/v1/queues/emails/jobs":        {"emails", false, true},
		"/v1/queues/a.b-c_d/jobs/batch": {"a.b-c_d", true, true},
		"/v1/queues//jobs":              {},
		"/v1/queues/a/b/jobs":           {},
		"/v1/queues/../jobs":            {},
		"/v1/queues/emails/jobs/":       {},
		"/v1/queues/emails/jobsx":       {},
		"/v2/queues/emails/jobs":        {},
	} {
		q, batch, ok := publishPath(path)
		require.Equal(t, want.ok, ok, path)
		require.Equal(t, want.queue, q, path)
		require.Equal(t, want.batch, batch, path)
	}
}

// The hand-formatted batch answer is exactly what encoding its items gives,
// also for ids that would need escaping (never made by this daemon).
func TestBatchAnswerMatchesEncoder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 123_456_789, time.UTC)
	res := []store.Published{
		{ID: newID("emails"), Status: store.StatusPending, CreatedAt: at},
		{ID: newID("emails"), Status: store.StatusCompleted, CreatedAt: at.Add(-time.Hour), Duplicate: true},
		{ID: `odd"id\with<html>&` + "\u2028\x01é", Status: store.StatusDead, CreatedAt: time.Time{}, Duplicate: true},
	}
	for n := 0; n <= len(res); n++ {
		items := make([]batchItemJSON, n)
		for i, p := range res[:n] {
			items[i] = batchItemJSON{ID: p.ID, Status: string(p.Status), CreatedAt: formatTime(p.CreatedAt), Duplicate: p.Duplicate}
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(struct {
			Jobs []batchItemJSON `json:"jobs"`
		}{items}))
		require.Equal(t, want.String(), string(appendBatchAnswer(nil, res[:n])), "%d items", n)
	}
}

// BenchmarkPublishBatchHandler is the daemon's own work per job of a
// 1,000-job batch publish, without HTTP or Redis: reading and validating
// the body, building the jobs, formatting the answer.
func BenchmarkPublishBatchHandler(b *testing.B) {
	h := newHarness(b, func(o *Options) { o.MaxPayloadBytes = 1 << 20 })
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h.backend.publishFn = func(_ config.Queue, jobs []store.NewJob) ([]store.Published, error) {
		out := make([]store.Published, len(jobs))
		for i := range jobs {
			out[i] = store.Published{ID: "job_01KB1234567890ABCDEFGHJKMN_emails", Status: store.StatusPending, CreatedAt: at}
		}
		return out, nil
	}
	body := string(batchBody())
	for b.Loop() {
		if w := h.post(b, "/v1/queues/emails/jobs/batch", body); w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000)/1000, "µs/job")
}

// BenchmarkPublishHandler is the daemon's own work for one single-job
// publish through the API's middleware, without HTTP or Redis: key check,
// reading and validating the body, building the job, formatting the answer.
func BenchmarkPublishHandler(b *testing.B) {
	h := newHarness(b)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h.backend.publishFn = func(_ config.Queue, jobs []store.NewJob) ([]store.Published, error) {
		return []store.Published{{ID: "job_01KB1234567890ABCDEFGHJKMN_emails", Status: store.StatusPending, CreatedAt: at}}, nil
	}
	body := `{"payload":{"data":"` + strings.Repeat("x", 180) + `"}}`
	b.ReportAllocs()
	for b.Loop() {
		if w := h.post(b, "/v1/queues/emails/jobs", body); w.Code != http.StatusCreated {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
