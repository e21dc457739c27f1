package dispatch

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Tests of the rule "one POST per attempt": a connection error is one failed
// attempt, never a second POST inside it, because a re-send could reach a
// handler that already ran (review finding 1).

func attemptQueue(url string) config.Queue {
	return config.Queue{Name: "q", WebhookURL: url, SigningSecret: "s",
		QueueSettings: config.QueueSettings{Mode: "standard", MaxAttempts: 3, Timeout: 2 * time.Second}}
}

func attemptJob(attempt int) store.ClaimedJob {
	return store.ClaimedJob{ID: "job_1_q", Attempt: attempt, Token: "t", Payload: []byte(`{}`), CreatedAt: time.Now()}
}

// TestPanickingHandlerRunsOncePerAttempt: net/http answers a panicking
// handler by closing the connection without a response, after the handler
// ran. Three attempts must run it three times, one per attempt, each a
// failed attempt; fasthttp's re-send on a closed connection used to run it
// six times.
func TestPanickingHandlerRunsOncePerAttempt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string // X-Simpleq-Attempt of every request the handler ran
	hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Simpleq-Attempt"))
		mu.Unlock()
		panic("webhook bug")
	}))
	hook.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic's stack trace is expected
	hook.Start()
	t.Cleanup(hook.Close)

	d := NewDeliverer("t")
	for attempt := 1; attempt <= 3; attempt++ {
		out := d.Deliver(context.Background(), attemptQueue(hook.URL), attemptJob(attempt))
		require.Equal(t, store.OutcomeFail, out.Kind, "attempt %d", attempt)
		require.Contains(t, out.Error, "connection error", "attempt %d", attempt)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"1", "2", "3"}, seen, "the handler ran once per attempt")
}

// TestDroppedConnectionIsOneRequest: a webhook that reads the whole request
// on a fresh connection and closes it without answering receives exactly
// one request, on one connection, and the attempt fails as a connection
// error. Nothing here is a stale pooled connection: the request reached the
// server, so sending it again would be a duplicate delivery.
func TestDroppedConnectionIsOneRequest(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	var conns, requests atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body) // all read: the close is a FIN, not a reset
				requests.Add(1)
			}()
		}
	}()

	out := NewDeliverer("t").Deliver(context.Background(), attemptQueue("http://"+l.Addr().String()+"/hook"), attemptJob(1))
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Contains(t, out.Error, "connection error")
	// The server counts a request before closing, and the client sees the
	// close before Deliver returns, so any re-send would be counted by now.
	require.EqualValues(t, 1, requests.Load(), "one POST for one attempt")
	require.EqualValues(t, 1, conns.Load(), "no second connection for a re-send")
}

// TestPooledConnectionsRetireBeforeTheWebhookDoes: since a POST on a
// connection the webhook has closed is no longer re-sent, the pool must
// retire idle connections before common webhook servers do. Consecutive
// deliveries still share one connection; deliveries spaced past the
// webhook's keep-alive each get a fresh one and succeed. The second part
// runs at 1/20 scale: the webhook keeps connections for Node's default 5 s
// / 20, the pool for idleConnTimeout / 20, so a pool idle timeout at or
// above the webhook's fails it as it would fail a real healthy webhook.
func TestPooledConnectionsRetireBeforeTheWebhookDoes(t *testing.T) {
	t.Parallel()
	newHook := func(keepAlive time.Duration) (*httptest.Server, *atomic.Int32) {
		var conns atomic.Int32
		hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))
		hook.Config.IdleTimeout = keepAlive
		hook.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		hook.Start()
		t.Cleanup(hook.Close)
		return hook, &conns
	}

	// Healthy webhooks keep the pool's benefit: back-to-back deliveries
	// reuse the connection.
	hook, conns := newHook(0)
	d := NewDeliverer("t")
	for attempt := 1; attempt <= 2; attempt++ {
		out := d.Deliver(context.Background(), attemptQueue(hook.URL), attemptJob(attempt))
		require.Equal(t, store.OutcomeOK, out.Kind, out.Error)
	}
	require.EqualValues(t, 1, conns.Load(), "consecutive deliveries share a connection")

	const scale = 20
	const nodeKeepAlive = 5 * time.Second
	keepAlive := nodeKeepAlive / scale
	hook, conns = newHook(keepAlive)
	d = newDeliverer("t", idleConnTimeout/scale)
	for i := range 3 {
		if i > 0 {
			// Past the webhook's keep-alive: it has closed the connection
			// the last delivery used, unless the pool retired it first.
			time.Sleep(2 * keepAlive) //nolint:testsleep // the connection must really sit idle past the webhook's keep-alive
		}
		out := d.Deliver(context.Background(), attemptQueue(hook.URL), attemptJob(1))
		require.Equal(t, store.OutcomeOK, out.Kind, "delivery %d after %s idle: %s", i+1, 2*keepAlive, out.Error)
	}
	require.EqualValues(t, 3, conns.Load(), "each delivery after a long idle dials afresh")
	require.Less(t, idleConnTimeout, nodeKeepAlive, "the pool's idle timeout is below Node's default keep-alive")
}
