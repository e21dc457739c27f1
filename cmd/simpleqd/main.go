// Command simpleqd runs a webhook job dispatcher daemon; see README.md.
//
//	simpleqd [serve] [--config FILE]   run a daemon (API + dispatcher)
//	simpleqd check --config FILE       validate a file, print the effective config
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/simpleq/simpleqd/config"
	"github.com/simpleq/simpleqd/daemon"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("simpleqd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "YAML configuration file (empty: built-in defaults)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch cmd {
	case "serve":
		return serve(*path, stderr)
	case "check":
		cfg, err := config.Load(*path, os.Getenv)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprint(stdout, cfg.Redacted())
		return 0
	case "version":
		fmt.Fprintln(stdout, daemon.Version)
		return 0
	default:
		fmt.Fprintf(stderr, "simpleqd: unknown command %q (serve, check, version)\n", cmd)
		return 2
	}
}

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

	if addr := os.Getenv("SIMPLEQD_PPROF_LISTEN"); addr != "" {
		startPprof(addr, log)
	}
	d, err := daemon.New(cfg, log)
	if err != nil {
		log.Error("start-up failed", zap.Error(err))
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		stopping := false
		for s := range sigs {
			switch {
			case s == syscall.SIGHUP:
				next, err := config.Load(path, os.Getenv)
				if err != nil {
					log.Error("reload rejected: keeping the running configuration", zap.Error(err))
					continue
				}
				d.Reload(next)
			case stopping:
				log.Warn("second signal: exiting at once")
				os.Exit(1)
			default:
				stopping = true
				log.Info("signal received: shutting down gracefully (send again to exit at once)", zap.String("signal", s.String()))
				cancel()
			}
		}
	}()
	if err := d.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("simpleqd failed", zap.Error(err))
		return 1
	}
	return 0
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
