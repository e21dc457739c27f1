package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// Races against a real redis-server (issue #8): concurrent callers of the
// scripts must never both win. Redis runs each script atomically, so these
// tests pin down that every script checks the state it needs before writing,
// whatever order the calls land in.

// realStore is a store on a fresh real redis-server (skipped without one,
// failed without one in CI).
func realStore(t *testing.T) *store.Store {
	t.Helper()
	srv := redistest.Start(t)
	return newStore(t, srv.Client(t))
}

// TestRaceCallbacksOneWinner: 1,000 rounds; in each, one ack-mode delivery is
// in flight and an ack, a nack and a defer for it (plus, in half the rounds,
// the daemon's own "delivered" settle of the webhook's 2xx) arrive at once.
// Exactly one callback wins; the others get ErrConflict; the job ends in the
// state of the winner with exactly one history entry for the round; the queue
// counters stay consistent.
func TestRaceCallbacksOneWinner(t *testing.T) {
	t.Parallel()
	s := realStore(t)
	ctx := context.Background()
	q := queue("race")
	q.Mode = "ack"
	q.Concurrency = 1
	q.AckTimeout = time.Hour
	q.Timeout = time.Hour
	// Losers of a round (nacked, deferred) must not come back while the test
	// runs, so that each round's claim takes exactly the round's new job.
	q.Backoff.Base, q.Backoff.Max = time.Hour, time.Hour
	q.MaxAttempts, q.MaxDefers = 5, 5
	q.JobLifetime = 24 * time.Hour

	const rounds = 1000
	wins := map[string]int{}
	for round := 0; round < rounds; round++ {
		id := publish(t, s, q, fmt.Sprintf(`{"round":%d}`, round))
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Equal(t, store.Claimed, c.Word, "round %d", round)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, id, c.Jobs[0].ID)
		withSettle := round%2 == 0
		if round%4 == 1 {
			// The 2xx was already recorded: the job is awaiting_ack.
			r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
			require.NoError(t, err)
			require.Equal(t, store.Awaiting, r[0].Word)
		}

		kinds := []store.Callback{
			{JobID: id, Kind: store.CallbackAck, Attempt: 1},
			{JobID: id, Kind: store.CallbackNack, Retryable: true, Reason: "nope"},
			{JobID: id, Kind: store.CallbackDefer, RetryAfter: time.Hour, Scope: store.ScopeJob, Reason: "later"},
		}
		results := make([]error, len(kinds))
		words := make([]string, len(kinds))
		var settled []store.Settled
		var settleErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, cb := range kinds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := s.Callback(ctx, q, cb)
				results[i], words[i] = err, string(r.Word)
			}()
		}
		if withSettle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				settled, settleErr = s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
			}()
		}
		close(start)
		wg.Wait()

		winner := -1
		for i, err := range results {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: %v and %s both won", round, words, kinds[i].Kind)
				winner = i
				continue
			}
			require.True(t, errors.Is(err, store.ErrConflict), "round %d: %s lost with %v, want a conflict", round, kinds[i].Kind, err)
		}
		require.NotEqual(t, -1, winner, "round %d: no callback won", round)
		wins[string(kinds[winner].Kind)]++
		if withSettle {
			require.NoError(t, settleErr)
			// The daemon's late 2xx either came first (AWAITING, and then a
			// callback won over it) or found its token gone (STALE).
			require.Contains(t, []store.SettleWord{store.Awaiting, store.Stale}, settled[0].Word, "round %d", round)
		}

		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Len(t, j.History, 1, "round %d: exactly one outcome recorded", round)
		switch kinds[winner].Kind {
		case store.CallbackAck:
			require.Equal(t, "COMPLETED", words[winner])
			require.Equal(t, store.StatusCompleted, j.Status)
			require.Equal(t, 1, j.Attempts)
			require.Equal(t, "success", j.History[0].Status)
			require.True(t, j.History[0].Acked)
		case store.CallbackNack:
			require.Equal(t, "RETRY", words[winner])
			require.Equal(t, store.StatusProcessing, j.Status)
			require.Equal(t, 1, j.Attempts)
			require.Equal(t, "nacked", j.History[0].Status)
		case store.CallbackDefer:
			require.Equal(t, "DEFERRED", words[winner])
			require.Equal(t, store.StatusProcessing, j.Status)
			require.Equal(t, 0, j.Attempts, "a defer spends no attempt")
			require.Equal(t, 1, j.DeferCount)
			require.Equal(t, "deferred", j.History[0].Status)
		}
		// Nothing is left in flight or awaiting an ack: the one slot is free.
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 0, st.Counts.AwaitingAck, "round %d", round)
		require.EqualValues(t, 0, st.Counts.Pending, "round %d", round)
		require.Equal(t, store.HoldOpen, st.Hold.State, "round %d", round)
	}
	t.Logf("%d rounds, winners: %v", rounds, wins)
	// Each kind won some rounds: the race was real, not always one order.
	for _, k := range []string{"ack", "nack", "defer"} {
		require.Positive(t, wins[k], "%s never won: the calls did not really race", k)
	}
	st, err := s.QueueStatus(ctx, q)
	require.NoError(t, err)
	require.EqualValues(t, wins["nack"]+wins["defer"], st.Counts.Processing, "waiting losers are counted once each")
}

// TestRaceReplayOnce: a dead job replayed twice at once is replayed once: the
// two calls together report one replayed job, and the job is claimable
// exactly once (one new delivery chain), with one set of fresh counters.
func TestRaceReplayOnce(t *testing.T) {
	t.Parallel()
	s := realStore(t)
	ctx := context.Background()
	q := deadQueue("replay")
	const rounds = 200
	for round := 0; round < rounds; round++ {
		ids := killBatch(t, s, q, 1)
		id := ids[0]
		var wg sync.WaitGroup
		start := make(chan struct{})
		ns := make([]int, 2)
		errs := make([]error, 2)
		for i := range ns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if i == 0 || round%2 == 0 {
					ns[i], errs[i] = s.Replay(ctx, q, []string{id})
				} else {
					ns[i], errs[i] = s.ReplayAll(ctx, q)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, 1, ns[0]+ns[1], "round %d: replayed counts %v", round, ns)

		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, j.Status)
		require.Equal(t, 0, j.Attempts)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Pending: 1}, st.Counts, "round %d: one waiting job, no dead copy", round)

		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1, "round %d: exactly one delivery", round)
		require.Equal(t, id, c.Jobs[0].ID)
		require.Equal(t, 1, c.Jobs[0].Attempt)
		again, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, again.Jobs, "round %d: no second delivery chain", round)
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Completed, r[0].Word)
	}
}
