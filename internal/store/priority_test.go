package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// publishPri publishes one job with a priority and a delay.
func publishPri(t *testing.T, s *store.Store, q store.QueueParams, pri int, delay time.Duration) string {
	t.Helper()
	res, err := s.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(`{}`), Priority: pri, Delay: delay}})
	require.NoError(t, err)
	return res[0].ID
}

// claimIDs claims up to max jobs and returns their ids in claim order.
func claimIDs(t *testing.T, s *store.Store, q store.QueueParams, max int) ([]string, store.ClaimResult) {
	t.Helper()
	c, err := s.Claim(context.Background(), q, max)
	require.NoError(t, err)
	ids := make([]string, len(c.Jobs))
	for i, j := range c.Jobs {
		ids[i] = j.ID
	}
	return ids, c
}

// Due jobs go highest priority first, then in due order within a level
// (control.md §2); a queue without priorities keeps its FIFO order.
func TestPriorityOrdersDueJobs(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		low1 := publishPri(t, s, q, 0, 0)
		mid1 := publishPri(t, s, q, 5, 0)
		high := publishPri(t, s, q, 9, 0)
		low2 := publishPri(t, s, q, 0, 0)
		mid2 := publishPri(t, s, q, 5, 0)
		one := publishPri(t, s, q, 1, 0)

		j, err := s.GetJob(ctx, q, high)
		require.NoError(t, err)
		require.Equal(t, 9, j.Priority)
		j, err = s.GetJob(ctx, q, low1)
		require.NoError(t, err)
		require.Equal(t, 0, j.Priority)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(6), st.Counts.Pending)

		first, _ := claimIDs(t, s, q, 2)
		require.Equal(t, []string{high, mid1}, first, "a claim that takes part of a level stops inside it")
		rest, _ := claimIDs(t, s, q, 10)
		require.Equal(t, []string{mid2, one, low1, low2}, rest)
	})
}

// A delayed job of high priority is not delivered before it is due, and the
// claim's wake-up names the earliest due time across levels.
func TestPriorityRespectsDelay(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		q := queue("q")
		later := publishPri(t, s, q, 9, 60*time.Millisecond)
		sooner := publishPri(t, s, q, 3, 30*time.Millisecond)
		ids, c := claimIDs(t, s, q, 10)
		require.Empty(t, ids)
		require.Equal(t, store.Empty, c.Word)
		require.Greater(t, c.WakeIn, time.Duration(0))
		require.LessOrEqual(t, c.WakeIn, 30*time.Millisecond, "wakes for the earliest due job, whatever its level")
		now := publishPri(t, s, q, 0, 0)
		ids, _ = claimIDs(t, s, q, 10)
		require.Equal(t, []string{now}, ids, "not-yet-due jobs of higher levels wait")
		var got []string
		require.Eventually(t, func() bool {
			ids, c := claimIDs(t, s, q, 10)
			got = append(got, ids...)
			if c.Word != store.Claimed {
				b.advance(10 * time.Millisecond)
			}
			return len(got) == 2
		}, 5*time.Second, time.Millisecond)
		require.Equal(t, []string{sooner, later}, got)
	})
}

// A retry keeps the job's priority, and the probe of a hold is the
// highest-priority due job.
func TestPriorityKeptAcrossRetryAndProbe(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		q.Backoff.Base = time.Millisecond
		high := publishPri(t, s, q, 7, 0)
		ids, c := claimIDs(t, s, q, 1)
		require.Equal(t, []string{high}, ids)
		_, err := s.Settle(ctx, q, []store.Outcome{{ID: high, Token: c.Jobs[0].Token, Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"}})
		require.NoError(t, err)
		low := publishPri(t, s, q, 0, 0)
		b.advance(5 * time.Millisecond)
		require.Eventually(t, func() bool {
			ids, c = claimIDs(t, s, q, 1)
			if len(ids) == 0 {
				b.advance(2 * time.Millisecond)
			}
			return len(ids) == 1
		}, 5*time.Second, time.Millisecond)
		require.Equal(t, []string{high}, ids, "the retry kept priority 7 ahead of an older-due priority 0")
		j, err := s.GetJob(ctx, q, high)
		require.NoError(t, err)
		require.Equal(t, 7, j.Priority)

		// Hold the queue with the retry's defer; the probe is the priority job
		// again even though the priority-0 job became due earlier.
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: high, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 20 * time.Millisecond}})
		require.NoError(t, err)
		var probe store.ClaimResult
		require.Eventually(t, func() bool {
			_, probe = claimIDs(t, s, q, 10)
			if probe.Word != store.Claimed {
				b.advance(10 * time.Millisecond)
			}
			return probe.Word == store.Claimed
		}, 5*time.Second, time.Millisecond)
		require.Len(t, probe.Jobs, 1)
		require.True(t, probe.Jobs[0].Probe)
		require.Equal(t, high, probe.Jobs[0].ID)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: high, Token: probe.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		ids, _ = claimIDs(t, s, q, 10)
		require.Equal(t, []string{low}, ids)
	})
}

// The pending list comes in delivery order: highest priority first, then
// due order (control.md §4), the order claims take them in.
func TestPriorityListOrderIsDeliveryOrder(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		var published []string
		for _, p := range []int{0, 3, 9, 0, 3, 1} {
			published = append(published, publishPri(t, s, q, p, 0))
		}
		var listed []string
		cursor := ""
		for range 10 {
			jobs, next, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 2, Cursor: cursor})
			require.NoError(t, err)
			for _, j := range jobs {
				listed = append(listed, j.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		claimed, _ := claimIDs(t, s, q, 10)
		require.Len(t, claimed, len(published))
		require.Equal(t, claimed, listed)
		require.Equal(t, []string{published[2], published[1], published[4], published[5], published[0], published[3]}, claimed)
	})
}

// A replay from the dead-letter list keeps the job's priority.
func TestPriorityKeptAcrossReplay(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		high := publishPri(t, s, q, 6, 0)
		_, err := s.Cancel(ctx, q, store.CancelParams{ID: high, Reason: ""})
		require.NoError(t, err)
		low := publishPri(t, s, q, 0, 0)
		n, err := s.Replay(ctx, q, []string{high})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		ids, _ := claimIDs(t, s, q, 10)
		require.Equal(t, []string{high, low}, ids, "the replayed job is priority 6 again, ahead of an older priority 0")
	})
}
