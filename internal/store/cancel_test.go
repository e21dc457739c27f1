package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

func requireCancelled(t *testing.T, s *store.Store, q store.QueueParams, id, lastError string) {
	t.Helper()
	j, err := s.GetJob(context.Background(), q, id)
	require.NoError(t, err)
	require.Equal(t, store.StatusDead, j.Status)
	require.NotNil(t, j.DeadReason)
	require.Equal(t, "cancelled", *j.DeadReason)
	require.NotNil(t, j.LastError)
	require.Equal(t, lastError, *j.LastError)
}

// Waiting jobs (pending, delayed, in backoff) die cancelled at once, leave
// the counts, sit in the dead-letter list, and a replay delivers them.
func TestCancelWaiting(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("cw")
		pending := publish(t, s, q, `{"n":1}`)
		res, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":2}`), Delay: time.Hour}})
		require.NoError(t, err)
		delayed := res[0].ID
		// One in backoff: delivered once, failed.
		retry := publish(t, s, q, `{"n":3}`)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		for _, j := range c.Jobs {
			kind := store.OutcomeRelease
			if j.ID == retry {
				kind = store.OutcomeFail
			}
			_, err := s.Settle(ctx, q, []store.Outcome{{ID: j.ID, Token: j.Token, Kind: kind, StatusCode: 500, Error: "boom"}})
			require.NoError(t, err)
		}

		got, err := s.Cancel(ctx, q, store.CancelParams{ID: pending, Reason: ""})
		require.NoError(t, err)
		require.Equal(t, store.Cancelled{Was: store.StatusPending}, got)
		requireCancelled(t, s, q, pending, "cancelled")
		got, err = s.Cancel(ctx, q, store.CancelParams{ID: delayed, Reason: "not needed"})
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, got.Was)
		requireCancelled(t, s, q, delayed, "cancelled: not needed")
		got, err = s.Cancel(ctx, q, store.CancelParams{ID: retry, Reason: "x"})
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, got.Was)
		requireCancelled(t, s, q, retry, "cancelled: x")
		j, err := s.GetJob(ctx, q, retry)
		require.NoError(t, err)
		require.Len(t, j.History, 1, "a cancel adds no history entry")

		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Dead: 3}, st.Counts)

		// Twice: 409. Unknown: 404.
		_, err = s.Cancel(ctx, q, store.CancelParams{ID: pending, Reason: ""})
		require.ErrorIs(t, err, store.ErrConflict)
		_, err = s.Cancel(ctx, q, store.CancelParams{ID: s.NewID(q.Name), Reason: ""})
		require.ErrorIs(t, err, store.ErrNotFound)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, c.Jobs, "a cancelled job is never delivered")

		// Replay brings them back, and they are delivered.
		n, err := s.Replay(ctx, q, []string{pending, delayed, retry})
		require.NoError(t, err)
		require.Equal(t, 3, n)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 3)
		for _, cj := range c.Jobs {
			r, err := s.Settle(ctx, q, []store.Outcome{{ID: cj.ID, Token: cj.Token, Kind: store.OutcomeOK, StatusCode: 200}})
			require.NoError(t, err)
			require.Equal(t, store.Completed, r[0].Word)
		}
		_, err = s.Cancel(ctx, q, store.CancelParams{ID: pending, Reason: ""})
		require.ErrorIs(t, err, store.ErrConflict, "completed: 409")
	})
}

