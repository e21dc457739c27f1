package demo

import (
	"fmt"
	"strings"
	"time"
)

// ANSI escapes of the live view: hide/show the cursor, move to the start
// of the line n lines up, clear a line.
const (
	hideCursor = "\x1b[?25l"
	showCursor = "\x1b[?25h"
	lineUp     = "\x1b[%dF"
	clearLine  = "\x1b[2K"
	barWidth   = 30
)

// view renders frames: redrawn in place on a terminal, a plain line every
// PlainEvery otherwise.
type view struct {
	o       Options
	prov    *provider
	drawn   int // lines of the last frame on a terminal
	printed time.Time
	last    snapshot
}

func newView(o Options, prov *provider) *view {
	return &view{o: o, prov: prov, last: snapshot{probes: -1}}
}

func (v *view) header() {
	o := v.o
	fmt.Fprintf(v.o.Out, "simpleqd demo: %d jobs to one queue (concurrency %d), delivered to a simulated provider\n", o.Jobs, o.Concurrency)
	fmt.Fprintf(v.o.Out, "that rate-limits after %s: it answers 429 with Retry-After: %s for %s, then recovers.\n\n",
		short(o.Warmup), short(o.RetryAfter), short(o.LimitFor))
	if v.o.TTY {
		fmt.Fprint(v.o.Out, hideCursor)
	}
}

// frame shows s; final forces a plain line even between intervals.
func (v *view) frame(s snapshot, final bool) {
	if s.probes < 0 {
		s.probes = v.last.probes // keep the last good count on a failed scrape
	}
	if s.hold == "" {
		s.hold, s.until, s.probe = v.last.hold, v.last.until, v.last.probe
	}
	v.last = s
	if !v.o.TTY {
		if final || v.printed.IsZero() || s.at.Sub(v.printed) >= v.o.PlainEvery {
			v.printed = s.at
			fmt.Fprintln(v.o.Out, v.plainLine(s))
		}
		return
	}
	lines := v.lines(s)
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, lineUp, v.drawn)
	}
	for _, l := range lines {
		b.WriteString(clearLine + l + "\n")
	}
	v.drawn = len(lines)
	fmt.Fprint(v.o.Out, b.String())
}

func (v *view) lines(s snapshot) []string {
	jobs := v.o.Jobs
	done := s.prov.Done
	filled := barWidth * done / max(jobs, 1)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", barWidth-filled)
	probes := "-"
	if s.probes >= 0 {
		probes = fmt.Sprint(s.probes)
	}
	return []string{
		fmt.Sprintf("  completed   [%s] %d/%d", bar, done, jobs),
		"  queue       " + holdPhrase(s),
		"  provider    " + v.providerPhrase(s),
		fmt.Sprintf("  probes      %s sent", probes),
		fmt.Sprintf("  deliveries  %d made, %d answered 429", s.prov.Deliveries, s.prov.Limited),
		fmt.Sprintf("  elapsed     %s", short(s.elapsed)),
	}
}

func (v *view) plainLine(s snapshot) string {
	probes := "?"
	if s.probes >= 0 {
		probes = fmt.Sprint(s.probes)
	}
	return fmt.Sprintf("[%6s] completed %d/%d | queue %s | probes %s | deliveries %d, 429s %d",
		short(s.elapsed), s.prov.Done, v.o.Jobs, holdPhrase(s), probes, s.prov.Deliveries, s.prov.Limited)
}

// holdPhrase says what the queue is doing, with the release countdown.
func holdPhrase(s snapshot) string {
	switch s.hold {
	case "held":
		if s.until.IsZero() {
			return "held"
		}
		left := max(s.until.Sub(s.at), 0)
		return fmt.Sprintf("held until %s (%s)", s.until.Local().Format("15:04:05.0"), short(left))
	case "probing":
		if s.probe != "" {
			return "probing: " + s.probe + " is the probe"
		}
		return "probing: the next ready job is the probe"
	case "open":
		return "open: delivering"
	case "":
		return "?"
	default:
		return s.hold
	}
}

func (v *view) providerPhrase(s snapshot) string {
	switch s.prov.Phase {
	case phaseIdle:
		return "waiting for the first delivery"
	case phaseHealthy:
		return "healthy"
	case phaseLimiting:
		return fmt.Sprintf("rate limiting: 429, Retry-After %s (%s left)", short(v.o.RetryAfter), short(s.prov.LimitEnds.Sub(s.at)))
	default:
		return "recovered"
	}
}

// summary ends the view and prints the closing lines.
func (v *view) summary(s Summary) {
	if v.o.TTY {
		fmt.Fprint(v.o.Out, showCursor)
	}
	fmt.Fprintln(v.o.Out)
	status := "all done"
	if !s.Finished {
		status = "stopped"
	}
	fmt.Fprintf(v.o.Out, "%s: %d/%d jobs completed in %s; %d probes; the queue was held %d times.\n",
		status, s.Completed, s.Jobs, short(s.Elapsed), s.Probes, s.Rounds)
	fmt.Fprintln(v.o.Out, s.Line())
}

// short renders a duration with one decimal of seconds.
func short(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
