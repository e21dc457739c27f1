package store_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// backend is one Redis the script tests run on. advance moves Redis' clock:
// miniredis pins it exactly; a real server can only be waited out, so the
// durations in these tests are a few tens of milliseconds.
type backend struct {
	name    string
	rdb     redis.UniversalClient
	advance func(time.Duration)
	// evalScripts: the store sends scripts with EVALSHA though Redis has
	// Functions (store.Options.EvalScripts), the path of an older Redis.
	evalScripts bool
}

func backends(t *testing.T) []backend {
	t.Helper()
	mr := miniredis.RunT(t)
	now := time.Now()
	mr.SetTime(now)
	mc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = mc.Close() })
	bs := []backend{{name: "miniredis", rdb: mc, advance: func(d time.Duration) {
		now = now.Add(d)
		mr.SetTime(now)
	}}}
	if _, err := execLookPath(); err == nil {
		srv := redistest.Start(t)
		sleep := func(d time.Duration) {
			time.Sleep(d) //nolint:testsleep // a real redis-server takes its time from its own clock: let d pass
		}
		bs = append(bs, backend{name: "redis-server", rdb: srv.Client(t), advance: sleep},
			backend{name: "redis-server-evalsha", rdb: redistest.Start(t).Client(t), advance: sleep, evalScripts: true})
	}
	return bs
}

func queue(name string) store.QueueParams {
	return store.QueueParams{Name: name,
		Mode: "standard", Concurrency: 10, RateLimitWindow: time.Second, MaxAttempts: 3, MaxDefers: 5,
		Timeout: 200 * time.Millisecond, AckTimeout: 300 * time.Millisecond, AckTimeoutAction: "retry",
		Backoff: store.Backoff{Type: "fixed", Base: 20 * time.Millisecond, Max: time.Second}, JobLifetime: time.Hour, Retention: time.Hour,
	}
}

func newStore(t *testing.T, rdb redis.UniversalClient) *store.Store {
	t.Helper()
	s, err := store.New(rdb, store.Options{Prefix: "t", LeaseMargin: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, s.Load(context.Background()))
	return s
}

func publish(t *testing.T, s *store.Store, q store.QueueParams, payload string) string {
	t.Helper()
	res, err := s.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(payload)}})
	require.NoError(t, err)
	require.False(t, res[0].Duplicate)
	return res[0].ID
}

func each(t *testing.T, f func(t *testing.T, b backend, s *store.Store)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			s, err := store.New(b.rdb, store.Options{Prefix: "t", LeaseMargin: 50 * time.Millisecond, EvalScripts: b.evalScripts})
			require.NoError(t, err)
			require.NoError(t, s.Load(context.Background()))
			require.Equal(t, b.name == "redis-server", s.UsesFunctions(), "%s: calls as functions", b.name)
			f(t, b, s)
		})
	}
}

func TestPublishClaimComplete(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("emails")
		id := publish(t, s, q, `{"b":1,"a":12345678901234567890}`)
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, j.Status)
		require.Equal(t, `{"b":1,"a":12345678901234567890}`, string(j.Payload))

		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Claimed, c.Word)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, id, c.Jobs[0].ID)
		require.Equal(t, 1, c.Jobs[0].Attempt)
		require.Equal(t, `{"b":1,"a":12345678901234567890}`, string(c.Jobs[0].Payload))
		// A claim writes a lease, not the record; reads still see it in flight.
		j, err = s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusProcessing, j.Status)

		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Processing: 1}, st.Counts)

		r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Completed, r[0].Word)
		// A second settle with the same token is fenced off.
		r, err = s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeFail}})
		require.NoError(t, err)
		require.Equal(t, store.Stale, r[0].Word)

		j, err = s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, j.Status)
		require.Equal(t, 1, j.Attempts)
		require.Len(t, j.History, 1)
		require.Equal(t, "success", j.History[0].Status)
		require.Equal(t, 200, *j.History[0].WebhookStatusCode)
		require.NotNil(t, j.CompletedAt)
	})
}

// TestReplayedJobKeepsItsHistory: a job that died and was replayed keeps
// its history, and its later success is appended to it (a first-attempt
// success of a fresh job writes no history entry of its own; see
// settle.lua's fast path).
func TestReplayedJobKeepsItsHistory(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("replayed")
		q.MaxAttempts = 1
		id := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"}})
		require.NoError(t, err)
		require.Equal(t, store.Dead, r[0].Word)
		n, err := s.Replay(ctx, q, []string{id})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		c, err = s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, 1, c.Jobs[0].Attempt, "replay resets attempts")
		r, err = s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 202}})
		require.NoError(t, err)
		require.Equal(t, store.Completed, r[0].Word)
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, j.Status)
		require.Len(t, j.History, 2)
		require.Equal(t, "failed", j.History[0].Status)
		require.Equal(t, "success", j.History[1].Status)
		require.Equal(t, 202, *j.History[1].WebhookStatusCode)
	})
}

