// Package app is simpleqd's command line: the command tree (the daemon,
// check, demo, version, shell completion and the operator commands of
// package cli) and the serve command's supervised lifecycle, so that
// cmd/simpleqd stays a thin main that maps a run to an exit code.
package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/simpleq/simpleqd/internal/cli"
	"github.com/simpleq/simpleqd/internal/daemon"
	"github.com/simpleq/simpleqd/internal/demo"
)

// Main runs the command line with args (without the program's name) and
// returns the process's exit code: 0 on success, 1 on a failure, 2 on a
// usage error. SIGINT and SIGTERM cancel the operator commands and the
// demo; serve handles its own signals (serve.go).
func Main(args []string, stdout, stderr io.Writer) int {
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
