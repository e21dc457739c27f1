package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// publishKeyed publishes n jobs of lane fk ("" for the default lane).
func publishKeyed(t *testing.T, s *store.Store, q store.QueueParams, fk string, n int) []string {
	t.Helper()
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{Payload: json.RawMessage(fmt.Sprintf(`{"lane":%q,"i":%d}`, fk, i)), FlowKey: fk}
	}
	res, err := s.Publish(context.Background(), q, jobs)
	require.NoError(t, err)
	ids := make([]string, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// lanesOf counts the claimed jobs per flow key.
func lanesOf(jobs []store.ClaimedJob) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[j.FlowKey]++
	}
	return out
}

func settleAll(t *testing.T, s *store.Store, q store.QueueParams, jobs []store.ClaimedJob, kind store.OutcomeKind, code int, retryAfter time.Duration) []store.Settled {
	t.Helper()
	outs := make([]store.Outcome, len(jobs))
	for i, j := range jobs {
		outs[i] = store.Outcome{ID: j.ID, Token: j.Token, Kind: kind, StatusCode: code, RetryAfter: retryAfter}
	}
	res, err := s.Settle(context.Background(), q, outs)
	require.NoError(t, err)
	return res
}

// A keyed job carries its flow key in the Job and in the claim; counts see
// keyed jobs like any other.
func TestLanesPublishCarriesFlowKey(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-basic")
		key := "tenant \"A\"/ü"
		ids := publishKeyed(t, s, q, key, 2)
		j, err := s.GetJob(ctx, q, ids[0])
		require.NoError(t, err)
		require.NotNil(t, j.FlowKey)
		require.Equal(t, key, *j.FlowKey)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(2), st.Counts.Pending)

		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		require.Equal(t, key, c.Jobs[0].FlowKey)
		require.Equal(t, ids[0], c.Jobs[0].ID, "a lane delivers in order")
		res := settleAll(t, s, q, c.Jobs, store.OutcomeOK, 200, 0)
		require.Equal(t, store.Completed, res[0].Word)
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{}, st.Counts)
		// The lane occupies nothing once it has no jobs (keys.md §6).
		n, err := b.rdb.HLen(ctx, s.Keys(q.Name).List()[12]).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// keys.md §3: a 429 of lane A holds lane A only; B keeps delivering; after
// the release exactly one probe goes out from A, and only its success
// reopens A.
func TestLanesHoldIsolatesOneLane(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-hold")
		publishKeyed(t, s, q, "A", 5)
		publishKeyed(t, s, q, "B", 5)

		c, err := s.Claim(ctx, q, 2)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"A": 1, "B": 1}, lanesOf(c.Jobs), "one of each lane first")
		var a, bj store.ClaimedJob
		for _, j := range c.Jobs {
			if j.FlowKey == "A" {
				a = j
			} else {
				bj = j
			}
		}
		res := settleAll(t, s, q, []store.ClaimedJob{a}, store.OutcomeDefer, 429, 150*time.Millisecond)
		require.Equal(t, store.Deferred, res[0].Word)
		require.False(t, res[0].LaneUntil.IsZero(), "a keyed 429 holds the lane")
		require.True(t, res[0].BreakerUntil.IsZero())
		settleAll(t, s, q, []store.ClaimedJob{bj}, store.OutcomeOK, 200, 0)

		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldOpen, st.Hold.State, "the queue stays open")
		require.Equal(t, int64(1), st.Counts.HeldKeys)

		// While A is held only B's jobs go out.
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"B": 4}, lanesOf(c.Jobs))
		settleAll(t, s, q, c.Jobs, store.OutcomeOK, 200, 0)

		b.advance(200 * time.Millisecond)
		// After the release: exactly one probe from A, the deferred job first.
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, a.ID, c.Jobs[0].ID, "the deferred job waits where it was: it is the probe")
		require.True(t, c.Jobs[0].LaneProbe)
		require.False(t, c.Jobs[0].Probe, "a lane probe is not the queue's")
		probe := c.Jobs[0]
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, c.Jobs, "nothing else of A while its probe is out")

		// A failed probe keeps A probing with its next job.
		settleAll(t, s, q, []store.ClaimedJob{probe}, store.OutcomeFail, 500, 0)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.True(t, c.Jobs[0].LaneProbe)
		// Its success reopens the lane: the rest goes out together.
		settleAll(t, s, q, c.Jobs, store.OutcomeOK, 200, 0)
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Zero(t, st.Counts.HeldKeys)
		b.advance(30 * time.Millisecond) // the failed probe's backoff (20 ms)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"A": 4}, lanesOf(c.Jobs))
		for _, j := range c.Jobs {
			require.False(t, j.LaneProbe)
		}
	})
}

