// Command simpleqd runs a webhook job dispatcher daemon; see README.md.
//
//	simpleqd [serve] [--config FILE]   run a daemon (API + dispatcher)
//	simpleqd check --config FILE       validate a file, print the effective config
//	simpleqd demo                      show backpressure in ~15 s (package demo)
//	simpleqd publish|job|queues|…      operator commands over the API (package cli)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/simpleq/simpleqd/cli"
	"github.com/simpleq/simpleqd/config"
	"github.com/simpleq/simpleqd/daemon"
	"github.com/simpleq/simpleqd/demo"
	"github.com/simpleq/simpleqd/reload"
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// tuneGC collects garbage less often than Go's default unless GOGC says
// otherwise. The daemon's live heap is small (jobs in flight, buffers) and
// nearly all its allocation is short-lived per-request garbage, so the
// default (a collection each time the heap doubles) spends CPU that
// deliveries need, for a few MB of memory saved.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	// The operator commands and the demo parse their own flags.
	if cli.IsCommand(cmd) || cmd == "demo" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if cmd == "demo" {
			return demo.Main(ctx, args, stdout, stderr)
		}
		return cli.Run(ctx, cmd, args, cli.Env{Stdout: stdout, Stderr: stderr})
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
		for _, v := range strayEnv(cfg) {
			fmt.Fprintf(stderr, "warning: %s is set but not read: %s\n", v.Name, v.Why)
		}
		fmt.Fprint(stdout, cfg.Redacted())
		return 0
	case "version":
		fmt.Fprintln(stdout, daemon.Version)
		return 0
	case "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "simpleqd: unknown command %q (see simpleqd help)\n", cmd)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  simpleqd [serve] [--config FILE]
        run a daemon (API + dispatcher); SIGHUP or a change of FILE reloads it
  simpleqd check [--config FILE]
        validate a configuration and print it with secrets redacted
  simpleqd demo [--jobs N] [--duration-limit D] [--plain] ...
        show rate-aware backpressure against a simulated provider (no set-up)
  simpleqd version
`)
	cli.Usage(w)
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// SIGHUP and changes of the file both reload through the watcher, which
	// validates first and applies one reload at a time.
	rw := reload.New(reload.Options{Path: path, Getenv: os.Getenv, Target: d, Current: cfg, Logger: log.Named("reload")})
	go func() { _ = rw.Run(ctx) }()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		stopping := false
		for s := range sigs {
			switch {
			case s == syscall.SIGHUP:
				rw.Trigger()
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

// strayEnv lists variables in this process's environment that look like
// settings but that the configuration does not read (a typo would otherwise
// go unnoticed). The CLI's variables and the profiler switch are read
// elsewhere, so they are not stray.
func strayEnv(cfg *config.Config) []config.StrayVariable {
	return config.StrayEnv(cfg, os.Environ(), cli.EnvURL, cli.EnvAPIKey, pprofEnv)
}
