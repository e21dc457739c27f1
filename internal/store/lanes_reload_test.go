package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// keys.md §2: a delivery starts only if it fits its lane's limits. A
// reload that lowers flowKeys.concurrency or rateLimitMax reaches every
// script through its parameters; a lane that was placed ready under the
// old, higher limit must not start one more delivery over the new one.
func TestLanesLoweredLimitsHoldAtOnce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-lowered")
		q.FlowKeys.Concurrency = 3
		publishKeyed(t, s, q, "A", 6)
		c, err := s.Claim(ctx, q, 2) // the claim's batch stops A below its cap: A stays ready
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		q.FlowKeys.Concurrency = 1 // the reload
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, c.Jobs, "A has 2 in flight, over its new cap of 1")

		r := queue("lanes-lowered-rate")
		r.FlowKeys.RateLimitMax = 5
		r.FlowKeys.RateLimitWindow = time.Minute
		publishKeyed(t, s, r, "A", 6)
		c, err = s.Claim(ctx, r, 2)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		r.FlowKeys.RateLimitMax = 2
		c, err = s.Claim(ctx, r, 10)
		require.NoError(t, err)
		require.Empty(t, c.Jobs, "A started 2 in this window, its new rate limit")
	})
}
