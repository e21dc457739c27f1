package api

import (
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

func TestCallbacksHappyPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rq   req
		want store.Callback
	}{
		{"ack empty body with JSON content-type", req{method: http.MethodPost, path: "ack"},
			store.Callback{Kind: store.CallbackAck}},
		{"ack {}", req{method: http.MethodPost, path: "ack", body: `{}`},
			store.Callback{Kind: store.CallbackAck}},
		{"ack attempt", req{method: http.MethodPost, path: "ack", body: `{"attempt":2}`},
			store.Callback{Kind: store.CallbackAck, Attempt: 2}},
		{"ack attempt 2.0", req{method: http.MethodPost, path: "ack", body: `{"attempt":2.0}`},
			store.Callback{Kind: store.CallbackAck, Attempt: 2}},
		{"nack defaults retryable", req{method: http.MethodPost, path: "nack"},
			store.Callback{Kind: store.CallbackNack, Retryable: true}},
		{"nack retryable null is default", req{method: http.MethodPost, path: "nack", body: `{"retryable":null}`},
			store.Callback{Kind: store.CallbackNack, Retryable: true}},
		{"nack full", req{method: http.MethodPost, path: "nack", body: `{"retryable":false,"reason":"bad input","attempt":1}`},
			store.Callback{Kind: store.CallbackNack, Retryable: false, Reason: "bad input", Attempt: 1}},
		{"nack reason at limit", req{method: http.MethodPost, path: "nack", body: `{"reason":"` + strings.Repeat("é", 500) + `"}`},
			store.Callback{Kind: store.CallbackNack, Retryable: true, Reason: strings.Repeat("é", 500)}},
		// No scope: the script resolves it (keys.md §3): the queue for a job
		// without a flow key, as before keys, the lane for a keyed one.
		{"defer minimal", req{method: http.MethodPost, path: "defer", body: `{"retryAfter":0}`},
			store.Callback{Kind: store.CallbackDefer, Scope: store.ScopeDefault}},
		{"defer scope key", req{method: http.MethodPost, path: "defer", body: `{"retryAfter":2,"scope":"key"}`},
			store.Callback{Kind: store.CallbackDefer, RetryAfter: 2 * time.Second, Scope: store.ScopeKey}},
		{"defer full", req{method: http.MethodPost, path: "defer", body: `{"retryAfter":1.5,"scope":"job","reason":"busy","attempt":4}`},
			store.Callback{Kind: store.CallbackDefer, RetryAfter: 1500 * time.Millisecond, Scope: store.ScopeJob, Reason: "busy", Attempt: 4}},
		{"defer scope queue", req{method: http.MethodPost, path: "defer", body: `{"retryAfter":86400000,"scope":"queue"}`},
			store.Callback{Kind: store.CallbackDefer, RetryAfter: 86400000 * time.Second, Scope: store.ScopeQueue}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			id := newID("tasks")
			tc.rq.path = "/v1/jobs/" + id + "/" + tc.rq.path
			w := h.do(t, tc.rq)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.JSONEq(t, `{"id":"`+id+`","accepted":true}`, w.Body.String())
			tc.want.JobID = id
			require.Equal(t, []store.Callback{tc.want}, h.backend.callbackCalls())
		})
	}
}

func TestCallbackValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind, body, field, msg string
	}{
		{"ack", `{"attempt":0}`, "attempt", "Number must be greater than or equal to 1"},
		{"ack", `{"attempt":-3}`, "attempt", "Number must be greater than or equal to 1"},
		{"ack", `{"attempt":1.5}`, "attempt", "Expected integer, received float"},
		{"ack", `{"attempt":"1"}`, "attempt", "Expected integer, received string"},
		{"ack", `{"attempt":1e100}`, "attempt", "Number must be less than or equal to 2147483647"},
		{"ack", `{"retryable":true}`, "retryable", "Unrecognized field"},
		{"nack", `{"retryable":"false"}`, "retryable", "Expected boolean, received string"},
		{"nack", `{"retryable":0}`, "retryable", "Expected boolean, received number"},
		{"nack", `{"reason":42}`, "reason", "Expected string, received number"},
		{"nack", `{"reason":"` + strings.Repeat("x", 501) + `"}`, "reason", "String must contain at most 500 character(s)"},
		{"nack", `{"scope":"job"}`, "scope", "Unrecognized field"},
		{"nack", `{"attempt":true}`, "attempt", "Expected integer, received boolean"},
		{"defer", `{}`, "retryAfter", "Required"},
		{"defer", `{"retryAfter":null}`, "retryAfter", "Expected number, received null"},
		{"defer", `{"retryAfter":"5"}`, "retryAfter", "Expected number, received string"},
		{"defer", `{"retryAfter":-1}`, "retryAfter", "Number must be greater than or equal to 0"},
		{"defer", `{"retryAfter":1e400}`, "retryAfter", "Number must be less than or equal to 9223372036"},
		{"defer", `{"retryAfter":1,"scope":"global"}`, "scope", "Invalid enum value. Expected 'queue' | 'job', received 'global'"},
		{"defer", `{"retryAfter":1,"scope":"Job"}`, "scope", "Invalid enum value. Expected 'queue' | 'job', received 'Job'"},
		{"defer", `{"retryAfter":1,"scope":1}`, "scope", "Expected string, received number"},
		{"defer", `{"retryAfter":1,"reason":"` + strings.Repeat("x", 501) + `"}`, "reason", "String must contain at most 500 character(s)"},
		{"defer", `{"retryAfter":1,"retryable":false}`, "retryable", "Unrecognized field"},
		{"defer", `{"retryAfter":1,"retryAfter":2}`, "retryAfter", "Duplicate field"},
	}
	for _, tc := range cases {
		t.Run(tc.kind+" "+tc.body, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			w := h.post(t, "/v1/jobs/"+newID("tasks")+"/"+tc.kind, tc.body)
			vb := requireFieldErrors(t, w, tc.field)
			require.Equal(t, []string{tc.msg}, vb.Error.FieldErrors[tc.field])
			require.Empty(t, h.backend.callbackCalls())
		})
	}
}

