package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 12: "12", 999: "999", 1000: "1,000", 2700: "2,700", 1234567: "1,234,567", -4500: "-4,500"} {
		require.Equal(t, want, thousands(n))
	}
}

func TestSummaryLine(t *testing.T) {
	s := Summary{Jobs: 300, Deliveries: 312, Limited: 12, FirstRound: 8, Rounds: 5, WaitingAtFirst429: 280, PerJobEstimate: 1700}
	require.Equal(t, "simpleqd: 312 deliveries, 12 of them 429s (8 already in flight when the limit hit, then one probe per round; 5 rounds)."+
		" Per-job retry would have made ~1,700 deliveries (280 waiting jobs × 5 rounds + 300).", s.Line())
	require.Equal(t, "simpleqd: 300 deliveries, 0 of them 429s.", Summary{Jobs: 300, Deliveries: 300}.Line())
}

func TestRoundsSplitOnQuietGaps(t *testing.T) {
	p := newProvider(Options{RetryAfter: time.Second})
	t0 := time.Now()
	for _, ms := range []int{0, 3, 5, 40, 1100, 2300, 3500} {
		p.limitedAt = append(p.limitedAt, t0.Add(time.Duration(ms)*time.Millisecond))
	}
	require.Equal(t, []int{4, 1, 1, 1}, p.rounds())
}

func TestSumCounter(t *testing.T) {
	text := `# HELP simpleqd_probes_total x
simpleqd_probes_total{queue="demo",result="backpressure"} 4
simpleqd_probes_total{queue="demo",result="success"} 1
simpleqd_probes_total{queue="other",result="success"} 7
simpleqd_probes_total_other{queue="demo"} 9
`
	require.Equal(t, 5, sumCounter(text, "simpleqd_probes_total", `queue="demo"`))
}

func TestTerminalViewRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	o := DefaultOptions()
	o.Out, o.TTY = &out, true
	v := newView(o, newProvider(o))
	v.header()
	now := time.Now()
	v.frame(snapshot{at: now, hold: "held", until: now.Add(1500 * time.Millisecond), probes: 2,
		prov: providerStats{Done: 150, Deliveries: 170, Limited: 20, Phase: phaseLimiting, LimitEnds: now.Add(3 * time.Second)}}, false)
	v.frame(snapshot{at: now, hold: "probing", probe: "job_1_demo", probes: 2}, false)
	v.summary(Summary{Jobs: 300, Completed: 300, Finished: true})
	s := out.String()
	require.True(t, strings.HasPrefix(s, "simpleqd demo: 300 jobs"))
	require.Contains(t, s, hideCursor)
	require.Contains(t, s, "[███████████████░░░░░░░░░░░░░░░] 150/300")
	require.Contains(t, s, "held until ")
	require.Contains(t, s, "(1.5s)")
	require.Contains(t, s, "rate limiting: 429, Retry-After 2.0s (3.0s left)")
	require.Contains(t, s, "\x1b[6F", "the second frame moves up over the first")
	require.Contains(t, s, "probing: job_1_demo is the probe")
	require.Contains(t, s, showCursor+"\nall done: 300/300")
}

func TestMainRejectsBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, Main(context.Background(), []string{"--jobs", "0"}, &out, &errb))
	require.Contains(t, errb.String(), "--jobs")
	require.Equal(t, 2, Main(context.Background(), []string{"extra"}, &out, &errb))
	require.False(t, isTerminal(&out))
}
