package cronspec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestParseForms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ expr, after, next string }{
		{"*/15 * * * *", "2026-01-01T00:07:00Z", "2026-01-01T00:15:00Z"},
		{"30 * * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:00:30Z"}, // seconds first
		{"@every 90s", "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"},
		{"@daily", "2026-01-01T10:00:00Z", "2026-01-02T00:00:00Z"},
	} {
		tm, err := Parse(c.expr, "")
		require.NoError(t, err, c.expr)
		require.Equal(t, utc(c.next), tm.Next(utc(c.after)), c.expr)
	}
	for _, bad := range []string{"", "* * *", "61 * * * *", "@every 10ms", "@every nope", "CRON_TZ=UTC * * * * *", "@sometimes"} {
		_, err := Parse(bad, "UTC")
		require.Error(t, err, bad)
	}
	_, err := Parse("* * * * *", "Mars/Olympus")
	require.ErrorContains(t, err, "IANA")
	_, err = Parse("* * * * *", "Local")
	require.Error(t, err)
}

// DST in America/New_York: on 2026-03-08 the clock jumps from 02:00 to
// 03:00 (02:30 does not exist), on 2026-11-01 it goes from 02:00 back to
// 01:00 (01:30 happens twice). As robfig/cron v3 computes it: a daily tick
// whose wall time falls in the gap is skipped that day, a repeated wall
// time fires once (its first occurrence, EDT), and hourly ticks follow the
// wall clock.
func TestDSTTransitions(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)

	daily, err := Parse("30 2 * * *", "America/New_York")
	require.NoError(t, err)
	// Spring forward: 2026-03-07 02:30 EST, then 2026-03-08 03:00 EDT (the
	// gap), then 2026-03-09 02:30 EDT.
	tick := daily.Next(utc("2026-03-07T00:00:00Z"))
	require.Equal(t, time.Date(2026, 3, 7, 2, 30, 0, 0, ny).UTC(), tick)
	tick = daily.Next(tick)
	require.Equal(t, time.Date(2026, 3, 9, 2, 30, 0, 0, ny).UTC(), tick, "02:30 does not exist on 03-08: skipped")
	require.Equal(t, utc("2026-03-09T06:30:00Z"), tick, "EDT is UTC-4")

	// Fall back: 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST);
	// the daily tick fires at both.
	fall, err := Parse("30 1 * * *", "America/New_York")
	require.NoError(t, err)
	tick = fall.Next(utc("2026-11-01T00:00:00Z"))
	require.Equal(t, utc("2026-11-01T05:30:00Z"), tick)
	tick = fall.Next(tick)
	require.Equal(t, utc("2026-11-01T06:30:00Z"), tick, "the repeated 01:30 fires again (EST)")
	tick = fall.Next(tick)
	require.Equal(t, utc("2026-11-02T06:30:00Z"), tick)

	// An hourly schedule keeps firing every real hour through both changes
	// except where a wall hour is missing or repeated.
	hourly, err := Parse("0 * * * *", "America/New_York")
	require.NoError(t, err)
	var ticks []time.Time
	for tk := utc("2026-03-08T05:30:00Z"); len(ticks) < 3; {
		tk = hourly.Next(tk)
		ticks = append(ticks, tk)
	}
	require.Equal(t, []time.Time{utc("2026-03-08T06:00:00Z"), utc("2026-03-08T07:00:00Z"), utc("2026-03-08T08:00:00Z")}, ticks,
		"01:00 EST, then 03:00 EDT: one real hour apart")
}

// Ticks missed while no daemon ran are caught up as one: the latest.
func TestLatestCatchesUpOnce(t *testing.T) {
	t.Parallel()
	every, err := Parse("@every 1s", "")
	require.NoError(t, err)
	next := utc("2026-01-01T00:00:00Z")
	tick, after := every.Latest(next, utc("2026-01-01T00:00:10.5Z"))
	require.Equal(t, utc("2026-01-01T00:00:10Z"), tick)
	require.Equal(t, utc("2026-01-01T00:00:11Z"), after)
	tick, _ = every.Latest(next, next)
	require.Equal(t, next, tick, "a due tick is itself")

	minutely, err := Parse("* * * * *", "Europe/Paris")
	require.NoError(t, err)
	tick, after = minutely.Latest(next, utc("2026-01-09T12:34:56Z")) // over 48 h late
	require.Equal(t, utc("2026-01-09T12:34:00Z"), tick)
	require.Equal(t, utc("2026-01-09T12:35:00Z"), after)

	yearly, err := Parse("0 0 1 1 *", "")
	require.NoError(t, err)
	tick, after = yearly.Latest(next, utc("2026-06-01T00:00:00Z"))
	require.Equal(t, next, tick)
	require.Equal(t, utc("2027-01-01T00:00:00Z"), after)
}
