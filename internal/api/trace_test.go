package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// postTraced is a publish with extra headers (name, value pairs).
func (h *harness) postTraced(t *testing.T, path, body string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+testKey)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(w, r)
	return w
}

// The publisher's traceparent and tracestate reach the store with the job,
// for single and batch publishes alike.
func TestPublishKeepsTheTraceContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.postTraced(t, "/v1/queues/emails/jobs", `{"payload":{}}`,
		"traceparent", testTraceParent, "tracestate", "congo=t61rcWkgMzE")
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	w = h.postTraced(t, "/v1/queues/emails/jobs/batch", `{"jobs":[{"payload":{}},{"payload":{"n":2}}]}`,
		"Traceparent", testTraceParent)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = h.postTraced(t, "/v1/queues/emails/jobs", `{"payload":{}}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())

	calls := h.backend.publishCalls()
	require.Len(t, calls, 3)
	require.Equal(t, testTraceParent, calls[0][0].TraceParent)
	require.Equal(t, "congo=t61rcWkgMzE", calls[0][0].TraceState)
	require.Len(t, calls[1], 2)
	for _, j := range calls[1] {
		require.Equal(t, testTraceParent, j.TraceParent)
		require.Empty(t, j.TraceState)
	}
	require.Empty(t, calls[2][0].TraceParent)
}

// A malformed traceparent is not an error: the job is published without
// one, as SimpleQ would publish it (it never reads the header).
func TestPublishIgnoresAMalformedTraceParent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, bad := range []string{"00-nope", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\",\"x"} {
		w := h.postTraced(t, "/v1/queues/emails/jobs", `{"payload":{}}`, "traceparent", bad, "tracestate", "a=b")
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		w = h.postTraced(t, "/v1/queues/emails/jobs/batch", `{"jobs":[{"payload":{}}]}`, "traceparent", bad)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	}
	for _, c := range h.backend.publishCalls() {
		for _, j := range c {
			require.Empty(t, j.TraceParent)
			require.Empty(t, j.TraceState)
		}
	}
}