// keys.md §1 and §3: holdScope queue makes a keyed 429 hold the whole
// queue, as the seed does; a job without a key always holds the queue.
func TestLanesHoldScopeQueue(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-scope")
		q.FlowKeys.HoldScope = "queue"
		publishKeyed(t, s, q, "A", 1)
		publishKeyed(t, s, q, "B", 1)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		res := settleAll(t, s, q, c.Jobs, store.OutcomeDefer, 429, time.Minute)
		require.True(t, res[0].LaneUntil.IsZero())
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldHeld, st.Hold.State)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Held, c.Word)

		q2 := queue("lanes-default")
		publishKeyed(t, s, q2, "", 1)
		publishKeyed(t, s, q2, "B", 1)
		c, err = s.Claim(ctx, q2, 2)
		require.NoError(t, err)
		for _, j := range c.Jobs {
			if j.FlowKey == "" {
				res = settleAll(t, s, q2, []store.ClaimedJob{j}, store.OutcomeDefer, 503, time.Minute)
				require.True(t, res[0].LaneUntil.IsZero(), "the default lane's backpressure holds the queue")
			}
		}
		st, err = s.QueueStatus(ctx, q2)
		require.NoError(t, err)
		require.Equal(t, store.HoldHeld, st.Hold.State)
	})
}

// keys.md §4: lanes that can start share the claim in round-robin order,
// the default lane among them, whatever the backlog of one.
func TestLanesFairShares(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-fair")
		q.Concurrency = 1000
		publishKeyed(t, s, q, "flood", 300)
		publishKeyed(t, s, q, "light", 20)
		publishKeyed(t, s, q, "", 20)
		starts := map[string]int{}
		for round := 0; round < 6; round++ {
			c, err := s.Claim(ctx, q, 10)
			require.NoError(t, err)
			for k, n := range lanesOf(c.Jobs) {
				starts[k] += n
			}
			// Over any stretch, |startsA - startsB| <= claimBatch + 1.
			require.LessOrEqual(t, abs(starts["flood"]-starts["light"]), 11, "round %d: %v", round, starts)
			require.LessOrEqual(t, abs(starts["flood"]-starts[""]), 11, "round %d: %v", round, starts)
		}
		require.Equal(t, 20, starts["light"])
		require.Equal(t, 20, starts[""])
		// Work-conserving: once the light lanes are empty the flood takes it all.
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"flood": 10}, lanesOf(c.Jobs))
	})
}

// keys.md §4 with the bursts of lanes.lua (a visit takes up to half a
// claim of one lane in a row): over every stretch of claims of 1 to 16
// jobs, |startsA/weightA - startsB/weightB| <= claimBatch + 1 for every
// pair of lanes that could start throughout, weights 1, 2 and 5 and the
// default lane among them; and a claim of 16 from backlogged lanes takes
// runs of several jobs of one lane (the bursts that make it cheap).
func TestLanesBurstsKeepTheBound(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-burst")
		q.Concurrency = 10000
		weights := map[string]int{"": 1, "w1": 1, "w2": 2, "w5": 5}
		for fk, w := range weights {
			if fk != "" {
				w := w
				_, err := s.PutKey(ctx, q, fk, store.KeyOverride{Weight: &w})
				require.NoError(t, err)
			}
			publishKeyed(t, s, q, fk, 400)
		}
		const claimBatch = 16
		var cum []map[string]int // starts after each claim
		total := map[string]int{}
		longest := 0
		for i := 0; ; i++ {
			c, err := s.Claim(ctx, q, 1+i%claimBatch)
			require.NoError(t, err)
			run, prev := 0, "-"
			for _, j := range c.Jobs {
				total[j.FlowKey]++
				if j.FlowKey == prev {
					run++
				} else {
					run, prev = 1, j.FlowKey
				}
				longest = max(longest, run)
			}
			// Stop while every lane still has a backlog: the bound is for
			// lanes that can start throughout.
			if total["w5"] > 300 || len(c.Jobs) == 0 {
				break
			}
			snap := map[string]int{}
			for k, v := range total {
				snap[k] = v
			}
			cum = append(cum, snap)
		}
		require.Greater(t, longest, 1, "a backlogged lane's turn takes several jobs")
		require.LessOrEqual(t, longest, claimBatch/2, "a turn takes at most half a claim")
		worst := 0.0
		for i := range cum {
			for j := i + 1; j < len(cum); j++ {
				for a, wa := range weights {
					for bk, wb := range weights {
						d := float64(cum[j][a]-cum[i][a])/float64(wa) - float64(cum[j][bk]-cum[i][bk])/float64(wb)
						worst = max(worst, d)
					}
				}
			}
		}
		t.Logf("claims %d, starts %v, longest run %d, worst |startsA/wA - startsB/wB| %.2f", len(cum), total, longest, worst)
		require.LessOrEqual(t, worst, float64(claimBatch+1))
	})
}

