package daemon

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
)

// runEmbedded starts a daemon on the embedded store with cfg changed by
// mod, runs it with extra components, and returns its base URL, the cancel
// of Run's context and Run's result.
func runEmbedded(t *testing.T, mod func(*config.Config), extra ...Component) (*Daemon, string, context.CancelFunc, <-chan error) {
	t.Helper()
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = time.Second
	mod(cfg)
	d, err := New(cfg, zap.NewNop())
	require.NoError(t, err)
	addr, err := d.Listen()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, extra...) }()
	base := "http://" + addr.String()
	require.Eventually(t, func() bool { return status(base+"/readyz") == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	return d, base, cancel, done
}

// probe is a client that dials for every request, so a closed listener
// shows as an error rather than a kept-alive connection still answering.
var probe = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}

// status is the status of GET url, or 0 when nothing answered.
func status(url string) int {
	resp, err := probe.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLameDuckBeforeTheListenerCloses: once Run's context ends, /readyz
// answers 503 while the API still serves, for lameDuck, and only then does
// the listener close; Run returns nil.
func TestLameDuckBeforeTheListenerCloses(t *testing.T) {
	t.Parallel()
	const lameDuck = time.Second
	_, base, cancel, done := runEmbedded(t, func(c *config.Config) { c.LameDuck = lameDuck })
	cancel()
	stopped := time.Now()
	var notReady, servedMeanwhile atomic.Bool
	require.Eventually(t, func() bool {
		switch status(base + "/readyz") {
		case 0:
			return true // the listener is closed
		case http.StatusServiceUnavailable:
			notReady.Store(true)
			if status(base+"/healthz") == http.StatusOK {
				servedMeanwhile.Store(true)
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	closed := time.Since(stopped)
	require.True(t, notReady.Load(), "/readyz answered 503 before the listener closed")
	require.True(t, servedMeanwhile.Load(), "the API kept serving during the lame duck")
	require.GreaterOrEqual(t, closed, lameDuck, "the listener stays open for lameDuck")
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the lame duck")
	}
}

// TestFailingComponentStopsTheDaemon: a component that fails (here the HTTP
// server, whose listener closes under it) stops every other component,
// without a lame duck, and Run returns its error.
func TestFailingComponentStopsTheDaemon(t *testing.T) {
	t.Parallel()
	var extraStopped atomic.Bool
	extra := func(ctx context.Context) error {
		<-ctx.Done()
		extraStopped.Store(true)
		return nil
	}
	d, _, _, done := runEmbedded(t, func(c *config.Config) { c.LameDuck = time.Hour }, extra)
	require.NoError(t, d.listener.Close())
	select {
	case err := <-done:
		require.ErrorContains(t, err, "http server")
	case <-time.After(10 * time.Second):
		t.Fatal("a failed HTTP server did not stop the daemon")
	}
	require.True(t, extraStopped.Load(), "the other components were stopped and waited for")
}

// TestFailingExtraComponent: an extra component's error (the reload
// watcher's place) is Run's error.
func TestFailingExtraComponent(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	fail := make(chan struct{})
	_, _, _, done := runEmbedded(t, func(c *config.Config) { c.LameDuck = time.Hour }, func(ctx context.Context) error {
		select {
		case <-fail:
			return boom
		case <-ctx.Done():
			return nil
		}
	})
	close(fail)
	select {
	case err := <-done:
		require.ErrorIs(t, err, boom)
	case <-time.After(10 * time.Second):
		t.Fatal("a failed component did not stop the daemon")
	}
}
