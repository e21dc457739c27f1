package test

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/demo"
)

// TestDemo runs "simpleqd demo" in-process, shortened to a few seconds, with
// a plain (non-terminal) view, and checks that the numbers of its summary
// line are consistent: every job completed; every delivery is a success or
// a 429; after the deliveries already in flight when the limit hit, each
// round cost exactly one 429 (the probe); and the per-job estimate is
// waiting jobs × rounds + jobs.
func TestDemo(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	const jobs = 120
	s, err := demo.Run(context.Background(), demo.Options{
		Jobs: jobs, Concurrency: 10, Latency: 20 * time.Millisecond,
		Warmup: 200 * time.Millisecond, LimitFor: 2500 * time.Millisecond, RetryAfter: 500 * time.Millisecond,
		DurationLimit: 60 * time.Second, PlainEvery: 100 * time.Millisecond, Out: &out,
	})
	text := out.String()
	require.NoError(t, err, text)
	t.Log("\n" + text)

	require.NotContains(t, text, "\x1b[", "no ANSI escapes when the output is not a terminal")
	require.Contains(t, text, "| queue held until ", "the plain view shows the hold with its release time")

	m := regexp.MustCompile(`all done: (\d+)/(\d+) jobs completed in [\d.]+s; (\d+) probes; the queue was held (\d+) times\.`).
		FindStringSubmatch(text)
	require.NotNil(t, m, text)
	completed, total, probes, held := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3]), atoi(t, m[4])

	line := regexp.MustCompile(`simpleqd: ([\d,]+) deliveries, ([\d,]+) of them 429s \(([\d,]+) already in flight when the limit hit, ` +
		`then one probe per round; (\d+) rounds\)\. Per-job retry would have made ~([\d,]+) deliveries \(([\d,]+) waiting jobs × (\d+) rounds \+ ([\d,]+)\)\.`).
		FindStringSubmatch(text)
	require.NotNil(t, line, text)
	deliveries, limited, inFlight, rounds := atoi(t, line[1]), atoi(t, line[2]), atoi(t, line[3]), atoi(t, line[4])
	estimate, waiting, rounds2, jobs2 := atoi(t, line[5]), atoi(t, line[6]), atoi(t, line[7]), atoi(t, line[8])

	require.Equal(t, jobs, total)
	require.Equal(t, jobs, completed, "every job completed")
	require.Equal(t, jobs, jobs2)
	require.Equal(t, jobs+limited, deliveries, "every delivery was a success or a 429")
	require.GreaterOrEqual(t, rounds, 3, "a 2.5s limit with 0.5s Retry-After takes several rounds")
	require.LessOrEqual(t, limited, inFlight+rounds, "after the first wave, one 429 per round")
	require.Equal(t, limited, inFlight+rounds-1, "exactly: the first round's in-flight 429s, then one probe 429 per later round")
	require.LessOrEqual(t, inFlight, 10, "no more than concurrency were out when the limit hit")
	require.Equal(t, rounds, held)
	require.Equal(t, rounds, rounds2)
	require.Equal(t, rounds, probes, "one probe per hold: each ends with a probe, the last one succeeds")
	require.Equal(t, waiting*rounds+jobs, estimate)
	require.Greater(t, estimate, deliveries, "the point of the demo")

	require.Equal(t, demo.Summary{Jobs: jobs, Completed: jobs, Deliveries: deliveries, Limited: limited, FirstRound: inFlight,
		Rounds: rounds, Probes: probes, WaitingAtFirst429: waiting, PerJobEstimate: estimate, Elapsed: s.Elapsed, Finished: true}, s)
	require.Less(t, s.Elapsed, 30*time.Second)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	require.NoError(t, err)
	return n
}