// A job published to a lane that is already ready only adds to the lane's
// waiting count, edited in its stored field without decoding it
// (lanes.lua LANE.published_members); the count, and the jobs, are exact
// whether the lane was ready, empty, or in the same call as a completion.
func TestLanesPublishToReadyLane(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-ready-pub")
		q.Concurrency = 100
		pending := func() int64 {
			k, err := s.GetKey(ctx, q, "A")
			require.NoError(t, err)
			return k.Counts.Pending
		}
		ids := publishKeyed(t, s, q, "A", 3)                // empty lane: joins the ready set
		ids = append(ids, publishKeyed(t, s, q, "A", 4)...) // ready: edited in place
		ids = append(ids, publishKeyed(t, s, q, "A", 2)...)
		require.Equal(t, int64(9), pending())
		c, err := s.Claim(ctx, q, 2)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		ids = append(ids, publishKeyed(t, s, q, "A", 1)...) // still ready, two in flight
		k, err := s.GetKey(ctx, q, "A")
		require.NoError(t, err)
		require.Equal(t, int64(8), k.Counts.Pending)
		require.Equal(t, int64(2), k.Counts.Processing)
		got := map[string]bool{}
		for _, j := range c.Jobs {
			got[j.ID] = true
		}
		for len(got) < len(ids) {
			outs := []store.Outcome{}
			for _, j := range c.Jobs {
				outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
			}
			_, c, err = s.SettleAndClaim(ctx, q, outs, store.Refill{Max: 3})
			require.NoError(t, err)
			require.NotEmpty(t, c.Jobs, "every published job is claimed: %d of %d", len(got), len(ids))
			for _, j := range c.Jobs {
				require.False(t, got[j.ID], "claimed twice")
				got[j.ID] = true
			}
		}
		for _, id := range ids {
			require.True(t, got[id])
		}
		settleAll(t, s, q, c.Jobs, store.OutcomeOK, 200, 0)
		_, err = s.GetKey(ctx, q, "A")
		require.ErrorIs(t, err, store.ErrNotFound, "a drained lane occupies nothing")
	})
}

