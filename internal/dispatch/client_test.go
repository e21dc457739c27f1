package dispatch_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

func testQueue(url string) config.Queue {
	return config.Queue{Name: "q", WebhookURL: url, SigningSecret: "s", QueueSettings: config.QueueSettings{
		Mode: "standard", MaxAttempts: 3, Timeout: 2 * time.Second, DefaultRetryAfter: 7 * time.Second,
	}}
}

func testJob() store.ClaimedJob {
	return store.ClaimedJob{ID: "job_1_q", Attempt: 1, Token: "t", Payload: []byte(`{"a":1}`), CreatedAt: time.Now()}
}

// TestDeliveryPolicy: the delivery client never follows redirects (a 3xx is
// a failure; following could send a signed payload elsewhere), ignores
// environment proxies (a proxy would see every payload and signature),
// reads only a bounded part of a large answer, and finds Retry-After
// whatever its case. test/reliability_security_test.go checks the proxy
// and redirect rules against a real daemon too.
func TestDeliveryPolicy(t *testing.T) {
	var targetHits, proxyHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { targetHits.Add(1) }))
	t.Cleanup(target.Close)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxyHits.Add(1) }))
	t.Cleanup(proxy.Close)
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(v, proxy.URL)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.Equal(t, "test-agent", r.Header.Get("User-Agent"))
		require.Equal(t, dispatch.Sign("s", body), r.Header.Get("X-Simpleq-Signature"))
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, target.URL, http.StatusFound)
		case "/big":
			w.WriteHeader(500)
			_, _ = io.WriteString(w, strings.Repeat("x", 4<<20))
		case "/slow-down":
			w.Header()["retry-after"] = []string{"3"} // sent as written, lower case
			w.WriteHeader(429)
		default:
			w.WriteHeader(204)
		}
	}))
	t.Cleanup(hook.Close)
	d := dispatch.NewDeliverer("test-agent")
	ctx := context.Background()

	out := d.Deliver(ctx, testQueue(hook.URL+"/ok"), testJob())
	require.Equal(t, store.OutcomeOK, out.Kind)
	require.Equal(t, 204, out.StatusCode)

	out = d.Deliver(ctx, testQueue(hook.URL+"/redirect"), testJob())
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Equal(t, 302, out.StatusCode)
	require.Contains(t, out.Error, "redirects are not followed")
	require.Zero(t, targetHits.Load())

	out = d.Deliver(ctx, testQueue(hook.URL+"/big"), testJob())
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Less(t, len(out.Error), 300, "lastError keeps a bounded snippet")

	out = d.Deliver(ctx, testQueue(hook.URL+"/slow-down"), testJob())
	require.Equal(t, store.OutcomeDefer, out.Kind)
	require.Equal(t, 3*time.Second, out.RetryAfter)

	// The pool still works after the connection the big answer spoiled.
	require.Equal(t, store.OutcomeOK, d.Deliver(ctx, testQueue(hook.URL+"/ok"), testJob()).Kind)
	require.Zero(t, proxyHits.Load(), "deliveries must not go through a proxy")
}

// TestDeliveryTimeoutAndShutdown: a slow webhook is cut at the queue's
// timeout (a failure), and a shutdown past its grace period cuts a
// delivery in flight at once (a release, which spends nothing).
func TestDeliveryTimeoutAndShutdown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hook.Close() })
	d := dispatch.NewDeliverer("test-agent")

	q := testQueue(hook.URL)
	q.Timeout = 100 * time.Millisecond
	start := time.Now()
	out := d.Deliver(context.Background(), q, testJob())
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Equal(t, "timeout after 100ms", out.Error)
	require.Less(t, time.Since(start), 2*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	d = dispatch.NewDeliverer("test-agent")
	q.Timeout = 30 * time.Second
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	out = d.Deliver(ctx, q, testJob())
	require.Equal(t, store.OutcomeRelease, out.Kind)
	require.Less(t, time.Since(start), 5*time.Second)

	out = d.Deliver(ctx, q, testJob())
	require.Equal(t, store.OutcomeRelease, out.Kind, "after shutdown nothing more is sent")
}
