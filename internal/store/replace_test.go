package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// control.md §3: publishes with a replace key collapse onto the key's job
// while it was never delivered; once it is, the next publish makes a new
// job; an idempotency key is checked first.
func TestReplacePending(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("rp")
		pub := func(payload, rk, idem string, delay time.Duration) store.Published {
			t.Helper()
			res, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(payload), ReplaceKey: rk, IdempotencyKey: idem, Delay: delay}})
			require.NoError(t, err)
			return res[0]
		}
		other := pub(`{"other":1}`, "", "", 0)
		first := pub(`{"v":1}`, "k", "", time.Hour)
		require.False(t, first.Replaced)
		j, err := s.GetJob(ctx, q, first.ID)
		require.NoError(t, err)
		require.Equal(t, "k", *j.ReplaceKey)
		sched := j.ScheduledFor

		second := pub(`{"v":2}`, "k", "i2", 0)
		require.True(t, second.Replaced)
		require.Equal(t, first.ID, second.ID)
		require.Equal(t, first.CreatedAt.UnixMilli(), second.CreatedAt.UnixMilli())
		require.Equal(t, store.StatusPending, second.Status)
		j, err = s.GetJob(ctx, q, first.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"v":2}`, string(j.Payload))
		require.Equal(t, sched, j.ScheduledFor, "same schedule: the replacing publish's delay is not applied")

		// Idempotency first: a repeat of i2 replaces nothing.
		again := pub(`{"v":3}`, "k", "i2", 0)
		require.True(t, again.Duplicate)
		require.Equal(t, first.ID, again.ID)
		j, err = s.GetJob(ctx, q, first.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"v":2}`, string(j.Payload))

		// Within one batch: one job per key.
		res, err := s.Publish(ctx, q, []store.NewJob{
			{Payload: json.RawMessage(`{"b":1}`), ReplaceKey: "batch"},
			{Payload: json.RawMessage(`{"b":2}`), ReplaceKey: "batch"},
			{Payload: json.RawMessage(`{"v":4}`), ReplaceKey: "k"},
		})
		require.NoError(t, err)
		require.False(t, res[0].Replaced)
		require.True(t, res[1].Replaced)
		require.Equal(t, res[0].ID, res[1].ID)
		require.True(t, res[2].Replaced)
		require.Equal(t, first.ID, res[2].ID)
		j, err = s.GetJob(ctx, q, res[0].ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"b":2}`, string(j.Payload))
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(3), st.Counts.Pending, "other, k's and batch's")

		// Delivered (claimed): the next publish makes a new job.
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2, "other and batch's (k's is delayed)")
		_ = other
		fresh := pub(`{"b":3}`, "batch", "", 0)
		require.False(t, fresh.Replaced)
		require.NotEqual(t, res[0].ID, fresh.ID)
		for _, cj := range c.Jobs {
			if cj.ID == res[0].ID {
				require.JSONEq(t, `{"b":2}`, string(cj.Payload), "the delivery carries the latest payload")
			}
		}
		// A cancelled one frees its key at once.
		_, err = s.Cancel(ctx, q, store.CancelParams{ID: fresh.ID, Reason: ""})
		require.NoError(t, err)
		again = pub(`{"b":4}`, "batch", "", 0)
		require.False(t, again.Replaced)
		require.NotEqual(t, fresh.ID, again.ID)
	})
}

// The seed's outage story: while the queue is held, 1,000 "latest state"
// publishes with one replace key become one job, delivered once after the
// release with the last payload.
func TestReplaceWhileHeldIsOneDelivery(t *testing.T) {
	t.Parallel()
	s := realStore(t)
	ctx := context.Background()
	q := queue("rp-held")
	first := publish(t, s, q, `{}`)
	c, err := s.Claim(ctx, q, 1)
	require.NoError(t, err)
	_, err = s.Settle(ctx, q, []store.Outcome{{ID: first, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 300 * time.Millisecond}})
	require.NoError(t, err)
	ids := map[string]bool{}
	for i := 0; i < 1000; i++ {
		res, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(fmt.Sprintf(`{"state":%d}`, i)), ReplaceKey: "latest"}})
		require.NoError(t, err)
		ids[res[0].ID] = true
		require.Equal(t, i > 0, res[0].Replaced)
	}
	require.Len(t, ids, 1)
	var delivered []store.ClaimedJob
	require.Eventually(t, func() bool {
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		for _, j := range c.Jobs {
			delivered = append(delivered, j)
			_, err := s.Settle(ctx, q, []store.Outcome{{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200}})
			require.NoError(t, err)
		}
		return len(delivered) == 2
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, first, delivered[0].ID, "the held job probes first")
	require.JSONEq(t, `{"state":999}`, string(delivered[1].Payload))
	c, err = s.Claim(ctx, q, 10)
	require.NoError(t, err)
	require.Empty(t, c.Jobs, "one delivery for 1,000 publishes")
}
