package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// The fake backend's QueueAdmin: it validates with the file's rules
// against the built-in defaults (as the daemon does against the file's)
// and records each call as an admin call.

func (f *fakeBackend) PutQueue(_ context.Context, name string, spec config.QueueSpec) (config.Queue, bool, []config.FieldProblem, error) {
	f.record(adminCall{Method: "PutQueue", Queue: name})
	q, _, problems := config.ResolveQueueSpec(name, spec, config.Default().Defaults)
	return q, true, problems, nil
}

func (f *fakeBackend) PatchQueue(_ context.Context, name string, patch config.QueueSpec) (config.Queue, []config.FieldProblem, error) {
	f.record(adminCall{Method: "PatchQueue", Queue: name})
	base := config.QueueSpec{"webhookUrl": "https://hooks.example.com/" + name, "signingSecret": "whsec_patched_queue"}
	q, _, problems := config.ResolveQueueSpec(name, config.MergeQueueSpec(base, patch), config.Default().Defaults)
	return q, problems, nil
}

func (f *fakeBackend) DeleteQueue(_ context.Context, name string, purge bool) error {
	reason := ""
	if purge {
		reason = "purge"
	}
	f.record(adminCall{Method: "DeleteQueue", Queue: name, Reason: reason})
	if f.deleteErr != nil {
		return f.deleteErr
	}
	return nil
}

func TestPutQueueCreates(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.do(t, req{method: "PUT", path: "/v1/queues/cust-1",
		body: `{"webhookUrl":"https://hooks.example.com/c1","signingSecret":"whsec_abcdefgh1234","concurrency":4,"rateLimitWindow":2.5}`})
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var q map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &q))
	require.Equal(t, "api", q["source"])
	require.Equal(t, "1234", q["signingSecretHint"])
	require.EqualValues(t, 4, q["concurrency"])
	require.EqualValues(t, 2.5, q["rateLimitWindow"])
	require.NotContains(t, w.Body.String(), "whsec_abcdefgh1234")
}

func TestPutQueueRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// A file queue is the file's, whatever the method.
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		w := h.do(t, req{method: m, path: "/v1/queues/emails", body: `{}`})
		require.Equal(t, http.StatusConflict, w.Code, m)
		require.JSONEq(t, `{"error":"Queue 'emails' is managed by the config file"}`, w.Body.String())
	}
	// A bad name: 400 before anything.
	w := h.do(t, req{method: "PUT", path: "/v1/queues/bad%20name", body: `{}`})
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "Queue name must match")
	// Every bad setting is named, with the file's message.
	w = h.do(t, req{method: "PUT", path: "/v1/queues/cust-2",
		body: `{"webhookUrl":"https://hooks.example.com/x","signingSecrets":["a","a"],"maxAttempts":0,"signingSecretEnv":"SIMPLEQ_AUTH_APIKEYS"}`})
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	require.JSONEq(t, `{"error":{"formErrors":[],"fieldErrors":{
		"maxAttempts":["must be ≥ 1 (got 0)"],
		"signingSecretEnv":["unknown key"],
		"signingSecrets":["secrets 1 and 2 are the same"]}}}`, w.Body.String())
	// Not an object.
	w = h.do(t, req{method: "PUT", path: "/v1/queues/cust-2", body: `[1]`})
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	// PATCH and DELETE of an unknown queue: 404, the backend not asked.
	for _, m := range []string{"PATCH", "DELETE"} {
		w = h.do(t, req{method: m, path: "/v1/queues/nobody", body: `{}`})
		require.Equal(t, http.StatusNotFound, w.Code, m)
	}
	for _, c := range h.backend.adminCalls() {
		require.NotEqual(t, "nobody", c.Queue)
	}
}

// apiQueues adds an API queue to the test's file queues.
func apiQueues() map[string]config.Queue {
	qs := testQueues()
	qs["cust-1"] = config.Queue{Name: "cust-1", WebhookURL: "https://hooks.example.com/c1", SigningSecret: "whsec_abcdefgh1234",
		Checked: true, QueueSettings: config.Default().Defaults}
	return qs
}

func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.Queues = apiQueues })
	w := h.do(t, req{method: "DELETE", path: "/v1/queues/cust-1"})
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	w = h.do(t, req{method: "DELETE", path: "/v1/queues/cust-1?purge=true"})
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	calls := h.backend.adminCalls()
	require.Equal(t, []adminCall{{Method: "DeleteQueue", Queue: "cust-1"}, {Method: "DeleteQueue", Queue: "cust-1", Reason: "purge"}}, calls)

	w = h.do(t, req{method: "DELETE", path: "/v1/queues/cust-1?purge=yes"})
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.JSONEq(t, `{"error":{"formErrors":[],"fieldErrors":{"purge":["Expected true or false, received 'yes'"]}}}`, w.Body.String())

	h.backend.deleteErr = &store.BusyError{Jobs: 3}
	w = h.do(t, req{method: "DELETE", path: "/v1/queues/cust-1"})
	require.Equal(t, http.StatusConflict, w.Code)
	require.Contains(t, w.Body.String(), "has 3 jobs that are not terminal")
	h.backend.deleteErr = store.ErrDefDeleting
	w = h.do(t, req{method: "DELETE", path: "/v1/queues/cust-1"})
	require.JSONEq(t, `{"error":"Queue 'cust-1' is being deleted"}`, w.Body.String())
}

func TestPatchQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.Queues = apiQueues })
	w := h.do(t, req{method: "PATCH", path: "/v1/queues/cust-1", body: `{"concurrency":3}`})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"concurrency":3`)
	w = h.do(t, req{method: "PATCH", path: "/v1/queues/cust-1", body: `{"concurrency":"many"}`})
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.JSONEq(t, `{"error":{"formErrors":[],"fieldErrors":{"concurrency":["must be an integer (got \"many\")"]}}}`, w.Body.String())
}