// A claim over many lanes that run dry takes them out of the ready set: the
// next claim finds none of them, a lane that comes back in between is
// ready again, every job goes out once, and the drained lanes leave
// nothing in Redis.
func TestLanesManyRunDryInOneClaim(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-dry")
		q.Concurrency = 1000
		var ids []string
		for i := 0; i < 30; i++ {
			ids = append(ids, publishKeyed(t, s, q, "t"+strconv.Itoa(i), 1)...)
		}
		keys := s.Keys(q.Name).List()
		ready := func() int64 {
			n, err := b.rdb.ZCard(ctx, keys[13]).Result()
			require.NoError(t, err)
			return n
		}
		got := map[string]bool{}
		take := func(max int) []store.ClaimedJob {
			c, err := s.Claim(ctx, q, max)
			require.NoError(t, err)
			for _, j := range c.Jobs {
				require.False(t, got[j.ID], "claimed twice")
				got[j.ID] = true
			}
			return c.Jobs
		}
		first := take(20)
		require.Len(t, first, 20)
		require.Equal(t, int64(10), ready(), "the 20 lanes that ran dry left the ready set")
		again := first[0].FlowKey
		ids = append(ids, publishKeyed(t, s, q, again, 1)...) // a dry lane comes back
		require.Equal(t, int64(11), ready())
		rest := take(20)
		require.Len(t, rest, 11)
		require.Zero(t, ready())
		require.Len(t, got, len(ids))
		settleAll(t, s, q, append(first, rest...), store.OutcomeOK, 200, 0)
		for _, k := range []int{11, 12, 13, 14} { // lwait, lanes, lready, ltimed
			n, err := b.rdb.Exists(ctx, keys[k]).Result()
			require.NoError(t, err)
			require.Zero(t, n, "key %s", keys[k])
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// keys.md §2: flowKeys.concurrency caps each lane fleet-wide while the
// other lanes use the rest; a lane's rate limit holds it back on its own.
func TestLanesLimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-limits")
		q.Concurrency = 8
		q.FlowKeys.Concurrency = 2
		publishKeyed(t, s, q, "A", 10)
		publishKeyed(t, s, q, "B", 10)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"A": 2, "B": 2}, lanesOf(c.Jobs))
		c2, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, c2.Jobs, "both lanes are at their cap")
		// One of A's slots frees: A, and only A, gets one more.
		settleAll(t, s, q, c.Jobs[:1], store.OutcomeOK, 200, 0)
		c2, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c2.Jobs, 1)
		require.Equal(t, c.Jobs[0].FlowKey, c2.Jobs[0].FlowKey)

		r := queue("lanes-rate")
		r.FlowKeys.RateLimitMax = 2
		r.FlowKeys.RateLimitWindow = 150 * time.Millisecond
		publishKeyed(t, s, r, "A", 5)
		publishKeyed(t, s, r, "B", 1)
		c, err = s.Claim(ctx, r, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"A": 2, "B": 1}, lanesOf(c.Jobs))
		require.GreaterOrEqual(t, c.WakeIn, time.Duration(0), "the rate window's end is a wake-up")
		settleAll(t, s, r, c.Jobs, store.OutcomeOK, 200, 0)
		c, err = s.Claim(ctx, r, 10)
		require.NoError(t, err)
		require.Empty(t, c.Jobs)
		b.advance(200 * time.Millisecond)
		c, err = s.Claim(ctx, r, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"A": 2}, lanesOf(c.Jobs))
	})
}

// Within a lane: priority first, then due time; delayed jobs wake the lane;
// a cancelled keyed job leaves its lane.
func TestLanesPriorityDelayCancel(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-order")
		res, err := s.Publish(ctx, q, []store.NewJob{
			{Payload: json.RawMessage(`{"n":1}`), FlowKey: "A"},
			{Payload: json.RawMessage(`{"n":2}`), FlowKey: "A", Priority: 5},
			{Payload: json.RawMessage(`{"n":3}`), FlowKey: "A", Priority: 9, Delay: 100 * time.Millisecond},
			{Payload: json.RawMessage(`{"n":4}`), FlowKey: "A"},
		})
		require.NoError(t, err)
		_, err = s.Cancel(ctx, q, store.CancelParams{ID: res[3].ID, Reason: ""})
		require.NoError(t, err)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Equal(t, res[1].ID, c.Jobs[0].ID, "priority 5 first; the delayed 9 is not due")
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, res[0].ID, c.Jobs[0].ID)
		require.Greater(t, c.WakeIn, time.Duration(0))
		require.LessOrEqual(t, c.WakeIn, 100*time.Millisecond, "the delayed job is the lane's wake-up")
		b.advance(120 * time.Millisecond)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, res[2].ID, c.Jobs[0].ID)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(0), st.Counts.Pending)
		require.Equal(t, int64(3), st.Counts.Processing)
	})
}

// A keyed job whose lifetime ends while its lane is held dies on time.
func TestLanesLifetimeEndsInHeldLane(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-life")
		q.JobLifetime = 150 * time.Millisecond
		ids := publishKeyed(t, s, q, "A", 3)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		settleAll(t, s, q, c.Jobs, store.OutcomeDefer, 429, time.Minute)
		b.advance(200 * time.Millisecond)
		c, err = s.Claim(ctx, q, 10) // housekeeping ends the lifetimes
		require.NoError(t, err)
		require.Empty(t, c.Jobs)
		for _, id := range ids[1:] {
			j, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			require.Equal(t, store.StatusDead, j.Status)
			require.Equal(t, "lifetime_exceeded", *j.DeadReason)
		}
	})
}