func TestCallbackMalformedAndMediaType(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	path := "/v1/jobs/" + newID("tasks") + "/nack"

	vb := requireValidation(t, h.post(t, path, `{"retryable":`))
	require.Equal(t, []string{"Invalid JSON body"}, vb.Error.FormErrors)
	vb = requireValidation(t, h.post(t, path, `[]`))
	require.Equal(t, []string{"Request body must be a JSON object"}, vb.Error.FormErrors)

	w := h.do(t, req{method: http.MethodPost, path: path, body: `{"retryable":false}`, contentType: str("text/plain")})
	requireError(t, w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	w = h.do(t, req{method: http.MethodPost, path: path, body: `{}`, contentType: str("")})
	requireError(t, w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")

	w = h.post(t, path, `{"reason":"`+strings.Repeat("x", 5000)+`"}`)
	requireError(t, w, http.StatusRequestEntityTooLarge, "Payload too large")
	require.Empty(t, h.backend.callbackCalls())
}

func TestCallbackNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, id := range []string{"garbage", newID("unknownqueue")} {
		for _, kind := range []string{"ack", "nack", "defer"} {
			requireError(t, h.post(t, "/v1/jobs/"+id+"/"+kind, `{"retryAfter":1}`), http.StatusNotFound, "Job not found")
		}
	}
	require.Empty(t, h.backend.callbackCalls())

	h.backend.callbackFn = func(config.Queue, store.Callback) error { return fmt.Errorf("cb: %w", store.ErrNotFound) }
	requireError(t, h.post(t, "/v1/jobs/"+newID("tasks")+"/ack", ``), http.StatusNotFound, "Job not found")
}

func TestCallbackStandardModeQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// An id that names no job is 404 on any queue.
	for _, kind := range []string{"ack", "nack", "defer"} {
		w := h.post(t, "/v1/jobs/"+newID("emails")+"/"+kind, `{"retryAfter":1}`)
		requireError(t, w, http.StatusNotFound, "Job not found")
	}
	h.backend.getJobFn = func(q config.Queue, id string) (*store.Job, error) {
		return &store.Job{ID: id, Queue: q.Name, Status: store.StatusPending}, nil
	}
	for _, kind := range []string{"ack", "nack", "defer"} {
		w := h.post(t, "/v1/jobs/"+newID("emails")+"/"+kind, `{"retryAfter":1}`)
		requireError(t, w, http.StatusConflict, "Queue 'emails' is not in ack mode")
	}
	require.Empty(t, h.backend.callbackCalls())
}

func TestCallbackConflicts(t *testing.T) {
	t.Parallel()
	id := newID("tasks")

	h := newHarness(t)
	h.backend.callbackFn = func(config.Queue, store.Callback) error { return fmt.Errorf("nack: %w", store.ErrConflict) }
	h.backend.getJobFn = func(_ config.Queue, got string) (*store.Job, error) {
		require.Equal(t, id, got)
		return &store.Job{ID: id, Status: store.StatusCompleted}, nil
	}
	requireError(t, h.post(t, "/v1/jobs/"+id+"/nack", `{}`), http.StatusConflict, "Job is not awaiting an outcome (status: completed)")

	// The status cannot be read back: still a 409, without it.
	h = newHarness(t)
	h.backend.callbackFn = func(config.Queue, store.Callback) error { return store.ErrConflict }
	h.backend.getJobFn = func(config.Queue, string) (*store.Job, error) { return nil, store.ErrUnavailable }
	requireError(t, h.post(t, "/v1/jobs/"+id+"/ack", ``), http.StatusConflict, "Job is not awaiting an outcome")

	h = newHarness(t)
	h.backend.callbackFn = func(config.Queue, store.Callback) error { return fmt.Errorf("ack: %w", store.ErrStaleAttempt) }
	requireError(t, h.post(t, "/v1/jobs/"+id+"/ack", `{"attempt":1}`), http.StatusConflict, "Attempt 1 is no longer current")
	requireError(t, h.post(t, "/v1/jobs/"+id+"/defer", `{"retryAfter":3,"attempt":7}`), http.StatusConflict, "Attempt 7 is no longer current")
}

func TestCallbackBackendErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.callbackFn = func(config.Queue, store.Callback) error { return fmt.Errorf("eval: %w", store.ErrUnavailable) }
	w := h.post(t, "/v1/jobs/"+newID("tasks")+"/ack", ``)
	requireError(t, w, http.StatusServiceUnavailable, "Service unavailable")
	require.Equal(t, "1", w.Header().Get("Retry-After"))

	h = newHarness(t)
	h.backend.callbackFn = func(config.Queue, store.Callback) error { return errors.New("weird") }
	requireError(t, h.post(t, "/v1/jobs/"+newID("tasks")+"/ack", ``), http.StatusInternalServerError, "internal error")
}
