package app

import (
	"context"
	"errors"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/daemon"
)

// superviseAsync runs supervise in the background and returns its exit code
// channel, the signal channel it reads and its log.
func superviseAsync(run func(context.Context) error, reload func()) (<-chan int, chan<- os.Signal, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	sigs := make(chan os.Signal, 2)
	code := make(chan int, 1)
	if reload == nil {
		reload = func() {}
	}
	go func() { code <- supervise(run, sigs, reload, zap.New(core)) }()
	return code, sigs, logs
}

func exitCodeWithin(t *testing.T, code <-chan int) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("supervise did not return")
		return -1
	}
}

// A real daemon whose component fails stops, and supervise returns 1
// without any signal (and without exiting the process: this test goes on).
func TestSuperviseFailingComponentExitsNonZero(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.HTTP.Listen = "127.0.0.1:0"
	d, err := daemon.New(cfg, zap.NewNop())
	require.NoError(t, err)
	addr, err := d.Listen()
	require.NoError(t, err)
	fail := make(chan struct{})
	failing := func(ctx context.Context) error {
		select {
		case <-fail:
			return errors.New("watcher broke")
		case <-ctx.Done():
			return nil
		}
	}
	code, _, logs := superviseAsync(func(ctx context.Context) error { return d.Run(ctx, failing) }, nil)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr.String() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
		// The embedded store compiles every script first: under -race on a
		// loaded machine that has taken over 10 s.
	}, time.Minute, 5*time.Millisecond)
	close(fail)
	require.Equal(t, 1, exitCodeWithin(t, code))
	require.Equal(t, 1, logs.FilterMessage("simpleqd failed").Len())
}

// The first signal stops gracefully (exit 0); SIGHUP reloads.
func TestSuperviseSignalStopsGracefully(t *testing.T) {
	t.Parallel()
	var reloads atomic.Int32
	reloaded := make(chan struct{}, 1)
	code, sigs, logs := superviseAsync(func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}, func() { reloads.Add(1); reloaded <- struct{}{} })
	sigs <- syscall.SIGHUP
	<-reloaded
	sigs <- syscall.SIGTERM
	require.Equal(t, 0, exitCodeWithin(t, code))
	require.EqualValues(t, 1, reloads.Load())
	require.Equal(t, 1, logs.FilterMessage("signal received: shutting down gracefully (send again to exit at once)").Len())
}

// A second signal returns 1 at once while the graceful stop still runs.
func TestSuperviseSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	stopping := make(chan struct{})
	code, sigs, logs := superviseAsync(func(ctx context.Context) error {
		<-ctx.Done()
		close(stopping)
		<-stuck // a delivery that will not finish
		return nil
	}, nil)
	sigs <- syscall.SIGINT
	<-stopping
	sigs <- syscall.SIGINT
	require.Equal(t, 1, exitCodeWithin(t, code))
	require.Equal(t, 1, logs.FilterMessage("second signal: exiting at once").Len())
}