// keys.md §2 and §5: overrides are shared by the fleet (they live in
// Redis), weights shape the shares, a lane can be resumed, and the keys
// endpoints list lanes by state.
func TestLanesOverridesAndLists(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-keys")
		q.Concurrency = 1000
		_, err := s.GetKey(ctx, q, "nobody")
		require.ErrorIs(t, err, store.ErrNotFound, "an empty lane occupies nothing")

		three := 3
		k, err := s.PutKey(ctx, q, "heavy", store.KeyOverride{Weight: &three})
		require.NoError(t, err)
		require.Equal(t, 3, k.Weight)
		require.Equal(t, &three, k.Overridden.Weight)
		publishKeyed(t, s, q, "heavy", 60)
		publishKeyed(t, s, q, "light", 60)
		starts := map[string]int{}
		for i := 0; i < 4; i++ {
			c, err := s.Claim(ctx, q, 10)
			require.NoError(t, err)
			for k, n := range lanesOf(c.Jobs) {
				starts[k] += n
			}
		}
		require.InDelta(t, 30, starts["heavy"], 2, "weight 3 takes three starts for one: %v", starts)
		require.InDelta(t, 10, starts["light"], 2, "%v", starts)

		one := 1
		_, err = s.PutKey(ctx, q, "light", store.KeyOverride{Concurrency: &one})
		require.NoError(t, err)
		k, err = s.GetKey(ctx, q, "light")
		require.NoError(t, err)
		require.Equal(t, 1, k.Concurrency)
		require.Equal(t, int64(starts["light"]), k.Counts.Processing)
		require.Equal(t, int64(60-starts["light"]), k.Counts.Pending)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Zero(t, lanesOf(c.Jobs)["light"], "light is over its new cap")

		// Hold "held" with a 429 and list by state.
		c, err = s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		settleAll(t, s, q, c.Jobs, store.OutcomeDefer, 429, time.Hour)
		held, next, err := s.ListKeys(ctx, q, store.ListKeysParams{State: store.KeyHeld, Cursor: "", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, next)
		require.Len(t, held, 1)
		require.Equal(t, "heavy", held[0].FlowKey)
		require.Equal(t, store.HoldHeld, held[0].Hold.State)
		active, _, err := s.ListKeys(ctx, q, store.ListKeysParams{State: store.KeyActive, Cursor: "", Limit: 10})
		require.NoError(t, err)
		require.Len(t, active, 1)
		require.Equal(t, "light", active[0].FlowKey)
		all, _, err := s.ListKeys(ctx, q, store.ListKeysParams{State: store.KeyAll, Cursor: "", Limit: 10})
		require.NoError(t, err)
		require.Len(t, all, 2)

		// Resume: the lane goes to probing at once; one probe goes out.
		k, err = s.ResumeKey(ctx, q, "heavy")
		require.NoError(t, err)
		require.Equal(t, store.HoldProbing, k.Hold.State)
		probing, _, err := s.ListKeys(ctx, q, store.ListKeysParams{State: store.KeyProbing, Cursor: "", Limit: 10})
		require.NoError(t, err)
		require.Len(t, probing, 1)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"heavy": 1}, lanesOf(c.Jobs))
		require.True(t, c.Jobs[0].LaneProbe)

		// Removing the override puts the queue's settings back.
		k, err = s.DeleteKey(ctx, q, "light")
		require.NoError(t, err)
		require.Nil(t, k.Overridden.Concurrency)
		require.Equal(t, 0, k.Concurrency)
	})
}

// control.md §4 with keys.md: job lists see keyed jobs, and a flow key
// filter lists one lane, paging through its range of the keyed set.
func TestLanesJobLists(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-lists")
		plain := publishKeyed(t, s, q, "", 2)
		a := publishKeyed(t, s, q, "A", 3)
		bs := publishKeyed(t, s, q, "B", 2)
		all, next, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 100, Cursor: ""})
		require.NoError(t, err)
		require.Empty(t, next)
		require.Len(t, all, 7)
		require.Equal(t, plain[0], all[0].ID, "the default lane first, then lane by lane")

		var got []string
		cursor := ""
		for i := 0; i < 5; i++ {
			page, nx, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, FlowKey: "A", Limit: 2, Cursor: cursor})
			require.NoError(t, err)
			for _, j := range page {
				got = append(got, j.ID)
				require.Equal(t, "A", *j.FlowKey)
			}
			if nx == "" {
				break
			}
			cursor = nx
		}
		require.Equal(t, a, got, "lane A's jobs in its delivery order, over pages")
		_, _, err = s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, FlowKey: "B", Limit: 2, Cursor: cursor})
		require.Error(t, err, "a cursor of lane A is not lane B's")

		// In flight and dead jobs of one lane.
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 7)
		inflight, _, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusProcessing, FlowKey: "B", Limit: 10, Cursor: ""})
		require.NoError(t, err)
		require.Len(t, inflight, 2)
		for _, j := range c.Jobs {
			if j.FlowKey == "B" {
				_, err := s.Settle(ctx, q, []store.Outcome{{ID: j.ID, Token: j.Token, Kind: store.OutcomeFail, StatusCode: 500}})
				require.NoError(t, err)
			}
		}
		retrying, _, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusProcessing, FlowKey: "B", Limit: 10, Cursor: ""})
		require.NoError(t, err)
		require.ElementsMatch(t, bs, []string{retrying[0].ID, retrying[1].ID}, "retries wait in the lane")
	})
}

