// Package cli implements simpleqd's operator subcommands (publish, job,
// queues, queue, dead, replay, pause, resume). They talk to a daemon's HTTP
// API, like any other client, so they work against any daemon of a fleet and
// need no access to Redis.
//
// Output is an aligned table or key/value list for people, or with --json
// the API's own JSON, unchanged, for scripts. Errors print the API's message
// (and every field error of a 400) on stderr, and the exit code says what
// kind of failure it was (ExitOK, ExitError, ExitUsage, ExitNotFound), so a
// script can tell "no such job" from "the daemon is down".
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes of every subcommand.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitError: the API refused the request, or could not be reached.
	ExitError = 1
	// ExitUsage: the command line itself is wrong; nothing was sent.
	ExitUsage = 2
	// ExitNotFound: the queue or job does not exist (an HTTP 404).
	ExitNotFound = 3
)

// Environment variables the subcommands read. The API key is read only from
// the environment, never from a flag, so it does not end up in shell
// history or in the process list.
const (
	EnvURL    = "SIMPLEQ_URL"
	EnvAPIKey = "SIMPLEQ_API_KEY"
)

// DefaultURL is the daemon address used when neither --url nor SIMPLEQ_URL
// is given: the listen address of the example configuration.
const DefaultURL = "http://127.0.0.1:8080"

// requestTimeout bounds one API call. Replaying a whole dead-letter list is
// the slowest call and finishes well within it.
const requestTimeout = 60 * time.Second

// Env is what a subcommand needs from its process. It is injected, rather
// than read from package os, so tests run commands in-process against a fake
// API.
type Env struct {
	Stdout, Stderr io.Writer
	// Stdin is read by "publish --payload-file -".
	Stdin io.Reader
	// Getenv reads SIMPLEQ_URL and SIMPLEQ_API_KEY; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient makes the API calls; nil means one with requestTimeout.
	HTTPClient *http.Client
	// Now is used for relative times ("in 4.2s"); nil means time.Now.
	Now func() time.Time
}

// command is one subcommand: its usage line, a one-line summary, and a
// function that defines its flags and returns the code to run once they are
// parsed.
type command struct {
	usage   string
	summary string
	// minArgs and maxArgs bound the positional arguments (maxArgs -1: any).
	minArgs, maxArgs int
	setup            func(fs *pflag.FlagSet) func(ctx context.Context, c *call) error
}

var commands = map[string]command{
	"publish": {usage: "publish QUEUE [--payload JSON | --payload-file FILE] [--idempotency-key K] [--delay SECONDS] [--priority P] [--replace-key K] [--flow-key K]",
		summary: "publish one job (payload defaults to {}; --payload-file - reads stdin)", minArgs: 1, maxArgs: 1, setup: publishCmd},
	"job":    {usage: "job ID", summary: "show a job with its history", minArgs: 1, maxArgs: 1, setup: jobCmd},
	"queues": {usage: "queues", summary: "list every queue with its counts and hold state", maxArgs: 0, setup: queuesCmd},
	"queue": {usage: queueUsage, summary: "show one queue's settings, counts and hold state; create, set (change) or delete a queue over the API",
		minArgs: 1, maxArgs: 2, setup: queueWriteCmd},
	"dead": {usage: "dead QUEUE [--limit N] [--cursor C]", summary: "list a queue's dead-lettered jobs, newest first",
		minArgs: 1, maxArgs: 1, setup: deadCmd},
	"replay": {usage: "replay QUEUE (--all | ID...)", summary: "move dead jobs back to pending", minArgs: 1, maxArgs: -1, setup: replayCmd},
	"cancel": {usage: cancelUsage, summary: "cancel a job (dead / cancelled at once, aborted if in flight), or a queue's jobs in bulk",
		maxArgs: 1, setup: cancelCmd},
	"pause": {usage: "pause QUEUE [--reason R]", summary: "stop delivering a queue until resume", minArgs: 1, maxArgs: 1, setup: pauseCmd},
	"resume": {usage: "resume QUEUE", summary: "end a pause, or cut a backpressure hold short (the queue probes)",
		minArgs: 1, maxArgs: 1, setup: resumeCmd},
	"jobs": {usage: "jobs QUEUE --status S [--limit N] [--cursor C]", summary: "list a queue's jobs in one status, in delivery order (completed and dead: newest first)",
		maxArgs: 1, setup: jobsCmd},
	"stats": {usage: "stats QUEUE [--since T] [--until T]", summary: "show a queue's fleet-wide deliveries, 429s, holds, probes and dead jobs per minute (default: the last hour)",
		maxArgs: 1, setup: statsCmd},
	"keys": {usage: keysUsage, summary: "list a queue's lanes (flow keys), show one, set or delete its override, resume a held lane",
		minArgs: 2, maxArgs: 3, setup: keysCmd},
	"schedule": {usage: scheduleUsage, summary: "create, list, show, delete, pause or resume schedules (cron jobs that publish to a queue)",
		minArgs: 1, maxArgs: 2, setup: scheduleCmd},
}

// IsCommand reports whether name is one of this package's subcommands.
func IsCommand(name string) bool {
	_, ok := commands[name]
	return ok
}

// Usage writes one line per subcommand and the flags and variables they
// share, for the binary's help text.
func Usage(w io.Writer) {
	for _, n := range names() {
		fmt.Fprintf(w, "  simpleqd %s\n        %s\n", commands[n].usage, commands[n].summary)
	}
	fmt.Fprint(w, Footer)
}

