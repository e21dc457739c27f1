package store_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// stalled runs a real redis-server and a client configured like the
// daemon's (a read timeout, one retry by go-redis), and returns a function
// that freezes the server (SIGSTOP) for the duration of call, past the
// client's timeout: the call is sent, maybe run, its reply never read.
func stalled(t *testing.T) (*store.Store, func(call func() error) error) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 150 * time.Millisecond,
		WriteTimeout: 150 * time.Millisecond, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	return s, func(call func() error) error {
		srv.Signal(syscall.SIGSTOP)
		err := call()
		srv.Signal(syscall.SIGCONT)
		return err
	}
}

// Finding 4: Redis runs a claim whose reply is lost (frozen past the read
// timeout; go-redis sends the script again). Sent again under its name, the
// claim hands over the jobs the first run leased: none belongs to nobody,
// none is later charged an attempt for a delivery that never happened.
func TestStalledClaimLosesNoLease(t *testing.T) {
	t.Parallel()
	s, freeze := stalled(t)
	ctx := context.Background()
	q := queue("stall")
	publishN(t, s, q, 3)
	call := s.NewCall()
	err := freeze(func() error {
		_, err := s.ClaimCall(ctx, q, store.ClaimParams{Max: 3, Call: call})
		return err
	})
	require.ErrorIs(t, err, store.ErrUnavailable, "the reply was lost")
	var c store.ClaimResult
	require.Eventually(t, func() bool {
		c, err = s.ClaimCall(ctx, q, store.ClaimParams{Max: 3, Call: call})
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	require.Len(t, c.Jobs, 3, "the jobs Redis leased while the reply was lost")
	st, err := s.QueueStatus(ctx, q)
	require.NoError(t, err)
	require.Equal(t, store.Counts{Processing: 3}, st.Counts, "no job leased twice or to nobody")
	outs := make([]store.Outcome, len(c.Jobs))
	for i, j := range c.Jobs {
		outs[i] = store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200}
	}
	r, err := s.Settle(ctx, q, outs)
	require.NoError(t, err)
	for _, w := range r {
		require.Equal(t, store.Completed, w.Word, "the leases handed over are the live ones")
	}
}

// Finding 4, settle: a settle with a refill whose reply is lost, sent again
// under its name, reports the outcomes and hands over the refill's jobs.
func TestStalledSettleLosesNoLease(t *testing.T) {
	t.Parallel()
	s, freeze := stalled(t)
	ctx := context.Background()
	q := queue("stall")
	publishN(t, s, q, 4)
	c, err := s.Claim(ctx, q, 2)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 2)
	outs := []store.Outcome{
		{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200},
		{ID: c.Jobs[1].ID, Token: c.Jobs[1].Token, Kind: store.OutcomeOK, StatusCode: 200},
	}
	refill := store.Refill{Max: 2, Call: s.NewCall()}
	err = freeze(func() error {
		_, _, err := s.SettleAndClaim(ctx, q, outs, refill)
		return err
	})
	require.ErrorIs(t, err, store.ErrUnavailable)
	var res []store.Settled
	var claim store.ClaimResult
	require.Eventually(t, func() bool {
		res, claim, err = s.SettleAndClaim(ctx, q, outs, refill)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, store.Completed, res[0].Word, "the first run's words, not STALE")
	require.Equal(t, store.Completed, res[1].Word)
	require.Len(t, claim.Jobs, 2, "the refill's jobs")
	st, err := s.QueueStatus(ctx, q)
	require.NoError(t, err)
	require.Equal(t, store.Counts{Processing: 2}, st.Counts)
}

// Finding 5: a defer or nack callback applied while its reply was lost (the
// API answered 503) is answered 2xx when the worker sends it again, not 409.
func TestStalledCallbackIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	s, freeze := stalled(t)
	ctx := context.Background()
	q := queue("stallcb")
	q.Mode = "ack"
	for _, cb := range []store.Callback{
		{Kind: store.CallbackDefer, RetryAfter: time.Minute, Scope: store.ScopeJob, Attempt: 1},
		{Kind: store.CallbackNack, Retryable: true, Attempt: 1},
	} {
		id := publish(t, s, q, `{}`)
		var c store.ClaimResult
		require.Eventually(t, func() bool {
			var err error
			c, err = s.Claim(ctx, q, 1)
			require.NoError(t, err)
			return len(c.Jobs) == 1
		}, 5*time.Second, 20*time.Millisecond)
		require.Equal(t, id, c.Jobs[0].ID)
		_, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
		require.NoError(t, err)
		cb.JobID = id
		err = freeze(func() error {
			_, err := s.Callback(ctx, q, cb)
			return err
		})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Eventually(t, func() bool {
			_, err = s.Callback(ctx, q, cb)
			return !isUnavailable(err)
		}, 5*time.Second, 20*time.Millisecond)
		require.NoError(t, err, "%s sent again after a lost reply: 2xx", cb.Kind)
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		if cb.Kind == store.CallbackDefer {
			require.Equal(t, 1, j.DeferCount, "applied once")
		} else {
			require.Equal(t, 1, j.Attempts, "applied once")
		}
	}
}

func isUnavailable(err error) bool { return err != nil && errors.Is(err, store.ErrUnavailable) }