// A job cancelled in flight is dead at once; its slot stays taken until its
// delivery's (STALE) outcome is settled, or until its lease ends if its
// daemon is gone; a late callback is a conflict.
func TestCancelInFlightKeepsTheSlotUntilSettled(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("cf")
		q.Concurrency = 1
		a := publish(t, s, q, `{"a":1}`)
		next := publish(t, s, q, `{"b":2}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, a, c.Jobs[0].ID)

		got, err := s.Cancel(ctx, q, store.CancelParams{ID: a, Reason: "stop"})
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, got.Was)
		require.Equal(t, c.Jobs[0].Token, got.Token)
		requireCancelled(t, s, q, a, "cancelled: stop")

		c2, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Equal(t, store.Busy, c2.Word, "the cancelled delivery still holds the slot")

		r, err := s.Settle(ctx, q, []store.Outcome{{ID: a, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Stale, r[0].Word, "the late outcome changes nothing")
		requireCancelled(t, s, q, a, "cancelled: stop")

		c2, err = s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c2.Jobs, 1, "the settle freed the slot")
		require.Equal(t, next, c2.Jobs[0].ID)

		// Its daemon gone: the slot frees when the lease ends.
		_, err = s.Cancel(ctx, q, store.CancelParams{ID: next, Reason: ""})
		require.NoError(t, err)
		b.advance(q.Timeout + 100*time.Millisecond)
		third := publish(t, s, q, `{"c":3}`)
		require.Eventually(t, func() bool {
			c3, err := s.Claim(ctx, q, 1)
			require.NoError(t, err)
			return len(c3.Jobs) == 1 && c3.Jobs[0].ID == third
		}, 2*time.Second, 20*time.Millisecond)
	})
}

func TestCancelAwaitingAckFreesTheSlotAndRefusesCallbacks(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("ca")
		q.Mode = "ack"
		q.Concurrency = 1
		id := publish(t, s, q, `{}`)
		other := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Awaiting, r[0].Word)

		got, err := s.Cancel(ctx, q, store.CancelParams{ID: id, Reason: ""})
		require.NoError(t, err)
		require.Equal(t, store.Cancelled{Was: store.StatusAwaitingAck}, got)
		_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
		require.ErrorIs(t, err, store.ErrConflict)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Pending: 1, Dead: 1}, st.Counts)
		c, err = s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, other, c.Jobs[0].ID)
	})
}

// A cancelled probe hands the probe on: the next job probes.
func TestCancelProbeHandsItOn(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("cp")
		first := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: first, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 30 * time.Millisecond}})
		require.NoError(t, err)
		second := publish(t, s, q, `{}`)
		b.advance(60 * time.Millisecond)
		var probe store.ClaimedJob
		require.Eventually(t, func() bool {
			c, err := s.Claim(ctx, q, 5)
			require.NoError(t, err)
			if len(c.Jobs) == 1 {
				probe = c.Jobs[0]
			}
			return len(c.Jobs) == 1
		}, 2*time.Second, 10*time.Millisecond)
		require.True(t, probe.Probe)
		require.Equal(t, first, probe.ID)

		_, err = s.Cancel(ctx, q, store.CancelParams{ID: first, Reason: ""})
		require.NoError(t, err)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldProbing, st.Hold.State)
		require.Nil(t, st.Hold.ProbeJobID)

		c, err = s.Claim(ctx, q, 5)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1, "one probe at a time")
		require.True(t, c.Jobs[0].Probe)
		require.Equal(t, second, c.Jobs[0].ID)
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: second, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Reopened, r[0].Word)
	})
}

func TestCancelBulkFilters(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("cb")
		q.Concurrency = 2
		old := publishN(t, s, q, 5)
		b.advance(20 * time.Millisecond)
		cut := time.Now()
		if b.name == "miniredis" {
			cut = time.Time{} // its clock is pinned: judged by createdAt below
		}
		b.advance(20 * time.Millisecond)
		young := publishN(t, s, q, 5)
		c, err := s.Claim(ctx, q, 2) // old[0], old[1] in flight
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		if cut.IsZero() {
			j, err := s.GetJob(ctx, q, young[0])
			require.NoError(t, err)
			cut = j.CreatedAt
		}
		until := time.Now().Add(time.Minute)

		key := "tenant"
		n, done, err := s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{FlowKey: &key}, Reason: ""}, until, nil)
		require.NoError(t, err)
		require.True(t, done)
		require.Zero(t, n, "no job has that flow key: the filter matches nothing")

		n, done, err = s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{Statuses: []store.Status{store.StatusPending}, CreatedBefore: cut}, Reason: "old"}, until, nil)
		require.NoError(t, err)
		require.True(t, done)
		require.Equal(t, 3, n, "the old pending ones, not those in flight or young")
		for _, id := range old[2:] {
			requireCancelled(t, s, q, id, "cancelled: old")
		}

		var aborts []store.Abort
		n, done, err = s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{Statuses: []store.Status{store.StatusProcessing}}, Reason: ""}, until,
			func(a []store.Abort) { aborts = append(aborts, a...) })

		require.NoError(t, err)
		require.True(t, done)
		require.Equal(t, 2, n)
		require.ElementsMatch(t, []store.Abort{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token}, {ID: c.Jobs[1].ID, Token: c.Jobs[1].Token}}, aborts)

		n, done, err = s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{}, Reason: ""}, until, nil)
		require.NoError(t, err)
		require.True(t, done)
		require.Equal(t, 5, n)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Processing: 0, Dead: 10}, st.Counts)
	})
}

// Bulk cancel racing with claims and settles on a real Redis: no job is
// delivered (claimed) after it was cancelled, none is in two places, every
// cancelled delivery's outcome is STALE, and when both are done every slot
// is free.
func TestCancelBulkRacesClaims(t *testing.T) {
	t.Parallel()
	s := realStore(t)
	ctx := context.Background()
	q := queue("race-cancel")
	q.Concurrency = 20
	q.Timeout = time.Minute
	const total = 5000
	var ids []string
	for len(ids) < total {
		ids = append(ids, publishN(t, s, q, 1000)...)
	}
	var mu sync.Mutex
	claimedAt := map[string]time.Time{} // first claim
	stale := map[string]bool{}
	completed := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := s.Claim(ctx, q, 5)
				if err != nil {
					t.Error(err)
					return
				}
				var outs []store.Outcome
				mu.Lock()
				for _, j := range c.Jobs {
					if _, seen := claimedAt[j.ID]; seen {
						t.Errorf("job %s claimed twice", j.ID)
					}
					claimedAt[j.ID] = time.Now()
					outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
				}
				mu.Unlock()
				if len(outs) == 0 {
					continue
				}
				r, err := s.Settle(ctx, q, outs)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for k, o := range outs {
					switch r[k].Word {
					case "STALE":
						stale[o.ID] = true
					case "COMPLETED":
						completed[o.ID] = true
					}
				}
				mu.Unlock()
			}
		}()
	}
	n, done, err := s.CancelBulk(ctx, q, store.BulkCancelParams{Filter: store.CancelFilter{}, Reason: "race"}, time.Now().Add(time.Minute), nil)
	require.NoError(t, err)
	require.True(t, done)
	close(stop)
	wg.Wait()

	cancelled := 0
	rdb := s.Client()
	keys := s.Keys(q.Name).List()
	for _, id := range ids {
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		places := 0
		for _, k := range []string{keys[0], keys[1], keys[6]} {
			if err := rdb.ZScore(ctx, k, id).Err(); err == nil {
				places++
			} else {
				require.ErrorIs(t, err, redis.Nil)
			}
		}
		switch j.Status {
		case store.StatusDead:
			cancelled++
			require.Equal(t, "cancelled", *j.DeadReason)
			require.False(t, completed[id], "job %s completed and cancelled", id)
			require.Equal(t, 1, places, "job %s: dead, in the dead-letter list only", id)
		case store.StatusCompleted:
			require.True(t, completed[id], "job %s", id)
			require.False(t, stale[id])
			require.Equal(t, 0, places, "job %s: completed, in no set", id)
		default:
			t.Fatalf("job %s is %s after the cancel and the claimers ended", id, j.Status)
		}
	}
	require.Equal(t, n, cancelled)
	require.Equal(t, total, cancelled+len(completed))
	// Every slot is free again: the cancelled deliveries' settles freed theirs.
	left, err := rdb.ZCount(ctx, keys[1], "-inf", fmt.Sprint(int64(1)<<53)).Result()
	require.NoError(t, err)
	require.Zero(t, left, "in-flight set empty")
	t.Logf("cancelled %d, completed %d, of which %d cancelled in flight (STALE)", cancelled, len(completed), len(stale))
}

// runBulk steps a bulk cancel to its end, every step from StartCancel as a
// request sent again would be (so each goes on from the cursor Redis
// keeps), within lim; it fails if a step looks at more than lim.Look
// members or if the steps exceed maxSteps (a walk that looks at members
// again instead of going on). between, when not nil, runs after each step.
func runBulk(t *testing.T, s *store.Store, q store.QueueParams, f store.CancelFilter, lim store.CancelLimits, maxSteps int,
	between func(next store.CancelCursor)) (cancelled, steps int) {
	t.Helper()
	for cur := store.StartCancel; ; {
		step, err := s.BulkCancelStep(context.Background(), q, store.BulkCancelParams{Filter: f, Reason: "", Cursor: cur, Limits: lim})
		require.NoError(t, err)
		require.LessOrEqual(t, step.Looked, lim.Look, "a step looks at no more than its limit")
		cancelled += step.Cancelled
		steps++
		require.LessOrEqual(t, steps, maxSteps, "the walk goes on from where it stopped")
		if between != nil {
			between(step.Next)
		}
		if step.Next.Done() {
			return cancelled, steps
		}
	}
}

// A filtered bulk cancel is bounded by members looked at, not by matches:
// 60 young jobs due now that the age filter leaves, then 40 old ones
// delayed an hour that it takes. Each step looks at no more than 7, each
// request goes on from the stored cursor (never from the start again), and
// the walk takes exactly the old ones. Then jobs sharing one score (a
// publish batch, jobs delayed to the same millisecond) with matches
// scattered among them: each step finds its place in the run by its last
// member, whether that member is still there or not, and misses none.
func TestCancelBulkBoundedWalk(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("cbwalk")
		old := make([]store.NewJob, 40)
		for i := range old {
			old[i] = store.NewJob{Payload: json.RawMessage(`{}`), Delay: time.Hour}
		}
		res, err := s.Publish(ctx, q, old)
		require.NoError(t, err)
		b.advance(20 * time.Millisecond)
		young := publishN(t, s, q, 60)
		yj, err := s.GetJob(ctx, q, young[0])
		require.NoError(t, err)
		lim := store.CancelLimits{Look: 7, Budget: time.Second}

		n, steps := runBulk(t, s, q, store.CancelFilter{CreatedBefore: yj.CreatedAt}, lim, 100/7+3, nil)
		require.Equal(t, 40, n)
		t.Logf("%d steps for 100 members", steps)
		for _, r := range res {
			requireCancelled(t, s, q, r.ID, "cancelled")
		}
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 60, st.Counts.Pending)

		// Three of the young jobs, scattered, fail once (st r: processing,
		// waiting for their retry); then every waiting job gets one score.
		rdb, keys := s.Client(), s.Keys(q.Name).List()
		picked := []string{young[10], young[31], young[52]}
		for _, id := range picked {
			require.NoError(t, rdb.ZAddXX(ctx, keys[0], redis.Z{Score: 1, Member: id}).Err())
		}
		c, err := s.Claim(ctx, q, 3)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 3)
		var outs []store.Outcome
		for _, j := range c.Jobs {
			require.Contains(t, picked, j.ID)
			outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeFail, StatusCode: 500})
		}
		_, err = s.Settle(ctx, q, outs)
		require.NoError(t, err)
		for _, id := range young {
			require.NoError(t, rdb.ZAddXX(ctx, keys[0], redis.Z{Score: 5e12, Member: id}).Err())
		}

		// Between steps, the member the cursor names leaves the set (as a
		// claim would take it) and comes back after the next step.
		gone := ""
		restore := func() {
			if gone != "" {
				require.NoError(t, rdb.ZAdd(ctx, keys[0], redis.Z{Score: 5e12, Member: gone}).Err())
				gone = ""
			}
		}
		n, _ = runBulk(t, s, q, store.CancelFilter{Statuses: []store.Status{store.StatusProcessing}}, lim, 60/7+3,
			func(next store.CancelCursor) {
				restore()
				if _, member, ok := strings.Cut(next.Position, "\n"); ok {
					require.Equal(t, int64(1), rdb.ZRem(ctx, keys[0], member).Val())
					gone = member
				}
			})
		restore()
		require.Equal(t, 3, n)
		for _, id := range picked {
			requireCancelled(t, s, q, id, "cancelled")
		}
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 57, st.Counts.Pending)

		// A zero time budget stops each step after its first chunk.
		n, steps = runBulk(t, s, q, store.CancelFilter{}, store.CancelLimits{Look: 500, Budget: 0}, 57, nil)
		require.Equal(t, 57, n)
		require.GreaterOrEqual(t, steps, 57/16+1)
	})
}