// Footer says what every operator command shares: the flags, the variables
// and the exit codes.
var Footer = fmt.Sprintf("\n  Operator commands take --url URL (default $%s or %s) and --json (print the API's JSON);\n"+
	"  they send $%s as the Bearer key. Exit codes: 0 ok, 1 API or network error, 2 usage, 3 not found.\n",
	EnvURL, DefaultURL, EnvAPIKey)

func names() []string {
	out := make([]string, 0, len(commands))
	for n := range commands {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ExitCode is an error that carries the exit code a command ended with,
// after it printed what went wrong.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// Commands returns the operator subcommands as cobra commands running
// against env, for the binary's command tree. A command that fails prints
// its message and returns an ExitCode; a command line cobra itself cannot
// parse returns a *UsageError (print it with ReportUsage).
func Commands(ctx context.Context, env Env) []*cobra.Command {
	env = env.withDefaults()
	out := make([]*cobra.Command, 0, len(commands))
	for _, n := range names() {
		out = append(out, newCommand(ctx, n, commands[n], env))
	}
	return out
}

func newCommand(ctx context.Context, name string, cmd command, env Env) *cobra.Command {
	cc := &cobra.Command{
		Use:                   cmd.usage,
		Short:                 cmd.summary,
		Args:                  cobra.ArbitraryArgs, // checked below, with this package's messages
		SilenceUsage:          true,
		SilenceErrors:         true,
		DisableFlagsInUseLine: true,
	}
	cc.SetOut(env.Stdout)
	cc.SetErr(env.Stderr)
	fs := cc.Flags()
	fs.SortFlags = false
	defURL := env.Getenv(EnvURL)
	if defURL == "" {
		defURL = DefaultURL
	}
	base := fs.String("url", defURL, "base URL of a simpleqd daemon (env "+EnvURL+")")
	asJSON := fs.Bool("json", false, "print the API's JSON answer instead of a table")
	runner := cmd.setup(fs)
	cc.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &UsageError{Command: name, Usage: cmd.usage, Msg: err.Error()}
	})
	cc.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(env.Stdout, "usage: simpleqd %s\n  %s\n\nflags:\n%s", cmd.usage, cmd.summary, c.Flags().FlagUsages())
	})
	cc.RunE = func(_ *cobra.Command, pos []string) error {
		c := &call{name: name, env: env}
		err := func() error {
			switch {
			case len(pos) < cmd.minArgs:
				return usagef("missing argument")
			case cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs:
				return usagef("unexpected argument %q", pos[cmd.maxArgs])
			}
			api, err := newAPIClient(*base, env.Getenv(EnvAPIKey), env.HTTPClient)
			if err != nil {
				return err
			}
			c.args, c.json, c.api = pos, *asJSON, api
			return runner(ctx, c)
		}()
		if code := c.report(err, cmd.usage); code != ExitOK {
			return ExitCode(code)
		}
		return nil
	}
	return cc
}

// UsageError is a command line that could not be parsed; nothing was sent.
type UsageError struct {
	// Command and Usage name the subcommand and its usage line; Msg says
	// what is wrong.
	Command, Usage, Msg string
}

func (e *UsageError) Error() string { return e.Msg }

// Report prints the mistake with the command's usage line and returns
// ExitUsage.
func (e *UsageError) Report(w io.Writer) int {
	fmt.Fprintf(w, "simpleqd %s: %s\nusage: simpleqd %s\n", e.Command, e.Msg, e.Usage)
	return ExitUsage
}

func (env Env) withDefaults() Env {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Stdin == nil {
		env.Stdin = os.Stdin
	}
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.HTTPClient == nil {
		env.HTTPClient = &http.Client{Timeout: requestTimeout}
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	return env
}

// Run parses args for the subcommand name, runs it and returns the exit
// code. Results go to env.Stdout, messages and errors to env.Stderr.
func Run(ctx context.Context, name string, args []string, env Env) int {
	env = env.withDefaults()
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(env.Stderr, "simpleqd: unknown command %q\n", name)
		return ExitUsage
	}
	cc := newCommand(ctx, name, cmd, env)
	cc.SetArgs(args)
	return ExitCodeOf(cc.Execute(), env.Stderr)
}

// ExitCodeOf maps what a command's Execute returned to the process' exit
// code, printing a usage mistake that was not printed yet.
func ExitCodeOf(err error, stderr io.Writer) int {
	var code ExitCode
	var ue *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &ue):
		return ue.Report(stderr)
	default:
		fmt.Fprintf(stderr, "simpleqd: %v\n", err)
		return ExitUsage
	}
}

// call is one running subcommand: its parsed command line and API access.
type call struct {
	name string
	env  Env
	args []string
	json bool
	api  *apiClient
}

// usageError is a command line mistake found after parsing; nothing was sent.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// report prints err (if any) and maps it to an exit code.
func (c *call) report(err error, usage string) int {
	var ue *usageError
	var ae *APIError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(c.env.Stderr, "simpleqd %s: %s\nusage: simpleqd %s\n", c.name, ue.msg, usage)
		return ExitUsage
	case errors.As(err, &ae):
		fmt.Fprintf(c.env.Stderr, "simpleqd %s: %s\n", c.name, ae.Describe())
		if ae.Status == http.StatusNotFound {
			return ExitNotFound
		}
		return ExitError
	default:
		fmt.Fprintf(c.env.Stderr, "simpleqd %s: %v\n", c.name, err)
		return ExitError
	}
}

// newAPIClient validates the base URL, so a typo is a usage error rather
// than a confusing network error.
func newAPIClient(base, key string, hc *http.Client) (*apiClient, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--url %q is not an http:// or https:// URL", base)
	}
	return &apiClient{base: u, key: key, http: hc}, nil
}
