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
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/simpleq/simpleqd/internal/cli"
	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/daemon"
	"github.com/simpleq/simpleqd/internal/demo"
	"github.com/simpleq/simpleqd/internal/reload"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := rootCommand(ctx, stdout, stderr)
	root.SetArgs(args)
	return cli.ExitCodeOf(root.Execute(), stderr)
}

// rootCommand is the command tree: the daemon (serve, also what plain
// "simpleqd" runs), check, demo, version, shell completion and the operator
// commands of package cli. Every level answers --help; --version prints the
// build's version.
func rootCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var path string
	configFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&path, "config", "", "YAML configuration file (empty: built-in defaults)")
	}
	root := &cobra.Command{
		Use:   "simpleqd",
		Short: "a webhook job dispatcher implementing SimpleQ on Redis",
		Long: "simpleqd runs a daemon (the default command) or talks to one.\n\n" +
			"  simpleqd [serve] [--config FILE]   run a daemon; SIGHUP or a change of FILE reloads it",
		Version: daemon.Version,
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return exitCode(serve(path, stderr)) },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	configFlag(root)
	root.SetFlagErrorFunc(usageErr("simpleqd", "simpleqd [serve] [--config FILE]"))

	serveCmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "run a daemon (API + dispatcher); SIGHUP or a change of FILE reloads it",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return exitCode(serve(path, stderr)) },
	}
	configFlag(serveCmd)
	checkCmd := &cobra.Command{
		Use:   "check [--config FILE]",
		Short: "validate a configuration and print it with secrets redacted",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return exitCode(check(path, stdout, stderr)) },
	}
	configFlag(checkCmd)
	demoCmd := &cobra.Command{
		Use:   "demo [--jobs N] [--duration-limit D] [--plain] ...",
		Short: "show rate-aware backpressure against a simulated provider (no set-up)",
		// The demo is a program of its own, with its own flags and help.
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return exitCode(demo.Main(ctx, args, stdout, stderr))
		},
	}
	versionCmd := &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  cobra.NoArgs,
		Run:   func(*cobra.Command, []string) { fmt.Fprintln(stdout, daemon.Version) },
	}
	root.AddCommand(serveCmd, checkCmd, demoCmd, versionCmd)
	ops := &cobra.Group{ID: "operator", Title: "Operator commands (over a daemon's HTTP API):"}
	root.AddGroup(ops)
	for _, c := range cli.Commands(ctx, cli.Env{Stdout: stdout, Stderr: stderr}) {
		c.GroupID = ops.ID
		root.AddCommand(c)
	}
	root.SetUsageTemplate(root.UsageTemplate() + cli.Footer)
	root.SilenceUsage, root.SilenceErrors = true, true
	for _, c := range []*cobra.Command{serveCmd, checkCmd, versionCmd} {
		c.SilenceUsage, c.SilenceErrors = true, true
		c.SetFlagErrorFunc(usageErr(c.Name(), c.Use))
	}
	return root
}

// exitCode turns a command's exit code into what RunE returns.
func exitCode(code int) error {
	if code == 0 {
		return nil
	}
	return cli.ExitCode(code)
}

// usageErr makes cobra's flag errors usage errors (exit code 2).
func usageErr(name, usage string) func(*cobra.Command, error) error {
	return func(_ *cobra.Command, err error) error {
		return &cli.UsageError{Command: name, Usage: usage, Msg: err.Error()}
	}
}

func check(path string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, v := range strayEnv(cfg) {
		fmt.Fprintf(stderr, "warning: %s is set but not read: %s\n", v.Name, v.Why)
	}
	if !checkRedis(cfg, path, stdout, stderr) { // redis.go
		return 1
	}
	fmt.Fprint(stdout, cfg.Redacted())
	return 0
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
