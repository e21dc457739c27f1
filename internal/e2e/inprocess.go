package test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/daemon"
)

// inProcess is a daemon running inside the test process.
type inProcess struct {
	cancel context.CancelFunc
	once   sync.Once
	done   <-chan struct{}
}

func (p *inProcess) stop() {
	p.once.Do(p.cancel)
	<-p.done
}

// StartInProcess runs a daemon inside the test process (package daemon, as
// `simpleqd serve` runs it, without the signal handling and the reload
// watcher) and waits for /readyz. It starts in milliseconds instead of a
// process's start-up, and its log is the same JSON in LogPath. Scenarios
// that signal, kill, freeze or restart a daemon, or reload its file, use
// StartDaemon: an in-process daemon's Kill is a graceful stop, and Signal
// and Restart fail the test.
func StartInProcess(t testing.TB, c DaemonConfig) *Daemon {
	t.Helper()
	dir := t.TempDir()
	d := &Daemon{t: t, Config: filepath.Join(dir, "simpleqd.yaml"), LogPath: filepath.Join(dir, "simpleqd.log")}
	require.NoError(t, os.WriteFile(d.Config, []byte(c.file("127.0.0.1:0")), 0o600))
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	cfg, err := config.Load(d.Config, getenv)
	require.NoError(t, err)
	log := inProcessLogger(t, cfg.Log.Level, d.LogPath)
	dm, err := daemon.New(cfg, log)
	require.NoError(t, err)
	addr, err := dm.Listen()
	require.NoError(t, err)
	d.URL = "http://" + addr.String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d.done = done
	d.inproc = &inProcess{cancel: cancel, done: done}
	go func() {
		defer close(done)
		if err := dm.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			d.exit = err
			log.Error("simpleqd failed", zap.Error(err))
		}
		_ = log.Sync()
	}()
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(d.LogPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("in-process daemon %s log (tail):\n%s", d.URL, b)
		}
	})
	require.Eventually(t, func() bool {
		if d.Exited() {
			return true
		}
		resp, err := http.Get(d.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 20*time.Second, 5*time.Millisecond, "daemon never became ready")
	require.False(t, d.Exited(), "daemon stopped at start: %v\n%s", d.exit, d.Log())
	return d
}

// inProcessLogger writes JSON lines to path, as `simpleqd serve` writes
// them to its standard error.
func inProcessLogger(t testing.TB, level, path string) *zap.Logger {
	t.Helper()
	zc := zap.NewProductionConfig()
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	lvl, err := zapcore.ParseLevel(level)
	require.NoError(t, err)
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.DisableStacktrace = true
	zc.OutputPaths = []string{path}
	zc.ErrorOutputPaths = []string{path}
	log, err := zc.Build()
	require.NoError(t, err)
	return log
}
