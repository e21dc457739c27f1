package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
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

// Jobs waiting behind a hold die when their lifetime ends: pending ones found
// by the due-order scan, retried ones through the lifetime index.
func TestLifetimeEndsWhileHeld(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		q.JobLifetime = 150 * time.Millisecond
		q.Backoff.Base = time.Millisecond
		q.Backoff.Max = time.Millisecond
		retried := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: retried, Token: c.Jobs[0].Token, Kind: store.OutcomeFail, StatusCode: 500}})
		require.NoError(t, err)
		pending := publish(t, s, q, `{}`)
		holder := publish(t, s, q, `{}`)
		c, err = s.Claim(ctx, q, 3)
		require.NoError(t, err)
		var tok string
		var rest []store.Outcome
		for _, j := range c.Jobs {
			if j.ID == holder {
				tok = j.Token
			} else {
				rest = append(rest, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeRelease})
			}
		}
		require.NotEmpty(t, tok)
		_, err = s.Settle(ctx, q, rest) // back to waiting, untouched
		require.NoError(t, err)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: holder, Token: tok, Kind: store.OutcomeDefer, RetryAfter: time.Hour}})
		require.NoError(t, err)

		b.advance(200 * time.Millisecond)
		held, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Held, held.Word)
		require.ElementsMatch(t, []store.Reaped{
			{Kind: "lifetime", ID: retried, Word: "DEAD", Detail: "lifetime_exceeded"},
			{Kind: "lifetime", ID: pending, Word: "DEAD", Detail: "lifetime_exceeded"},
		}, held.Reaped)
		for _, id := range []string{retried, pending} {
			j, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			require.Equal(t, store.StatusDead, j.Status, id)
			require.Equal(t, "lifetime_exceeded", *j.DeadReason)
		}
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(0), st.Counts.Pending)
	})
}

// TestSettleCanSkipHousekeeping: a settle call's claim leaves the queue's
// housekeeping out when asked (the dispatcher runs it every few
// milliseconds, not in each of a busy queue's hundreds of settle calls per
// second): an expired lease stays until a call that runs it, and that call
// reaps it as a lost delivery.
func TestSettleCanSkipHousekeeping(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		lost := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Equal(t, lost, c.Jobs[0].ID)
		b.advance(300 * time.Millisecond) // timeout 200ms + margin 50ms: the lease has expired

		live := publish(t, s, q, `{}`)
		_, c, err = s.SettleAndClaim(ctx, q, nil, store.Refill{Max: 1, SkipHousekeeping: true})
		require.NoError(t, err)
		require.Equal(t, store.Claimed, c.Word)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, live, c.Jobs[0].ID, "the expired lease was not reaped, so its job is not due again")
		require.Empty(t, c.Reaped)

		res, c, err := s.SettleAndClaim(ctx, q, []store.Outcome{{ID: live, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}},
			store.Refill{Max: 1, SkipHousekeeping: true})
		require.NoError(t, err)
		require.Equal(t, store.Completed, res[0].Word)
		require.Equal(t, store.Empty, c.Word)
		require.Empty(t, c.Reaped)
		j, err := s.GetJob(ctx, q, lost)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, j.Status)
		require.Equal(t, 0, j.Attempts)

		_, c, err = s.SettleAndClaim(ctx, q, nil, store.Refill{Max: 1})
		require.NoError(t, err)
		require.Len(t, c.Reaped, 1, "a settle call that runs housekeeping reaps the lost delivery")
		require.Equal(t, store.Reaped{Kind: "lease_expired", ID: lost, Word: "RETRY", Detail: c.Reaped[0].Detail}, c.Reaped[0])
		j, err = s.GetJob(ctx, q, lost)
		require.NoError(t, err)
		require.Equal(t, 1, j.Attempts, "a lost delivery spends one attempt")
	})
}