// control.md §1 with keys.md: a bulk cancel by flow key takes that lane's
// jobs, waiting and in flight, and nothing else; an unfiltered one takes
// the keyed jobs too. Cancelled lane jobs are never delivered afterwards.
func TestLanesBulkCancel(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-cancel")
		publishKeyed(t, s, q, "", 3)
		publishKeyed(t, s, q, "A", 40)
		publishKeyed(t, s, q, "B", 5)
		for range 3 { // one of each lane in flight: a claim of 1 takes one lane's turn
			c, err := s.Claim(ctx, q, 1)
			require.NoError(t, err)
			require.Len(t, c.Jobs, 1)
		}
		a := "A"
		n, done, err := s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{FlowKey: &a}, Reason: ""}, time.Now().Add(10*time.Second), nil)
		require.NoError(t, err)
		require.True(t, done)
		require.Equal(t, 40, n, "A's 39 waiting jobs and its one in flight")
		k, err := s.GetKey(ctx, q, "A")
		if err == nil {
			require.Zero(t, k.Counts.Pending)
			require.Zero(t, k.Counts.Processing)
		}
		c2, err := s.Claim(ctx, q, 100)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"": 2, "B": 4}, lanesOf(c2.Jobs))

		pub := publishKeyed(t, s, q, "B", 3)
		n, done, err = s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{Statuses: []store.Status{store.StatusPending}}, Reason: ""}, time.Now().Add(10*time.Second), nil)
		require.NoError(t, err)
		require.True(t, done)
		require.Equal(t, 3, n, "the keyed pending jobs are found too")
		for _, id := range pub {
			j, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			require.Equal(t, store.StatusDead, j.Status)
		}
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Zero(t, st.Counts.Pending)
	})
}

// runtime.md §4 with keys.md: a schedule's flowKey is carried to every job
// it publishes, which waits in that lane.
func TestLanesScheduleFlowKey(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-sched")
		fk := "tenant-7"
		now, err := s.RedisTime(ctx)
		require.NoError(t, err)
		_, _, err = s.PutSchedule(ctx, q, store.Schedule{ID: "lane-every", Cron: "@every 1s", Timezone: "UTC",
			Payload: json.RawMessage(`{"x":1}`), FlowKey: &fk, Source: store.ScheduleSourceAPI}, now.Add(-time.Second))
		require.NoError(t, err)
		tk, err := s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, tk.Fired, 1)
		j, err := s.GetJob(ctx, q, tk.Fired[0].JobID)
		require.NoError(t, err)
		require.NotNil(t, j.FlowKey)
		require.Equal(t, fk, *j.FlowKey)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, fk, c.Jobs[0].FlowKey)
	})
}

