package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Defences against web pages (review finding 6, browser.go): a page the
// operator visits must not be able to drive a daemon, whether by a
// cross-site "simple" request (CSRF) or, on a daemon without API keys, by
// re-pointing its own name at 127.0.0.1 (DNS rebinding).

const loopback = "127.0.0.1:8080"

func keyless(o *Options) { o.APIKeys = nil }

// requireUntouched asserts no backend call was made.
func requireUntouched(t *testing.T, h *harness) {
	t.Helper()
	require.Empty(t, h.backend.publishCalls())
	require.Empty(t, h.backend.callbackCalls())
	require.Empty(t, h.backend.adminCalls())
}

// statePath fills a route pattern's wildcards.
func statePath(route string) (method, path string) {
	method, path, _ = strings.Cut(route, " ")
	path = strings.ReplaceAll(path, "{queue}", "tasks")
	path = strings.ReplaceAll(path, "{id}", newID("tasks"))
	return method, path
}

// TestStateChangesNeedJSON: on every route that changes state, a request is
// refused with 415 unless it says content-type: application/json, even with
// an empty body, with or without API keys. A browser sends text/plain, a
// form type or no content type cross-site without a preflight; before the
// fix an empty body was accepted whatever its type, so any page could pause,
// resume, ack or nack a keyless daemon.
func TestStateChangesNeedJSON(t *testing.T) {
	t.Parallel()
	for _, route := range bodyRoutes(t) {
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			method, path := statePath(route)
			for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8",
				"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
				h := newHarness(t, keyless)
				w := h.do(t, req{method: method, path: path, contentType: str(ct), auth: str(""), host: loopback})
				requireError(t, w, http.StatusUnsupportedMediaType, msgNotJSON)
				requireUntouched(t, h)
				// The same with a key: one rule, every POST is JSON.
				h = newHarness(t)
				w = h.do(t, req{method: method, path: path, contentType: str(ct)})
				requireError(t, w, http.StatusUnsupportedMediaType, msgNotJSON)
				requireUntouched(t, h)
			}
		})
	}
}

// TestKeylessEmptyJSONStillWorks: the vectors of the finding with the
// content type a real client sends are still served: an empty body with
// content-type: application/json is {} (pause, resume, ack, nack).
func TestKeylessEmptyJSONStillWorks(t *testing.T) {
	t.Parallel()
	for _, path := range []string{
		"/v1/queues/emails/pause", "/v1/queues/emails/resume",
		"/v1/jobs/" + newID("tasks") + "/ack", "/v1/jobs/" + newID("tasks") + "/nack",
	} {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
			h := newHarness(t, keyless)
			w := h.do(t, req{method: http.MethodPost, path: path, contentType: str(ct), auth: str(""), host: loopback})
			require.Equal(t, http.StatusOK, w.Code, "%s %s: %s", path, ct, w.Body.String())
		}
	}
}

// TestKeylessTextPlainVectors are the finding's own requests, one test per
// vector, each refused before the backend is called.
func TestKeylessTextPlainVectors(t *testing.T) {
	t.Parallel()
	for _, path := range []string{
		"/v1/queues/emails/pause",
		"/v1/queues/emails/resume",
		"/v1/jobs/" + newID("tasks") + "/ack",
		"/v1/jobs/" + newID("tasks") + "/nack",
	} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, keyless)
			w := h.do(t, req{method: http.MethodPost, path: path, contentType: str("text/plain"),
				auth: str(""), host: loopback, origin: "https://evil.example"})
			require.Contains(t, []int{http.StatusForbidden, http.StatusUnsupportedMediaType}, w.Code, w.Body.String())
			// Without an Origin (a browser that leaves it out) the content
			// type alone refuses it.
			w = h.do(t, req{method: http.MethodPost, path: path, contentType: str("text/plain"), auth: str(""), host: loopback})
			requireError(t, w, http.StatusUnsupportedMediaType, msgNotJSON)
			requireUntouched(t, h)
		})
	}
}

