package hold_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/hold"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true},
		{" 0 ", 0, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"0.25", 250 * time.Millisecond, true},
		{"7200", 2 * time.Hour, true},
		{"Thu, 01 Jan 2026 00:00:10 GMT", 10 * time.Second, true},
		{"Wed, 31 Dec 2025 23:59:00 GMT", 0, true},
		{"", 0, false},
		{"soon", 0, false},
		{"-5", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
	}
	for _, c := range cases {
		got, ok := hold.ParseRetryAfter(c.in, now)
		require.Equal(t, c.ok, ok, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	huge, ok := hold.ParseRetryAfter("1e30", now)
	require.True(t, ok)
	require.Greater(t, huge, 100*365*24*time.Hour)
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"30", "1.5", "Thu, 01 Jan 2026 00:00:10 GMT", "", "x", "-1", "1e400"} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := hold.ParseRetryAfter(s, now)
		if ok && d < 0 {
			t.Fatalf("negative duration %v for %q", d, s)
		}
	})
}

func TestIsBackpressure(t *testing.T) {
	t.Parallel()
	for _, c := range []int{429, 503, 529} {
		require.True(t, hold.IsBackpressure(c))
	}
	for _, c := range []int{200, 500, 502, 504, 404, 301} {
		require.False(t, hold.IsBackpressure(c))
	}
}
