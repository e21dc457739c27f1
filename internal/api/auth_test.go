package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		auth string
		want int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong key", "Bearer nope", http.StatusUnauthorized},
		{"prefix of a key", "Bearer sk_test", http.StatusUnauthorized},
		{"key plus suffix", "Bearer " + testKey + "x", http.StatusUnauthorized},
		{"no scheme", testKey, http.StatusUnauthorized},
		{"basic scheme", "Basic " + testKey, http.StatusUnauthorized},
		{"bearer without token", "Bearer ", http.StatusUnauthorized},
		{"second configured key", "Bearer " + testKey, http.StatusOK},
		{"first configured key", "Bearer sk_other_key", http.StatusOK},
		{"scheme is case-insensitive", "bearer " + testKey, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(tc.auth)})
			if tc.want == http.StatusUnauthorized {
				requireError(t, w, http.StatusUnauthorized, "unauthorized")
				require.Equal(t, "Bearer", w.Header().Get("WWW-Authenticate"))
				return
			}
			require.Equal(t, tc.want, w.Code, w.Body.String())
		})
	}
}

func TestAuthAppliesBeforeRoutingAndValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, rq := range []req{
		{method: http.MethodPost, path: "/v1/queues/emails/jobs", body: `{"payload":{}}`},
		{method: http.MethodPost, path: "/v1/queues/nope/jobs", body: `not json`},
		{method: http.MethodGet, path: "/v1/jobs/whatever"},
		{method: http.MethodPost, path: "/v1/jobs/whatever/ack"},
		{method: http.MethodGet, path: "/v1/unknown"},
	} {
		rq.auth = str("")
		requireError(t, h.do(t, rq), http.StatusUnauthorized, "unauthorized")
	}
	require.Empty(t, h.backend.publishCalls())
}

func TestAuthDisabledWithoutKeys(t *testing.T) {
	t.Parallel()
	for name, keys := range map[string]func() []string{
		"nil func":   nil,
		"no keys":    func() []string { return nil },
		"empty keys": func() []string { return []string{""} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *Options) { o.APIKeys = keys })
			w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(""), host: "127.0.0.1:8080"})
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			// Keyless means loopback only, also by name (browser_test.go).
			w = h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("")})
			requireError(t, w, http.StatusForbidden, "forbidden")
		})
	}
}

func TestAuthSeesKeyReload(t *testing.T) {
	t.Parallel()
	keys := []string{"old"}
	h := newHarness(t, func(o *Options) { o.APIKeys = func() []string { return keys } })
	require.Equal(t, http.StatusOK, h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("Bearer old")}).Code)
	keys = []string{"new"}
	require.Equal(t, http.StatusUnauthorized, h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("Bearer old")}).Code)
	require.Equal(t, http.StatusOK, h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("Bearer new")}).Code)
}

func TestProbesNeedNoKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		w := h.do(t, req{method: http.MethodGet, path: p, auth: str("")})
		require.Equal(t, http.StatusOK, w.Code, p)
	}
}
