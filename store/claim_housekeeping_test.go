package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/store"
)

// TestClaimZeroRunsHousekeepingOnly: a claim with max 0 (a daemon whose slots
// are all busy) takes no job, even a due one, but ends lifetimes on time and
// reports when housekeeping is next needed, never "now" for due jobs it cannot
// take (which would make the caller spin).
func TestClaimZeroRunsHousekeepingOnly(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("busy")
		q.JobLifetime = 100 * time.Millisecond
		id := publish(t, s, q, `{}`)

		c, err := s.Claim(ctx, q, 0)
		require.NoError(t, err)
		require.Equal(t, store.Busy, c.Word)
		require.Empty(t, c.Jobs)
		require.Greater(t, c.WakeIn, time.Duration(0), "a due job it cannot take must not wake it at once")
		require.LessOrEqual(t, c.WakeIn, 100*time.Millisecond, "the lifetime end needs housekeeping")
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, j.Status)

		b.advance(150 * time.Millisecond)
		c, err = s.Claim(ctx, q, 0)
		require.NoError(t, err)
		require.Equal(t, store.Busy, c.Word)
		require.Empty(t, c.Jobs)
		j, err = s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusDead, j.Status)
		require.Equal(t, "lifetime_exceeded", *j.DeadReason)
	})
}
