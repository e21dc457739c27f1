package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/simpleq/simpleqd/internal/cli"
	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/daemon"
	"github.com/simpleq/simpleqd/internal/reload"
)

// serve runs a daemon until a signal or a failure stops it: exit code 0
// after a graceful stop, 1 when start-up or a component failed, or when a
// second signal cut the graceful stop short.
func serve(path string, stderr io.Writer) int {
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() { _ = log.Sync() }()

	for _, v := range strayEnv(cfg) {
		log.Warn("environment variable set but not read", zap.String("variable", v.Name), zap.String("why", v.Why))
	}
	if addr := os.Getenv(pprofEnv); addr != "" {
		startPprof(addr, log)
	}
	d, err := daemon.New(cfg, log)
	if err != nil {
		log.Error("start-up failed", zap.Error(err))
		return 1
	}
	// SIGHUP and changes of the file both reload through the watcher, which
	// validates first and applies one reload at a time; it runs in the
	// daemon's group like every other component.
	rw := reload.New(reload.Options{Path: path, Getenv: os.Getenv, Target: d, Current: cfg, Logger: log.Named("reload")})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	return supervise(func(ctx context.Context) error { return d.Run(ctx, rw.Run) }, sigs, rw.Trigger, log)
}

// supervise runs run (the daemon) until it returns and maps the outcome to
// an exit code. SIGHUP calls reload; the first SIGINT or SIGTERM ends run's
// context, a graceful stop; a second one returns 1 at once, leaving run to
// be cut short by the process's exit (in main, after the deferred log
// sync), so anything still in flight is recovered by its lease, as after a
// kill. It never exits the process itself.
func supervise(run func(context.Context) error, sigs <-chan os.Signal, reload func(), log *zap.Logger) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopping := false
	for {
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Error("simpleqd failed", zap.Error(err))
				return 1
			}
			return 0
		case s := <-sigs:
			switch {
			case s == syscall.SIGHUP:
				reload()
			case stopping:
				log.Warn("second signal: exiting at once")
				return 1
			default:
				stopping = true
				log.Info("signal received: shutting down gracefully (send again to exit at once)", zap.String("signal", s.String()))
				cancel()
			}
		}
	}
}

func newLogger(c config.Log) (*zap.Logger, error) {
	var zc zap.Config
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
	} else {
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.TimeKey = "ts"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	lvl, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.DisableStacktrace = true
	l, err := zc.Build()
	if err != nil {
		return nil, fmt.Errorf("build logger: %w", err)
	}
	return l, nil
}

// strayEnv lists variables in this process's environment that look like
// settings but that the configuration does not read (a typo would otherwise
// go unnoticed). The CLI's variables and the profiler switch are read
// elsewhere, so they are not stray.
func strayEnv(cfg *config.Config) []config.StrayVariable {
	return config.StrayEnv(cfg, os.Environ(), cli.EnvURL, cli.EnvAPIKey, pprofEnv)
}
