package store_test

// Tests of the correctness review's findings at the edges of the state
// machine (../shared/review-correctness.md): each fails on the code before
// its fix.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// publishN publishes n empty jobs in one call.
func publishN(t *testing.T, s *store.Store, q store.QueueParams, n int) []string {
	t.Helper()
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{Payload: json.RawMessage(`{}`)}
	}
	res, err := s.Publish(context.Background(), q, jobs)
	require.NoError(t, err)
	ids := make([]string, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// holdQueue holds q for an hour with a queue-scope defer of a job of its own.
func holdQueue(t *testing.T, s *store.Store, q store.QueueParams) {
	t.Helper()
	ctx := context.Background()
	publish(t, s, q, `{}`)
	c, err := s.Claim(ctx, q, 1)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
	r, err := s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: time.Hour}})
	require.NoError(t, err)
	require.Contains(t, []store.SettleWord{store.Deferred, store.Dead}, r[0].Word, "held either way")
}

// Finding 2: when more than one batch of housekeeping is due, the claim
// reply asks for the next claim at once (wake 0) instead of leaving the rest
// to an unrelated wake-up: lifetimes on a held queue, purges on an idle one.
func TestHousekeepingBacklogAsksForTheNextBatchAtOnce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		held := queue("held")
		held.JobLifetime = 100 * time.Millisecond
		holdQueue(t, s, held)
		ids := publishN(t, s, held, 250)

		idle := queue("idle")
		idle.Retention = 100 * time.Millisecond
		idle.Concurrency = 500
		done := publishN(t, s, idle, 250)
		c, err := s.Claim(ctx, idle, 250)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 250)
		outs := make([]store.Outcome, len(c.Jobs))
		for i, j := range c.Jobs {
			outs[i] = store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200}
		}
		_, err = s.Settle(ctx, idle, outs)
		require.NoError(t, err)

		b.advance(150 * time.Millisecond)
		for round, want := range []int{100, 100, 50} {
			c, err := s.Claim(ctx, held, 10)
			require.NoError(t, err)
			require.Equal(t, store.Held, c.Word)
			require.Len(t, c.Reaped, want, "round %d: one batch of ended lifetimes", round)
			if round < 2 {
				require.Equal(t, time.Duration(0), c.WakeIn, "round %d: more lifetimes are due: claim again at once", round)
			} else {
				require.Greater(t, c.WakeIn, time.Duration(0), "all handled: nothing due now")
			}
		}
		for _, id := range ids {
			j, err := s.GetJob(ctx, held, id)
			require.NoError(t, err)
			require.Equal(t, store.StatusDead, j.Status)
			require.Equal(t, "lifetime_exceeded", *j.DeadReason)
		}

		c, err = s.Claim(ctx, idle, 10)
		require.NoError(t, err)
		require.Equal(t, time.Duration(0), c.WakeIn, "more purges are due: claim again at once")
		c, err = s.Claim(ctx, idle, 10)
		require.NoError(t, err)
		require.Equal(t, time.Duration(0), c.WakeIn)
		c, err = s.Claim(ctx, idle, 10)
		require.NoError(t, err)
		require.NotEqual(t, time.Duration(0), c.WakeIn, "all purged")
		for _, id := range done {
			_, err := s.GetJob(ctx, idle, id)
			require.ErrorIs(t, err, store.ErrNotFound)
		}
	})
}

// Finding 2, leases: more expired leases than one batch (a crashed daemon
// with many deliveries) are all reaped without waiting for a safety wake.
func TestExpiredLeaseBacklogAsksForTheNextBatchAtOnce(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("crashed")
		q.Concurrency = 500
		publishN(t, s, q, 250)
		c, err := s.Claim(ctx, q, 250)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 250) // then the daemon dies
		b.advance(q.Timeout + 100*time.Millisecond)
		reaped := 0
		for round := 0; round < 3; round++ {
			c, err := s.Claim(ctx, q, 0)
			require.NoError(t, err)
			reaped += len(c.Reaped)
			if round < 2 {
				require.Equal(t, time.Duration(0), c.WakeIn, "round %d", round)
			}
		}
		require.Equal(t, 250, reaped)
	})
}

