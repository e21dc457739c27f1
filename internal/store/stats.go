package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Statistics (docs/control.md "Statistics"): the scripts that deliver and
// settle count what they did per queue in one-minute buckets on Redis'
// clock (lib.lua stats_flush); Stats reads them back.

// StatsRetention is how far back statistics are kept, and StatsResolution
// the width of one bucket (lib.lua STATS_MINUTES).
const (
	StatsRetention  = 24 * time.Hour
	StatsResolution = time.Minute
)

// StatsCounters are one bucket's counts.
type StatsCounters struct {
	// Success counts deliveries that succeeded: a standard-mode 2xx, or an
	// ack in ack mode.
	Success int64
	// Failed counts deliveries that failed: the webhook's non-2xx answer
	// (not backpressure), a timeout or connection error, or a nack.
	Failed int64
	// Lost counts deliveries nobody reported: expired leases and ack timeouts.
	Lost int64
	// Deferred counts backpressure: 429/503/529 answers and defer callbacks.
	Deferred int64
	// HTTP429 counts the 429 answers among Deferred.
	HTTP429 int64
	// Started counts deliveries started, Probes the probes among them.
	Started, Probes int64
	// Holds counts holds asked for: queue-scope defers and breaker trips.
	Holds int64
	// Dead counts jobs that died.
	Dead int64
	// LaneHolds counts lane holds asked for (keyed jobs' 429/503/529 and
	// key-scope defers, keys.md §3); LaneProbes the lane probes started.
	// Holds and Probes leave them out: those are the queue's.
	LaneHolds, LaneProbes int64
}

// add sums o into c.
func (c *StatsCounters) add(o StatsCounters) {
	c.Success += o.Success
	c.Failed += o.Failed
	c.Lost += o.Lost
	c.Deferred += o.Deferred
	c.HTTP429 += o.HTTP429
	c.Started += o.Started
	c.Probes += o.Probes
	c.Holds += o.Holds
	c.Dead += o.Dead
	c.LaneHolds += o.LaneHolds
	c.LaneProbes += o.LaneProbes
}

// StatsBucket is one minute of counts.
type StatsBucket struct {
	Start time.Time
	StatsCounters
	// HeldMS is how much of the minute the queue was held, in milliseconds,
	// from the hold windows asked for.
	HeldMS int64
}

// HoldWindow is a span a hold was asked for: from the first defer (or
// breaker trip) to the latest release asked while it lasted. A resume that
// ends a hold early does not shorten it.
type HoldWindow struct {
	From, Until time.Time
}

// Stats is a queue's statistics over [Since, Until), by minute.
type Stats struct {
	// Now is Redis' clock when read.
	Now          time.Time
	Since, Until time.Time
	// Buckets has one entry per minute of the range, oldest first, zero
	// counts included, so that charts need no gap filling.
	Buckets []StatsBucket
	Totals  StatsCounters
	// HeldMS sums the buckets' HeldMS.
	HeldMS int64
	Holds  []HoldWindow
}

// StatsParams are the window Stats reads.
type StatsParams struct {
	// Since and Until bound the window; zero: Until is now, Since an hour
	// before Until.
	Since, Until time.Time
}

// Stats reads queue q's statistics between p.Since and p.Until, on Redis'
// clock. Both are clamped to the retention; buckets are whole minutes,
// Since rounded down and Until up.
func (s *Store) Stats(ctx context.Context, q QueueParams, p StatsParams) (Stats, error) {
	since, until := p.Since, p.Until
	arg := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	keys := s.Keys(q.Name).List(s.statsKey(q.Name))
	res, err := s.runKeys(ctx, lua.Stats, q, keys, append(s.params(lua.Stats, q, 2), arg(since), arg(until)))
	if err != nil {
		return Stats{}, fmt.Errorf("stats of queue %s: %w", q.Name, err)
	}
	a := newReply(lua.Stats, q.Name, res, 5)
	const per = 12 // minute + 11 counters (lib.lua STATS_COUNTERS)
	a.want(a.len() == 5+int(a.int(4))*per, "want 12 values per minute")
	if err := a.err(); err != nil {
		return Stats{}, err
	}
	nowMS := a.int(0)
	out := Stats{Now: fromMS(nowMS)}
	sinceMS, untilMS := a.int(1), a.int(2)
	first, last := sinceMS/60000, untilMS/60000
	if last < first {
		last = first - 1
	}
	out.Since, out.Until = fromMS(first*60000), fromMS((last+1)*60000)
	out.Buckets = make([]StatsBucket, 0, last-first+1)
	for m := first; m <= last; m++ {
		out.Buckets = append(out.Buckets, StatsBucket{Start: fromMS(m * 60000)})
	}
	for i := 5; i+per <= a.len(); i += per {
		m := a.int(i)
		if m < first || m > last {
			continue
		}
		v := func(k int) int64 { return a.optInt(i + k) }
		b := &out.Buckets[m-first]
		b.StatsCounters = StatsCounters{Success: v(1), Failed: v(2), Lost: v(3), Deferred: v(4), HTTP429: v(5),
			Started: v(6), Probes: v(7), Holds: v(8), Dead: v(9), LaneHolds: v(10), LaneProbes: v(11)}
		out.Totals.add(b.StatsCounters)
	}
	if w := a.optStr(3); w != "" {
		for _, part := range strings.Split(w, ",") {
			a, b, ok := strings.Cut(part, "-")
			from, err1 := strconv.ParseInt(a, 10, 64)
			to, err2 := strconv.ParseInt(b, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			out.Holds = append(out.Holds, HoldWindow{From: fromMS(from), Until: fromMS(to)})
			out.addHeld(from, min(to, nowMS))
		}
	}
	if err := a.err(); err != nil {
		return Stats{}, err
	}
	return out, nil
}

// addHeld adds the held span [from, to) ms to the buckets it overlaps.
func (st *Stats) addHeld(from, to int64) {
	for i := range st.Buckets {
		b := &st.Buckets[i]
		start := b.Start.UnixMilli()
		lo, hi := max(from, start), min(to, start+60000)
		if hi > lo {
			b.HeldMS += hi - lo
			st.HeldMS += hi - lo
		}
	}
}
