package demo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Main is "simpleqd demo [flags]": it parses flags, sends the daemon's logs
// (console format) to a file so they do not garble the view, runs the demo
// (the queue-level part, then the flow keys part, or the one --part names)
// and returns the exit code: 0 when every job completed, 1 when the run
// failed or was stopped, 2 for bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	d := DefaultOptions()
	fs := flag.NewFlagSet("simpleqd demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := d
	fs.IntVar(&o.Jobs, "jobs", d.Jobs, "jobs to publish")
	fs.IntVar(&o.Concurrency, "concurrency", d.Concurrency, "the queue's concurrency")
	fs.DurationVar(&o.Latency, "latency", d.Latency, "how long the provider takes per request")
	fs.DurationVar(&o.Warmup, "warmup", d.Warmup, "healthy time before the provider's rate limit starts")
	fs.DurationVar(&o.LimitFor, "limit-for", d.LimitFor, "how long the provider answers 429")
	fs.DurationVar(&o.RetryAfter, "retry-after", d.RetryAfter, "the Retry-After the provider sends with each 429")
	fs.DurationVar(&o.DurationLimit, "duration-limit", d.DurationLimit, "stop the demo after this long")
	logPath := fs.String("log", filepath.Join(os.TempDir(), "simpleqd-demo.log"), "file for the daemon's logs (console format)")
	plain := fs.Bool("plain", false, "print plain progress lines even on a terminal")
	part := fs.String("part", "both", "which part to play: queue (one queue held by 429s), keys (two tenants, one held), or both")
	ko := DefaultKeysOptions()
	fs.IntVar(&ko.JobsPerTenant, "tenant-jobs", ko.JobsPerTenant, "jobs per tenant in the flow keys part")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "simpleqd demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *part != "queue" && *part != "keys" && *part != "both" {
		fmt.Fprintf(stderr, "simpleqd demo: --part must be queue, keys or both (got %q)\n", *part)
		return 2
	}
	if o.Jobs < 1 || o.Concurrency < 1 || ko.JobsPerTenant < 1 {
		fmt.Fprintln(stderr, "simpleqd demo: --jobs, --concurrency and --tenant-jobs must be at least 1")
		return 2
	}
	o.Out = stdout
	o.TTY = !*plain && isTerminal(stdout)

	log, closeLog, err := fileLogger(*logPath)
	if err != nil {
		fmt.Fprintf(stderr, "simpleqd demo: %v\n", err)
		return 1
	}
	defer closeLog()
	o.Logger = log

	if *part != "keys" {
		_, err = Run(ctx, o)
	}
	if err == nil && *part != "queue" {
		ko.Out, ko.TTY, ko.Logger, ko.DurationLimit = o.Out, o.TTY, o.Logger, o.DurationLimit
		_, err = RunKeys(ctx, ko)
	}
	fmt.Fprintf(stdout, "The daemon's log (holds, probes, reopening) is in %s.\n", *logPath)
	if err != nil {
		fmt.Fprintf(stderr, "simpleqd demo: %v\n", err)
		return 1
	}
	return 0
}

// isTerminal reports whether w is a character device (a terminal), where
// the view can redraw in place. golang.org/x/term is not a dependency of
// this module; a character-device check is enough here, and a redirect to
// a file or pipe is correctly seen as "not a terminal".
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// fileLogger logs in console format, at info, to path (truncated first so
// the file holds this run only).
func fileLogger(path string) (*zap.Logger, func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open the log file: %w", err)
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(f), zapcore.InfoLevel)
	log := zap.New(core)
	return log, func() { _ = log.Sync(); _ = f.Close() }, nil
}