// TestKeylessLoopbackHostOnly: with DNS rebinding a page's own name points
// at 127.0.0.1 and the browser lets it read the answers, so every path but
// the probes and /metrics, GETs included, answers 403 to a Host that is not
// loopback.
func TestKeylessLoopbackHostOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, keyless)
	for _, host := range []string{
		"localhost", "localhost:8080", "LOCALHOST:1", "localhost.:8080", "app.localhost:3000",
		"127.0.0.1", "127.0.0.1:26392", "127.1.2.3:9", "[::1]:8080", "[::1]",
	} {
		w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(""), host: host})
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", host, w.Body.String())
	}
	served := len(h.backend.statuses)
	for _, host := range []string{
		"evil.example:26392", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example:8080",
		"localhostx", "0.0.0.0:8080", "10.0.0.1:8080", "[::2]:8080", "[::ffff:10.0.0.1]", "",
	} {
		for _, path := range []string{"/v1/queues", "/v1/queues/emails", "/v1/jobs/" + newID("tasks"),
			"/v1/queues/emails/dead", "/v1/queues/emails/events", "/v1/nope", "/nope"} {
			w := h.do(t, req{method: http.MethodGet, path: path, auth: str(""), host: host})
			requireError(t, w, http.StatusForbidden, msgForbidden)
		}
		w := h.do(t, req{method: http.MethodPost, path: "/v1/queues/emails/pause", auth: str(""), host: host})
		requireError(t, w, http.StatusForbidden, msgForbidden)
	}
	require.Len(t, h.backend.statuses, served, "nothing was read for a foreign host")
	requireUntouched(t, h)
	// The finding's rebinding read: Host and Origin both the attacker's.
	w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(""),
		host: "evil.example:26392", origin: "http://evil.example:26392"})
	requireError(t, w, http.StatusForbidden, msgForbidden)
	// Probes are not data: a load balancer or container runtime may use any name.
	for _, p := range []string{"/healthz", "/readyz"} {
		w := h.do(t, req{method: http.MethodGet, path: p, auth: str(""), host: "evil.example"})
		require.Equal(t, http.StatusOK, w.Code, p)
	}
}

// TestKeylessSameOriginOnly: a browser names the page that made a request in
// Origin; a keyless daemon serves only its own pages (the console).
func TestKeylessSameOriginOnly(t *testing.T) {
	t.Parallel()
	pause := "/v1/queues/emails/pause"
	for _, tc := range []struct{ host, origin string }{
		{loopback, "https://evil.example"},
		{loopback, "http://evil.example:8080"},
		{loopback, "http://localhost:8080"}, // another origin, though also loopback
		{loopback, "http://127.0.0.1:8081"},
		{loopback, "https://127.0.0.1:8081"},
		{loopback, "null"},
		{loopback, "file://"},
		{loopback, "%zz"},
		{"localhost", "http://localhost:8080"},
	} {
		h := newHarness(t, keyless)
		w := h.do(t, req{method: http.MethodPost, path: pause, auth: str(""), host: tc.host, origin: tc.origin})
		requireError(t, w, http.StatusForbidden, msgForbidden)
		w = h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(""), host: tc.host, origin: tc.origin})
		requireError(t, w, http.StatusForbidden, msgForbidden)
		requireUntouched(t, h)
	}
	for _, tc := range []struct{ host, origin string }{
		{loopback, "http://127.0.0.1:8080"},
		{loopback, "http://127.0.0.1:8080/"},
		{"LocalHost:8080", "http://localhost:8080"},
		{"localhost", "http://localhost"},
		{"localhost:80", "http://localhost"},
		{"localhost", "http://localhost:80"},
		{"localhost:443", "https://localhost"},
		{"[::1]:8080", "http://[::1]:8080"},
		{"[::1]", "http://[::1]:80"},
	} {
		h := newHarness(t, keyless)
		w := h.do(t, req{method: http.MethodPost, path: pause, auth: str(""), host: tc.host, origin: tc.origin})
		require.Equal(t, http.StatusOK, w.Code, "%+v: %s", tc, w.Body.String())
	}
}

// TestKeysLiftTheHostRules: with API keys the key protects the API, a
// browser cannot send it cross-site without a preflight, and proxies send
// their own names, so neither Host nor Origin is checked.
func TestKeysLiftTheHostRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", host: "queue.internal.example", origin: "https://ops.example"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = h.do(t, req{method: http.MethodPost, path: "/v1/jobs/" + newID("tasks") + "/ack", host: "q.example", origin: "https://ops.example"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	// Still authenticated: a foreign page without the key gets a 401.
	w = h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(""), host: "evil.example", origin: "https://evil.example"})
	requireError(t, w, http.StatusUnauthorized, "unauthorized")
}

// TestKeylessRulesFollowReload: the rules depend on the keys configured now,
// so a reload that removes every key turns them on at once.
func TestKeylessRulesFollowReload(t *testing.T) {
	t.Parallel()
	keys := []string{"k"}
	h := newHarness(t, func(o *Options) { o.APIKeys = func() []string { return keys } })
	w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("Bearer k"), host: "evil.example"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	keys = []string{""}
	w = h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(""), host: "evil.example"})
	requireError(t, w, http.StatusForbidden, msgForbidden)
}

func TestLoopbackHostAndSameOrigin(t *testing.T) {
	t.Parallel()
	require.True(t, loopbackHost("[::ffff:127.0.0.1]:1"))
	require.False(t, loopbackHost("[::1"))
	require.False(t, loopbackHost(""))
	require.False(t, loopbackHost("[fe80::1%25lo]:80"))
	require.True(t, sameOrigin("", "anything"))
	require.False(t, sameOrigin("ws://127.0.0.1:8080", loopback))
}