// Finding 3: a fixed backoff waits base every time: neither capped by max
// nor jittered.
func TestFixedBackoffWaitsBase(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("fixed")
		q.MaxAttempts = 10
		q.JobLifetime = 24 * time.Hour
		q.Backoff = store.Backoff{Type: "fixed", Base: 20 * time.Minute, Max: 10 * time.Minute, Jitter: true}
		id := publish(t, s, q, `{}`)
		for attempt := 1; attempt <= 3; attempt++ {
			before := time.Now()
			skip := 20 * time.Minute
			if attempt == 1 {
				skip = 0
			}
			lease := claimOne(t, s, q, id, skip, b)
			r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: lease, Kind: store.OutcomeFail, StatusCode: 500}})
			require.NoError(t, err)
			require.Equal(t, store.Retry, r[0].Word)
			due, _ := strconv.ParseInt(r[0].Detail, 10, 64)
			st, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			wait := time.UnixMilli(due).Sub(st.History[len(st.History)-1].Timestamp)
			require.Equal(t, 20*time.Minute, wait, "attempt %d: fixed waits base exactly (started %s)", attempt, before.Format(time.RFC3339))
		}
	})
}

// claimOne claims id, advancing Redis' clock by skip first when the backend
// allows it (miniredis); on a real server the job is made due by a release.
func claimOne(t *testing.T, s *store.Store, q store.QueueParams, id string, skip time.Duration, b backend) string {
	t.Helper()
	if skip > 0 {
		if b.name != "miniredis" {
			t.Skip("needs a clock that can be moved by minutes")
		}
		b.advance(skip)
	}
	c, err := s.Claim(context.Background(), q, 1)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1, "%+v", c)
	require.Equal(t, id, c.Jobs[0].ID)
	return c.Jobs[0].Token
}

// Finding 7: a start exactly rateLimitWindow old still counts: two starts
// are always at least a window apart (miniredis pins the clock exactly).
func TestRateWindowIsStrict(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	now := time.Now()
	mr.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	ctx := context.Background()
	q := queue("rate")
	q.RateLimitMax, q.RateLimitWindow = 1, 100*time.Millisecond
	publishN(t, s, q, 3)
	c, err := s.Claim(ctx, q, 3)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
	mr.SetTime(now.Add(100 * time.Millisecond))
	c, err = s.Claim(ctx, q, 3)
	require.NoError(t, err)
	require.Equal(t, store.Rate, c.Word, "a start exactly one window old still fills the window")
	mr.SetTime(now.Add(101 * time.Millisecond))
	c, err = s.Claim(ctx, q, 3)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
}

// Finding 8: each pending job keeps its own lifetime end, whatever the
// queue's jobLifetime is now: raised or lowered after the job was published,
// and while the queue is paused.
func TestPendingLifetimeIsTheJobsOwn(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("reload")
		require.NoError(t, s.Pause(ctx, q, "test"))
		q.JobLifetime = 100 * time.Millisecond
		short := publish(t, s, q, `{}`)
		q.JobLifetime = time.Hour // a reload raised it
		long := publish(t, s, q, `{}`)
		q.JobLifetime = 100 * time.Millisecond // and lowered it again
		short2 := publish(t, s, q, `{}`)
		q.JobLifetime = time.Hour
		b.advance(150 * time.Millisecond)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Paused, c.Word)
		require.Len(t, c.Reaped, 2)
		for _, id := range []string{short, short2} {
			j, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			require.Equal(t, store.StatusDead, j.Status, "its own end passed while paused")
			require.Equal(t, "lifetime_exceeded", *j.DeadReason)
		}
		j, err := s.GetJob(ctx, q, long)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, j.Status)
		require.Greater(t, c.WakeIn, 50*time.Minute, "next lifetime end is the long job's")
	})
}

