package dispatch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

// heldStore answers every claim with word, and counts the claims.
type heldStore struct {
	word   store.ClaimWord
	claims atomic.Int32
}

func (s *heldStore) NewCall() string { return "call" }

func (s *heldStore) ClaimCall(context.Context, store.QueueParams, store.ClaimParams) (store.ClaimResult, error) {
	s.claims.Add(1)
	return store.ClaimResult{Word: s.word, WakeIn: time.Hour}, nil
}

func (s *heldStore) SettleAndClaim(context.Context, store.QueueParams, []store.Outcome, store.Refill) ([]store.Settled, store.ClaimResult, error) {
	return nil, store.ClaimResult{}, nil
}

// TestHeldQueueIgnoresNewWork: while the last claim found the queue held
// (or paused), "new work" wake-ups — a publish burst — cost no claims at
// all; a state wake-up (a resume, a reopened queue) is acted on at once.
func TestHeldQueueIgnoresNewWork(t *testing.T) {
	t.Parallel()
	for _, word := range []store.ClaimWord{store.Held, store.Paused} {
		st := &heldStore{word: word}
		d := dispatch.New(dispatch.Options{Store: st, Deliverer: dispatch.NewDeliverer("t"), Linger: -1})
		q := testQueue("http://127.0.0.1:1/")
		q.Concurrency = 10
		q.JobLifetime = time.Hour
		d.SetQueues(map[string]config.Queue{"q": q})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		require.Eventually(t, func() bool { return st.claims.Load() == 1 }, 5*time.Second, time.Millisecond)

		for range 200 {
			d.Wake("q", false)
		}
		require.Never(t, func() bool { return st.claims.Load() != 1 }, 50*time.Millisecond, time.Millisecond,
			"%s: new work must not make a %s queue claim", word, word)

		d.Wake("q", true)
		require.Eventually(t, func() bool { return st.claims.Load() == 2 }, 5*time.Second, time.Millisecond,
			"%s: a state wake-up is acted on", word)
		cancel()
		<-done
	}
}

// TestHeldQueueClaimsByNewJobsLifetimeEnd: new work on a held or paused
// queue claims (runs housekeeping) no later than the new job's lifetime
// end, so the job dies on time (semantics.md §4), and a burst of publishes
// costs one claim, not one each.
func TestHeldQueueClaimsByNewJobsLifetimeEnd(t *testing.T) {
	t.Parallel()
	for _, word := range []store.ClaimWord{store.Held, store.Paused} {
		st := &heldStore{word: word}
		d := dispatch.New(dispatch.Options{Store: st, Deliverer: dispatch.NewDeliverer("t"), Linger: -1})
		q := testQueue("http://127.0.0.1:1/")
		q.JobLifetime = 300 * time.Millisecond
		d.SetQueues(map[string]config.Queue{"q": q})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		require.Eventually(t, func() bool { return st.claims.Load() == 1 }, 5*time.Second, time.Millisecond)

		began := time.Now()
		for range 200 {
			d.Wake("q", false)
		}
		require.Eventually(t, func() bool { return st.claims.Load() == 2 }, 5*time.Second, time.Millisecond,
			"%s: the new jobs' lifetime end needs a claim", word)
		took := time.Since(began)
		require.GreaterOrEqual(t, took, 250*time.Millisecond, "%s: not at once", word)
		require.Less(t, took, 2*time.Second, "%s: by the lifetime end, not the claim's hour", word)
		require.Never(t, func() bool { return st.claims.Load() != 2 }, 50*time.Millisecond, time.Millisecond,
			"%s: one claim for the whole burst", word)
		cancel()
		<-done
	}
}
