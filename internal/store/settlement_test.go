package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/events"
	"github.com/simpleq/simpleqd/internal/metrics"
	"github.com/simpleq/simpleqd/internal/store"
)

// The scripts report what an outcome did to the queue's hold as data with
// Redis' times (issue 22 item 3): start, extend or keep, the queue's
// release after it and when. The release they report is the one inspect
// shows, exactly, and the timeline and the metrics take it as it is: no
// daemon's clock and no copy of the hold in Go.
func TestHoldTransitionsCarryRedisTimes(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		for i := 0; i < 4; i++ {
			publish(t, s, q, `{}`)
		}
		c, err := s.Claim(ctx, q, 3)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 3)
		defer429 := func(j store.ClaimedJob, ra time.Duration) store.Outcome {
			return store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: ra, Reason: "429"}
		}
		outs := []store.Outcome{defer429(c.Jobs[0], time.Minute), defer429(c.Jobs[1], 2*time.Minute), defer429(c.Jobs[2], 30*time.Second)}
		r, err := s.Settle(ctx, q, outs)
		require.NoError(t, err)
		require.Equal(t, []store.HoldChange{store.HoldStarted, store.HoldExtended, store.HoldKept},
			[]store.HoldChange{r[0].Hold.Change, r[1].Hold.Change, r[2].Hold.Change})
		at := r[0].Hold.At
		require.False(t, at.IsZero())
		require.Equal(t, at.Add(time.Minute), r[0].Hold.Until, "the release is Redis' now plus the Retry-After")
		require.Equal(t, strconv.FormatInt(r[0].Hold.Until.UnixMilli(), 10), r[0].Detail)
		require.Equal(t, at.Add(2*time.Minute), r[1].Hold.Until)
		require.Equal(t, r[1].Hold.Until, r[2].Hold.Until, "an earlier release keeps the queue's")
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldHeld, st.Hold.State)
		require.NotNil(t, st.Hold.Until)
		require.Equal(t, st.Hold.Until.UnixMilli(), r[2].Hold.Until.UnixMilli(), "the reported release is inspect's")

		l := events.New(16)
		m := metrics.New(metrics.Options{})
		for i, o := range outs {
			set := store.Settlement{Queue: "q", JobID: o.ID, Source: store.FromDelivery, Outcome: o, Result: r[i]}
			l.Settled(set)
			m.Settled(set)
		}
		var holds []events.Event
		for _, e := range l.Recent("q", 16) {
			if e.Kind == events.KindHold {
				holds = append(holds, e)
			}
		}
		require.Len(t, holds, 3)
		require.Equal(t, st.Hold.Until.UnixMilli(), holds[0].Until.UnixMilli(), "the timeline's release is inspect's, exactly")
		require.Equal(t, at, holds[0].Time, "on Redis' clock")
		mfs, err := m.Registry().Gather()
		require.NoError(t, err)
		started := -1.0
		for _, mf := range mfs {
			if mf.GetName() == "simpleqd_holds_started_total" {
				started = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		require.Equal(t, 1.0, started, "one start, one extension, one kept: as Redis said")
	})
}