func TestIdempotentPublish(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		jobs := []store.NewJob{{Payload: json.RawMessage(`{}`), IdempotencyKey: "k1"}, {Payload: json.RawMessage(`{}`), IdempotencyKey: "k1"}}
		res, err := s.Publish(ctx, q, jobs)
		require.NoError(t, err)
		require.False(t, res[0].Duplicate)
		require.True(t, res[1].Duplicate)
		require.Equal(t, res[0].ID, res[1].ID)
		// Another queue has its own keys.
		res2, err := s.Publish(ctx, queue("other"), jobs[:1])
		require.NoError(t, err)
		require.False(t, res2[0].Duplicate)
	})
}

func TestRetryThenDead(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		id := publish(t, s, q, `{}`)
		for attempt := 1; attempt <= 3; attempt++ {
			var c store.ClaimResult
			require.Eventually(t, func() bool {
				var err error
				c, err = s.Claim(ctx, q, 10)
				require.NoError(t, err)
				if c.Word != store.Claimed {
					b.advance(10 * time.Millisecond)
				}
				return c.Word == store.Claimed
			}, 5*time.Second, time.Millisecond)
			require.Equal(t, attempt, c.Jobs[0].Attempt)
			r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"}})
			require.NoError(t, err)
			if attempt < 3 {
				require.Equal(t, store.Retry, r[0].Word)
				c2, err := s.Claim(ctx, q, 10)
				require.NoError(t, err)
				require.Equal(t, store.Empty, c2.Word, "backoff keeps it back")
				require.Greater(t, c2.WakeIn, time.Duration(0))
			} else {
				require.Equal(t, store.Dead, r[0].Word)
				require.Equal(t, "max_attempts_exhausted", r[0].Detail)
			}
		}
		j, err := s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusDead, j.Status)
		require.Equal(t, "max_attempts_exhausted", *j.DeadReason)
		require.Equal(t, "boom", *j.LastError)
		require.Len(t, j.History, 3)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Dead: 1}, st.Counts)

		n, err := s.Replay(ctx, q, []string{id, id})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		j, err = s.GetJob(ctx, q, id)
		require.NoError(t, err)
		require.Equal(t, store.StatusPending, j.Status)
		require.Equal(t, 0, j.Attempts)
		require.Len(t, j.History, 3)
	})
}

func TestQueueHoldProbeReopen(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		for i := 0; i < 5; i++ {
			publish(t, s, q, `{}`)
		}
		c, err := s.Claim(ctx, q, 2)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		// Job 0 is rate limited for 60ms: the whole queue holds.
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 60 * time.Millisecond, Reason: "429"}})
		require.NoError(t, err)
		require.Equal(t, store.Deferred, r[0].Word)
		held, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Held, held.Word)
		require.Greater(t, held.WakeIn, time.Duration(0))
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldHeld, st.Hold.State)
		// A delivery in flight when the hold began finishes; its success does not reopen.
		r, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[1].ID, Token: c.Jobs[1].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Completed, r[0].Word)

		b.advance(70 * time.Millisecond)
		probe, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Claimed, probe.Word)
		require.Len(t, probe.Jobs, 1, "exactly one probe")
		require.True(t, probe.Jobs[0].Probe)
		require.WithinDuration(t, b.rdb.Time(ctx).Val(), probe.Jobs[0].ProbeAt, 2*time.Second, "taken at Redis' time")
		require.Equal(t, c.Jobs[0].ID, probe.Jobs[0].ID, "the deferred job waited where it was")
		require.Equal(t, 1, probe.Jobs[0].Attempt, "a defer spends no attempt")
		require.Equal(t, 1, probe.Jobs[0].DeferCount)
		again, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Probing, again.Word)
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.HoldProbing, st.Hold.State)
		require.Equal(t, probe.Jobs[0].ID, *st.Hold.ProbeJobID)

		r, err = s.Settle(ctx, q, []store.Outcome{{ID: probe.Jobs[0].ID, Token: probe.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Reopened, r[0].Word)
		open, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, open.Jobs, 3)
	})
}

func TestLatestReleaseWins(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		publish(t, s, q, `{}`)
		publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 2)
		require.NoError(t, err)
		// The seed's example, scaled: a 5-unit defer at T+0, a 2-unit defer at T+4.
		unit := 20 * time.Millisecond
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeDefer, RetryAfter: 5 * unit}})
		require.NoError(t, err)
		st0, _ := s.QueueStatus(ctx, q)
		b.advance(4 * unit)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[1].ID, Token: c.Jobs[1].Token, Kind: store.OutcomeDefer, RetryAfter: 2 * unit}})
		require.NoError(t, err)
		st1, _ := s.QueueStatus(ctx, q)
		require.True(t, st1.Hold.Until.After(*st0.Hold.Until), "T+4+2 releases later than T+0+5")
		require.GreaterOrEqual(t, st1.Hold.Until.Sub(*st0.Hold.Until), unit-5*time.Millisecond)
	})
}