// A claim that takes many jobs from few lanes reads each lane's next jobs
// ahead (lanes.lua lane_next): it still takes them in priority order, then
// publish order, passes over jobs not yet due, and gives equally weighted
// lanes turns of up to half the claim each (LANE_BURST, keys.md §4); what
// it leaves is taken, in order, by the next.
func TestLanesBigClaimKeepsOrder(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-ahead")
		q.Concurrency = 100
		var jobs []store.NewJob
		for i := 0; i < 24; i++ {
			j := store.NewJob{Payload: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`), FlowKey: "A"}
			switch {
			case i%6 == 0:
				j.Priority = 7
			case i%6 == 1:
				j.Priority = 9
				j.Delay = time.Hour // not due: never taken here
			}
			jobs = append(jobs, j)
		}
		for i := 0; i < 6; i++ {
			jobs = append(jobs, store.NewJob{Payload: json.RawMessage(`{"b":` + strconv.Itoa(i) + `}`), FlowKey: "B"})
		}
		res, err := s.Publish(ctx, q, jobs)
		require.NoError(t, err)
		// The due jobs of A in order: priority 7 first, then the rest.
		var wantA []string
		for i := 0; i < 24; i += 6 {
			wantA = append(wantA, res[i].ID)
		}
		for i := 0; i < 24; i++ {
			if i%6 != 0 && i%6 != 1 {
				wantA = append(wantA, res[i].ID)
			}
		}
		var wantB []string
		for i := 24; i < 30; i++ {
			wantB = append(wantB, res[i].ID)
		}
		var gotA, gotB []string
		lanes := ""
		c, err := s.Claim(ctx, q, 14)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 14)
		outs := []store.Outcome{}
		for _, j := range c.Jobs {
			if j.FlowKey == "A" {
				gotA = append(gotA, j.ID)
			} else {
				gotB = append(gotB, j.ID)
			}
			lanes += j.FlowKey
			outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
		}
		// Equal weights: the lanes take turns of up to 7 jobs (half of 14)
		// while both have due jobs; B has 6.
		require.Equal(t, "AAAAAAABBBBBBA", lanes)
		_, c, err = s.SettleAndClaim(ctx, q, outs, store.Refill{Max: 50})
		require.NoError(t, err)
		for _, j := range c.Jobs {
			if j.FlowKey == "A" {
				gotA = append(gotA, j.ID)
			} else {
				gotB = append(gotB, j.ID)
			}
		}
		require.Equal(t, wantA, gotA, "lane A: priority, then publish order, delayed jobs left")
		require.Equal(t, wantB, gotB)
		c, err = s.Claim(ctx, q, 50)
		require.NoError(t, err)
		require.Empty(t, c.Jobs, "only the delayed jobs are left")
		require.Equal(t, store.Empty, c.Word)
	})
}

// Completions on settle's fast path count in the lane's field without the
// lane being decoded when no other step of the call needs it (lanes.lua
// LANE.complete): a ready lane's in-flight count is edited as a string,
// alone, with a claim in the same call, and for several jobs of one lane.
func TestLanesCompletionsEditReadyLane(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-complete")
		publishKeyed(t, s, q, "A", 6)
		publishKeyed(t, s, q, "B", 6)
		c, err := s.Claim(ctx, q, 6)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"A": 3, "B": 3}, lanesOf(c.Jobs))
		counts := func(fk string) store.Counts {
			k, err := s.GetKey(ctx, q, fk)
			require.NoError(t, err)
			return k.Counts
		}
		var a []store.ClaimedJob
		for _, j := range c.Jobs {
			if j.FlowKey == "A" {
				a = append(a, j)
			}
		}
		// Two of A's jobs complete in one call: A stays ready with one in flight.
		settleAll(t, s, q, a[:2], store.OutcomeOK, 200, 0)
		require.EqualValues(t, 1, counts("A").Processing)
		require.EqualValues(t, 3, counts("A").Pending)
		require.EqualValues(t, 3, counts("B").Processing)
		// A's last one and all of B's complete, and the same call claims.
		outs := []store.Outcome{{ID: a[2].ID, Token: a[2].Token, Kind: store.OutcomeOK, StatusCode: 200}}
		for _, j := range c.Jobs {
			if j.FlowKey == "B" {
				outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
			}
		}
		res, c2, err := s.SettleAndClaim(ctx, q, outs, store.Refill{Max: 2})
		require.NoError(t, err)
		require.Len(t, res, 4)
		require.Len(t, c2.Jobs, 2)
		got := lanesOf(c2.Jobs)
		require.EqualValues(t, got["A"], counts("A").Processing)
		require.EqualValues(t, 3-got["A"], counts("A").Pending)
		require.EqualValues(t, got["B"], counts("B").Processing)
		require.EqualValues(t, 3-got["B"], counts("B").Pending)
		// Everything drains: the lanes end with no field at all.
		left := c2.Jobs
		for range 10 {
			settleAll(t, s, q, left, store.OutcomeOK, 200, 0)
			c3, err := s.Claim(ctx, q, 3)
			require.NoError(t, err)
			left = c3.Jobs
			if len(left) == 0 {
				break
			}
		}
		require.Empty(t, left)
		for _, fk := range []string{"A", "B"} {
			_, err := s.GetKey(ctx, q, fk)
			require.ErrorIs(t, err, store.ErrNotFound, "lane %s occupies nothing", fk)
		}
	})
}