// Finding 4: a claim or settle call sent again under the same name (its
// reply was lost) answers with what the first run did: the same leases, the
// same outcome words; nothing more is leased and nothing is leased to nobody.
func TestCallSentAgainIsAnsweredFromItsFirstRun(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("again")
		publishN(t, s, q, 6)
		call := s.NewCall()
		first, err := s.ClaimCall(ctx, q, store.ClaimParams{Max: 2, Call: call})
		require.NoError(t, err)
		require.Len(t, first.Jobs, 2)
		again, err := s.ClaimCall(ctx, q, store.ClaimParams{Max: 2, Call: call})
		require.NoError(t, err)
		require.Equal(t, store.Claimed, again.Word)
		require.Equal(t, first.Jobs, again.Jobs, "the same jobs under the same leases")
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(2), st.Counts.Processing, "nothing more leased")

		outs := []store.Outcome{
			{ID: first.Jobs[0].ID, Token: first.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200},
			{ID: first.Jobs[1].ID, Token: first.Jobs[1].Token, Kind: store.OutcomeFail, StatusCode: 500},
		}
		refill := store.Refill{Max: 2, Call: s.NewCall()}
		r1, c1, err := s.SettleAndClaim(ctx, q, outs, refill)
		require.NoError(t, err)
		r2, c2, err := s.SettleAndClaim(ctx, q, outs, refill)
		require.NoError(t, err)
		require.Equal(t, []store.SettleWord{store.Completed, store.Retry}, []store.SettleWord{r1[0].Word, r1[1].Word})
		require.Equal(t, r1, r2, "the outcome words of the first run, not STALE")
		require.Len(t, c1.Jobs, 2)
		require.Equal(t, c1.Jobs, c2.Jobs)
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, int64(3), st.Counts.Processing, "two in flight, one waiting for its retry")
	})
}

// Finding 5: a nack or defer sent again after its reply was lost (the API
// answered 503; the worker retries) is answered 2xx again, not 409.
func TestCallbackSentAgainIsNotAConflict(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		for i, cb := range []store.Callback{
			{Kind: store.CallbackDefer, RetryAfter: time.Hour, Scope: store.ScopeJob},
			{Kind: store.CallbackDefer, RetryAfter: time.Hour, Scope: store.ScopeJob, Attempt: 1},
			{Kind: store.CallbackNack, Retryable: true, Attempt: 1},
			{Kind: store.CallbackNack, Retryable: false},
		} {
			q := queue(fmt.Sprintf("cb%d", i)) // a queue each: a retried job of one case is not claimed by the next
			q.Mode = "ack"
			id := publish(t, s, q, `{}`)
			c, err := s.Claim(ctx, q, 1)
			require.NoError(t, err)
			_, err = s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
			require.NoError(t, err)
			cb.JobID = id
			r, err := s.Callback(ctx, q, cb)
			require.NoError(t, err)
			require.NotEqual(t, store.Repeated, r.Word)
			before, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			r, err = s.Callback(ctx, q, cb)
			require.NoError(t, err, "%s sent again: applied once, answered 2xx", cb.Kind)
			require.Equal(t, store.Repeated, r.Word)
			after, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			require.Equal(t, before, after, "%s sent again changes nothing", cb.Kind)
			// A different callback is still judged on the job's state.
			_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
			require.ErrorIs(t, err, store.ErrConflict)
		}
	})
}

// Finding 12: a job's history keeps its latest entries within a bound, so
// an append never copies an unbounded history.
func TestHistoryIsBounded(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	ctx := context.Background()
	q := queue("long")
	q.MaxDefers = 100000
	id := publish(t, s, q, `{}`)
	const defers = 600
	for i := 0; i < defers; i++ {
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1, "defer %d", i)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429,
			Reason: fmt.Sprintf("limited %d", i)}})
		require.NoError(t, err)
		require.NoError(t, s.Resume(ctx, q))
	}
	n, err := rdb.HStrLen(ctx, s.Keys(q.Name).List()[3], id).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, n, int64(32768))
	j, err := s.GetJob(ctx, q, id)
	require.NoError(t, err)
	require.Less(t, len(j.History), defers, "the oldest entries went")
	require.Greater(t, len(j.History), 100)
	require.Equal(t, fmt.Sprintf("limited %d", defers-1), *j.History[len(j.History)-1].Reason, "the newest entry is kept")
	require.Equal(t, defers, j.DeferCount)
}

