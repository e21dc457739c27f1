package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// TestStatsCountOutcomes: deliveries, their outcomes, 429s, holds, probes
// and dead jobs land in the minute's bucket, as the scripts saw them.
func TestStatsCountOutcomes(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("stats")
		q.MaxAttempts = 1
		for i := 0; i < 5; i++ {
			publish(t, s, q, `{}`)
		}
		c, err := s.Claim(ctx, q, 4)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 4)
		_, err = s.Settle(ctx, q, []store.Outcome{
			{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200},
			{ID: c.Jobs[1].ID, Token: c.Jobs[1].Token, Kind: store.OutcomeOK, StatusCode: 204},
			{ID: c.Jobs[2].ID, Token: c.Jobs[2].Token, Kind: store.OutcomeFail, StatusCode: 500},
			{ID: c.Jobs[3].ID, Token: c.Jobs[3].Token, Kind: store.OutcomeDefer, StatusCode: 429, RetryAfter: 40 * time.Millisecond},
		})
		require.NoError(t, err)
		// A late outcome changes nothing, so it counts nothing.
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		b.advance(50 * time.Millisecond)
		p, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, p.Jobs, 1)
		require.True(t, p.Jobs[0].Probe)

		st, err := s.Stats(ctx, q, store.StatsParams{Since: time.Time{}, Until: time.Time{}})
		require.NoError(t, err)
		require.Len(t, st.Buckets, 61, "the last hour, whole minutes, the current one included")
		require.Equal(t, store.StatsCounters{Success: 2, Failed: 1, Deferred: 1, HTTP429: 1, Started: 5, Probes: 1, Holds: 1, Dead: 1}, st.Totals)
		last := st.Buckets[len(st.Buckets)-1]
		require.Equal(t, st.Totals, last.StatsCounters, "all of it in the current minute")
		require.Len(t, st.Holds, 1)
		require.InDelta(t, 40, st.Holds[0].Until.Sub(st.Holds[0].From).Milliseconds(), 5)
		require.InDelta(t, 40, st.HeldMS, 5)
		require.False(t, st.Since.After(st.Now.Add(-time.Hour)))
	})
}

// TestStatsCallbacks: an ack counts a success, a nack a failure, a defer
// callback backpressure (and a hold for scope queue only).
func TestStatsCallbacks(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("cbstats")
		q.Mode = "ack"
		for i := 0; i < 3; i++ {
			publish(t, s, q, `{}`)
		}
		c, err := s.Claim(ctx, q, 3)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 3)
		var out []store.Outcome
		for _, j := range c.Jobs {
			out = append(out, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeDelivered, StatusCode: 200})
		}
		_, err = s.Settle(ctx, q, out)
		require.NoError(t, err)
		_, err = s.Callback(ctx, q, store.Callback{JobID: c.Jobs[0].ID, Kind: store.CallbackAck})
		require.NoError(t, err)
		_, err = s.Callback(ctx, q, store.Callback{JobID: c.Jobs[1].ID, Kind: store.CallbackNack, Retryable: true})
		require.NoError(t, err)
		_, err = s.Callback(ctx, q, store.Callback{JobID: c.Jobs[2].ID, Kind: store.CallbackDefer, RetryAfter: time.Second, Scope: store.ScopeJob})
		require.NoError(t, err)
		st, err := s.Stats(ctx, q, store.StatsParams{Since: time.Time{}, Until: time.Time{}})
		require.NoError(t, err)
		require.Equal(t, store.StatsCounters{Success: 1, Failed: 1, Deferred: 1, Started: 3}, st.Totals)
		require.Empty(t, st.Holds, "a scope-job defer holds nothing")
	})
}

// TestStatsRetention: buckets older than 24 h are deleted as new minutes
// are written, the hash never holds more than the retention's minutes, and
// the key expires when nothing writes. miniredis pins Redis' clock.
func TestStatsRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	now := time.Date(2026, 3, 1, 0, 0, 30, 0, time.UTC)
	mr.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	q := queue("ret")
	deliver := func() {
		publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
	}
	// One delivery every 10 minutes for 30 hours.
	for i := 0; i < 180; i++ {
		deliver()
		now = now.Add(10 * time.Minute)
		mr.SetTime(now)
	}
	key := "t:{ret}:stats"
	fields, err := rdb.HLen(ctx, key).Result()
	require.NoError(t, err)
	// 24 h of 10-minute steps: 144 buckets of 2 counters, plus cur and mins.
	require.LessOrEqual(t, fields, int64(145*2+3))
	st, err := s.Stats(ctx, q, store.StatsParams{Since: now.Add(-30 * time.Hour), Until: now})
	require.NoError(t, err)
	require.Equal(t, now.Add(-24*time.Hour+time.Minute).Truncate(time.Minute), st.Since, "clamped to the retention")
	require.EqualValues(t, 143, st.Totals.Success, "the deliveries of the last 1,440 minutes (every 10 minutes, the last 10 minutes ago)")
	require.Len(t, st.Buckets, 1440)
	ttl := mr.TTL(key)
	require.Greater(t, ttl, 24*time.Hour)
	require.LessOrEqual(t, ttl, 25*time.Hour)
}

// TestStatsSameForEveryReader: the answer depends only on Redis, so two
// stores (two daemons) read identical statistics.
func TestStatsSameForEveryReader(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("same")
		publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		other := newStore(t, b.rdb)
		until := time.Now().Add(time.Minute)
		since := until.Add(-10 * time.Minute)
		a, err := s.Stats(ctx, q, store.StatsParams{Since: since, Until: until})
		require.NoError(t, err)
		o, err := other.Stats(ctx, q, store.StatsParams{Since: since, Until: until})
		require.NoError(t, err)
		a.Now, o.Now = time.Time{}, time.Time{}
		require.Equal(t, a, o)
		require.EqualValues(t, 1, a.Totals.Success)
	})
}

// TestStatsClockStepsBack: Redis' clock stepping back a minute (a failover
// to a replica whose clock is behind) neither loses nor double-counts a
// minute.
func TestStatsClockStepsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	now := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	mr.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	q := queue("back")
	deliver := func(kind store.OutcomeKind) {
		publish(t, s, q, `{}`)
		c, err := s.Claim(ctx, q, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		_, err = s.Settle(ctx, q, []store.Outcome{{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: kind, StatusCode: 200}})
		require.NoError(t, err)
	}
	deliver(store.OutcomeOK) // 10:00
	mr.SetTime(now.Add(time.Minute))
	deliver(store.OutcomeOK) // 10:01
	// Back to 10:00, with a counter that minute has not seen yet (the
	// first write of a field is what looks at the minute list).
	mr.SetTime(now)
	deliver(store.OutcomeFail)
	mr.SetTime(now.Add(time.Minute))
	deliver(store.OutcomeFail) // 10:01 again
	mins, err := rdb.HGet(ctx, "t:{back}:stats", "mins").Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"29539320", "29539321"}, strings.Split(mins, ","))
	st, err := s.Stats(ctx, q, store.StatsParams{Since: now.Add(-time.Minute), Until: now.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Totals.Success)
	require.EqualValues(t, 2, st.Totals.Failed)
	require.EqualValues(t, 1, st.Buckets[1].Success)
	require.EqualValues(t, 1, st.Buckets[2].Failed)
}