func TestCallbacks(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		q.Mode = "ack"
		id := publish(t, s, q, `{}`)
		_, err := s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
		require.ErrorIs(t, err, store.ErrConflict, "pending job is not awaiting an outcome")
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck, Attempt: 2})
		require.ErrorIs(t, err, store.ErrStaleAttempt)
		// The ack arrives before the daemon records the 2xx: it counts.
		r, err := s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck, Attempt: 1})
		require.NoError(t, err)
		require.Equal(t, store.Completed, r.Word)
		rs, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeDelivered, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Stale, rs[0].Word)
		r, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackAck})
		require.NoError(t, err)
		require.Equal(t, store.Acked, r.Word)
		_, err = s.Callback(ctx, q, store.Callback{JobID: id, Kind: store.CallbackNack, Retryable: true})
		require.ErrorIs(t, err, store.ErrConflict)
		_, err = s.Callback(ctx, q, store.Callback{JobID: "job_00000000000000000000000000_q", Kind: store.CallbackAck})
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestLeaseExpiryIsAFailure(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("q")
		id := publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		b.advance(300 * time.Millisecond) // timeout 200ms + margin 50ms
		var again store.ClaimResult
		var reaped []store.Reaped
		require.Eventually(t, func() bool {
			again, err = s.Claim(ctx, q, 1)
			require.NoError(t, err)
			reaped = append(reaped, again.Reaped...)
			if again.Word != store.Claimed {
				b.advance(10 * time.Millisecond)
			}
			return again.Word == store.Claimed
		}, 5*time.Second, time.Millisecond)
		require.Equal(t, id, again.Jobs[0].ID)
		require.Equal(t, 2, again.Jobs[0].Attempt, "a lost delivery spends one attempt")
		require.Len(t, reaped, 1, "the claim reports what its housekeeping did")
		require.Equal(t, store.Reaped{Kind: "lease_expired", ID: id, Word: "RETRY", Detail: reaped[0].Detail}, reaped[0])
		// The first daemon wakes up late: its outcome is fenced off.
		r, err := s.Settle(ctx, q, []store.Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: store.OutcomeOK}})
		require.NoError(t, err)
		require.Equal(t, store.Stale, r[0].Word)
	})
}

// Redis keeps a small sorted set or hash as a listpack, scanned in full on
// every access; the queue's placeholder keeps the in-flight set and the
// leases hash in their O(1)/O(log n) encodings from the first claim on, also
// across an idle spell, without ever counting or waking as a job.
func TestInFlightKeysKeepTheirFastEncoding(t *testing.T) {
	t.Parallel()
	if _, err := execLookPath(); err != nil {
		t.Skip("needs redis-server")
	}
	rdb := redistest.Start(t).Client(t)
	s := newStore(t, rdb)
	ctx := context.Background()
	q := queue("encodings")
	keys := s.Keys(q.Name).List()
	inflight, leases := keys[1], keys[10]
	require.Contains(t, inflight, "inflight")
	require.Contains(t, leases, "leases")
	encodings := func() (string, string) {
		z, err := rdb.ObjectEncoding(ctx, inflight).Result()
		require.NoError(t, err)
		h, err := rdb.ObjectEncoding(ctx, leases).Result()
		require.NoError(t, err)
		return z, h
	}
	for round := range 2 {
		for range 3 {
			publish(t, s, q, `{}`)
		}
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 3, "round %d", round)
		z, h := encodings()
		require.Equal(t, "skiplist", z)
		require.Equal(t, "hashtable", h)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{Processing: 3}, st.Counts)

		var out []store.Outcome
		for _, j := range c.Jobs {
			out = append(out, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK, StatusCode: 200})
		}
		_, err = s.Settle(ctx, q, out)
		require.NoError(t, err)
		// Idle: nothing in flight, nothing due, and the placeholder is
		// neither counted nor a reason to wake (the next need is the
		// retention purge, an hour away).
		st, err = s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, store.Counts{}, st.Counts)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, store.Empty, c.Word)
		require.Empty(t, c.Reaped)
		require.Greater(t, c.WakeIn, 50*time.Minute)
		z, h = encodings()
		require.Equal(t, "skiplist", z, "still, while idle")
		require.Equal(t, "hashtable", h, "still, while idle")
	}
}

// OnScript is told about every script call, by script name, with its error:
// it is how the daemon's Redis latency metrics see the calls.
func TestOnScriptSeesEveryCall(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	type call struct {
		script string
		took   time.Duration
		err    error
	}
	var mu sync.Mutex
	var calls []call
	s, err := store.New(rdb, store.Options{Prefix: "t", OnScript: func(script string, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{script, took, err})
	}})
	require.NoError(t, err)
	require.NoError(t, s.Load(context.Background()))
	q := queue("timed")
	publish(t, s, q, `{}`)
	_, err = s.Claim(context.Background(), q, 1)
	require.NoError(t, err)
	mu.Lock()
	require.Len(t, calls, 2)
	require.Equal(t, "publish", calls[0].script)
	require.Equal(t, "claim", calls[1].script)
	for _, c := range calls {
		require.NoError(t, c.err)
		require.Positive(t, c.took)
	}
	mu.Unlock()

	mr.Close()
	_, err = s.Claim(context.Background(), q, 1)
	require.ErrorIs(t, err, store.ErrUnavailable)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 3)
	require.Equal(t, "claim", calls[2].script)
	require.Error(t, calls[2].err, "a failed call is reported as failed")
}
