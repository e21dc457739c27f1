package test

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/demo"
)

// TestDemoFlowKeys runs the flow keys part of "simpleqd demo" in-process,
// shortened, with a plain view: both tenants' jobs complete; the limited
// tenant's lane was held, and after the deliveries already out when its
// limit hit each round cost it exactly one 429 (its probe); the other
// tenant kept completing jobs meanwhile; the queue itself was never held.
func TestDemoFlowKeys(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	const jobs = 80
	s, err := demo.RunKeys(context.Background(), demo.KeysOptions{
		JobsPerTenant: jobs, Concurrency: 6, Latency: 20 * time.Millisecond,
		Warmup: 150 * time.Millisecond, LimitFor: 3 * time.Second, RetryAfter: 400 * time.Millisecond,
		DurationLimit: 60 * time.Second, PlainEvery: 100 * time.Millisecond, Out: &out,
	})
	text := out.String()
	require.NoError(t, err, text)
	t.Log("\n" + text)
	require.NotContains(t, text, "\x1b[", "no ANSI escapes when the output is not a terminal")
	require.Regexp(t, `globex \d+/80 lane open: delivering`, text, "the plain view shows each tenant's lane")
	require.Regexp(t, `acme \d+/80 lane held until `, text, "the limited tenant's lane is shown held with its release")
	require.Regexp(t, `queue open: delivering`, text)

	require.True(t, s.Finished)
	require.Equal(t, jobs, s.Limited.Completed)
	require.Equal(t, jobs, s.Flowing.Completed)
	require.Zero(t, s.Flowing.Limited, "globex is never limited")
	require.Equal(t, jobs+s.Limited.Limited, s.Limited.Deliveries, "every delivery of acme was a success or a 429")
	require.Equal(t, jobs, s.Flowing.Deliveries, "globex: one delivery per job")
	// On a quiet machine a 3 s limit with 0.4 s Retry-After takes about 7
	// rounds; under a loaded suite the deliveries run late and fewer
	// rounds fall inside the limit (one was seen with 1.5 s).
	require.GreaterOrEqual(t, s.Limited.Rounds, 2, "a 3s limit with 0.4s Retry-After takes several rounds")
	require.Equal(t, s.Limited.Limited, s.Limited.FirstRound+s.Limited.Rounds-1,
		"the first round's in-flight 429s, then one probe 429 per later round")
	require.GreaterOrEqual(t, s.LaneProbes, s.Limited.Rounds, "each hold ends with a probe")
	require.True(t, s.LaneHeldSeen)
	require.False(t, s.QueueHeldSeen, "a tenant's 429 never holds the queue")
	require.Positive(t, s.FlowingWhileLimited, "globex flowed while acme was limited")

	m := regexp.MustCompile(`flow keys: acme's lane was held (\d+) times`).FindStringSubmatch(text)
	require.NotNil(t, m, text)
	require.Equal(t, s.Limited.Rounds, atoi(t, m[1]))
	require.Contains(t, text, "the queue itself was never held.")
}
