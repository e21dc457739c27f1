// Command simpleqd runs a webhook job dispatcher daemon; see README.md.
//
//	simpleqd [serve] [--config FILE]   run a daemon (API + dispatcher)
//	simpleqd check --config FILE       validate a file, print the effective config
//	simpleqd demo                      show backpressure in ~15 s (package demo)
//	simpleqd publish|job|queues|…      operator commands over the API (package cli)
//
// The command tree and the daemon's supervised lifecycle live in package
// app; main only tunes the runtime and turns a run into an exit code.
package main

import (
	"io"
	"os"
	"runtime/debug"

	"github.com/simpleq/simpleqd/internal/app"
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

// run is the whole command line with args (without the program's name),
// returning the exit code; tests call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	return app.Main(args, stdout, stderr)
}
