// Package cronspec parses a schedule's cron expression and time zone and
// computes its ticks (runtime.md §4), with robfig/cron v3 and the IANA
// database rather than a parser of our own. It depends on nothing else in
// simpleqd, so config (file schedules), the API and the scheduler share it.
package cronspec

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts standard five-field cron, six fields with seconds first,
// and descriptors (@every <duration>, @hourly, @daily...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Timing is a parsed cron expression in its time zone.
type Timing struct {
	sched cron.Schedule
	loc   *time.Location
	// every is the interval of an @every schedule (0 otherwise): its ticks
	// are counted from the previous one, not from the clock.
	every time.Duration
}

// Parse parses a schedule's cron expression and IANA time zone ("" is UTC).
// The errors are messages for a user: they name what is wrong.
func Parse(expr, timezone string) (*Timing, error) {
	tz, err := LoadZone(timezone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("is required")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("must not name a time zone; use timezone")
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		// robfig/cron rounds an interval down to whole seconds (and up to
		// one second): refuse what it would silently change.
		iv, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("@every needs a duration such as 30s, 5m or 1h30m: %v", err)
		}
		if iv < time.Second || iv%time.Second != 0 {
			return nil, fmt.Errorf("@every must be a whole number of seconds, at least 1s (got %s)", iv)
		}
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("is not a valid cron expression (five fields, six with seconds first, or @every <duration>): %v", err)
	}
	t := &Timing{sched: s, loc: tz}
	switch x := s.(type) {
	case *cron.SpecSchedule:
		x.Location = tz
	case cron.ConstantDelaySchedule:
		t.every = x.Delay
	}
	return t, nil
}

// zones caches loaded locations: LoadLocation reads the zone database.
var zones sync.Map

// LoadZone loads an IANA time zone; "" and "UTC" are UTC. "Local" is
// refused: a fleet's daemons may not share one.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("must be an IANA time zone name such as Europe/Paris (Local differs between machines)")
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("is not a known IANA time zone: %q", name)
	}
	zones.Store(name, l)
	return l, nil
}

// Every is the interval of an @every schedule, 0 for any other: the
// scheduler's script computes such a schedule's ticks itself (tick + k *
// interval, as Latest does), with no round trip to a daemon per tick.
func (t *Timing) Every() time.Duration { return t.every }

// Next is the first tick strictly after t.
func (t *Timing) Next(after time.Time) time.Time {
	return t.sched.Next(after.In(t.loc)).UTC()
}

// maxSteps bounds the ticks walked to find the latest missed one.
const maxSteps = 100000

// Latest returns the latest tick at or before now, walking from next (a
// tick, due: next <= now), and the tick after it. Ticks missed while no
// daemon ran are caught up as this one tick.
func (t *Timing) Latest(next, now time.Time) (tick, after time.Time) {
	tick = next
	if t.every > 0 {
		// @every ticks are counted from the previous tick in whole seconds.
		if k := now.Sub(next) / t.every; k > 0 {
			tick = next.Add(k * t.every)
		}
		return tick, t.Next(tick)
	}
	if now.Sub(next) > 48*time.Hour {
		// Cron ticks depend on the clock only: start two days back rather
		// than walk a long outage tick by tick.
		if c := t.Next(now.Add(-48 * time.Hour)); !c.After(now) && c.After(tick) {
			tick = c
		}
	}
	for i := 0; i < maxSteps; i++ {
		n := t.Next(tick)
		if n.IsZero() || n.After(now) {
			return tick, n
		}
		tick = n
	}
	return tick, t.Next(tick)
}

// NeverMS stands for "no next tick" (a cron that matches no date): far
// enough never to come, small enough for a millisecond score.
var NeverMS = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