// An ack's history entry is SimpleQ's "success" with acked; one stored by an
// earlier version as "acked" reads back the same way, nothing rewritten.
func TestAckEntryIsASuccess(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("acks")
		q.Mode = "ack"
		id := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 202}})
		require.NoError(t, err)
		_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
		require.NoError(t, err)
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Len(t, j.History, 1)
		require.Equal(t, "success", j.History[0].Status)
		require.True(t, j.History[0].Acked)
		require.Equal(t, 202, *j.History[0].WebhookStatusCode, "the delivery's 2xx")

		hist := s.Keys(q.Name).List()[3]
		stored, err := b.rdb.HGet(ctx, hist, id).Result()
		require.NoError(t, err)
		old := strings.Replace(strings.Replace(stored, `"success"`, `"acked"`, 1), `,"acked":true`, "", 1)
		require.NoError(t, b.rdb.HSet(ctx, hist, id, old).Err())
		j, err = s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, "success", j.History[0].Status, "an old acked entry reads back as success")
		require.True(t, j.History[0].Acked)
		raw, err := b.rdb.HGet(ctx, hist, id).Result()
		require.NoError(t, err)
		require.Equal(t, old, raw, "nothing rewritten")
	})
}

// Finding 9: an HTTP-date Retry-After reaches the script as a date and
// becomes a wait on Redis' clock, here an hour ahead of this process'.
func TestRetryAtIsJudgedOnRedisClock(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	redisNow := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	mr.SetTime(redisNow)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	ctx := context.Background()
	q := queue("date")
	q.JobLifetime = 3 * time.Hour
	id := publish(t, s, q, `{}`)
	c, err := s.Claim(ctx, q, 1)
	require.NoError(t, err)
	at := redisNow.Add(10 * time.Second)
	r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAt: at}})
	require.NoError(t, err)
	require.Equal(t, store.Deferred, r[0].Word)
	require.Equal(t, strconv.FormatInt(at.UnixMilli(), 10), r[0].Detail, "released at the date itself")
}

// The breaker (semantics.md §4b): N consecutive failures hold the queue like
// backpressure; one probe after holdFor; its failure holds again, its
// success reopens and resets the count. Backpressure neither counts nor resets.
func TestBreaker(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("brk")
		q.MaxAttempts = 10
		q.Backoff = store.Backoff{Type: "fixed", Base: time.Millisecond}
		q.Breaker = store.Breaker{Failures: 3, HoldFor: 80 * time.Millisecond}
		publishN(t, s, q, 10)
		fail := func(j store.ClaimedJob) store.Settled {
			r, err := s.Settle(ctx, q, []store.Outcome{{ID: j.ID, Token: j.Token, Kind: store.OutcomeFail, StatusCode: 401, Error: "webhook responded 401"}})
			require.NoError(t, err)
			return r[0]
		}
		c, err := s.Claim(ctx, q, 4)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 4)
		require.True(t, fail(c.Jobs[0]).BreakerUntil.IsZero())
		// A 429 in between neither counts nor resets.
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[3].ID, Token: c.Jobs[3].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 0}})
		require.NoError(t, err)
		require.Equal(t, store.Deferred, r[0].Word)
		require.True(t, fail(c.Jobs[1]).BreakerUntil.IsZero())
		tripped := fail(c.Jobs[2])
		require.False(t, tripped.BreakerUntil.IsZero(), "the third consecutive failure trips the breaker")
		require.Equal(t, store.Retry, tripped.Word, "the failure that tripped it spent its attempt as usual")

		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldHeld, st.Hold.State)
		require.Equal(t, "breaker: 3 consecutive failures; last: webhook responded 401", *st.Hold.Reason)
		held, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Held, held.Word, "nothing delivered while the breaker holds")

		b.advance(100 * time.Millisecond)
		probe, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, probe.Jobs, 1)
		require.True(t, probe.Jobs[0].Probe)
		require.False(t, fail(probe.Jobs[0]).BreakerUntil.IsZero(), "a failed probe holds the queue again")
		held, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Held, held.Word)

		b.advance(100 * time.Millisecond)
		probe, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, probe.Jobs, 1)
		r, err = s.Settle(ctx, q, []store.Outcome{{ID: probe.Jobs[0].ID, Token: probe.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Reopened, r[0].Word)
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldOpen, st.Hold.State)

		// The count started again from 0: two failures hold nothing.
		c, err = s.Claim(ctx, q, 2)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		require.True(t, fail(c.Jobs[0]).BreakerUntil.IsZero())
		require.True(t, fail(c.Jobs[1]).BreakerUntil.IsZero())
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldOpen, st.Hold.State)
	})
}
