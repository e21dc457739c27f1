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

// The scripts enforce the settings the fleet last wrote to Redis, not the
// ones the calling daemon holds: two daemons in the middle of a rolling
// reload, one with concurrency 1 and one with 3, claim under one limit.
func TestSettingsInRedisOneSetForTheFleet(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, old *store.Store) {
		ctx := context.Background()
		name := "conf-" + b.name
		qOld := queue(name)
		qOld.Concurrency = 1
		for i := range 4 {
			publish(t, old, qOld, fmt.Sprintf(`{"n":%d}`, i))
		}
		// The daemon still on the old configuration has written it.
		st := b.rdb.HGet(ctx, "t:{"+name+"}:state", "conf").Val()
		require.Contains(t, st, "v1,standard,1,", "the settings are in the queue's state hash")

		// A reloaded daemon writes the new limit on its first call...
		reloaded := newStore(t, b.rdb)
		qNew := qOld
		qNew.Concurrency = 3
		res, err := reloaded.Claim(ctx, qNew, 1)
		require.NoError(t, err)
		require.Len(t, res.Jobs, 1)
		// ...and the old daemon, whose copy still says 1, claims under it.
		res, err = old.Claim(ctx, qOld, 10)
		require.NoError(t, err)
		require.Len(t, res.Jobs, 2, "3 in flight in all, the limit the fleet wrote last")
		res, err = old.Claim(ctx, qOld, 10)
		require.NoError(t, err)
		require.Equal(t, store.Busy, res.Word)
	})
}

// A queue whose settings Redis lost (a flush, a failover to a replica that
// never had them) answers NOCONF before writing anything; the Store writes
// its settings and sends the call again, so the caller sees nothing.
func TestSettingsLostAreWrittenAgain(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		name := "lost-" + b.name
		q := queue(name)
		state := "t:{" + name + "}:state"
		publish(t, s, q, `{"n":1}`)
		require.NoError(t, b.rdb.HDel(ctx, state, "conf", "confm").Err())

		res, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":2}`)}})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.NotEmpty(t, b.rdb.HGet(ctx, state, "conf").Val(), "written again")

		require.NoError(t, b.rdb.HDel(ctx, state, "conf", "confm").Err())
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		outs := make([]store.Outcome, 0, len(c.Jobs))
		for _, j := range c.Jobs {
			outs = append(outs, store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeOK})
		}
		require.NoError(t, b.rdb.HDel(ctx, state, "conf", "confm").Err())
		got, err := s.Settle(ctx, q, outs)
		require.NoError(t, err)
		require.Len(t, got, 2)
		for _, r := range got {
			require.Equal(t, store.Completed, r.Word)
		}
	})
}

// A queue created over the API has its settings written only while its
// definition is in Redis: a daemon whose copy of a deleted queue is a
// moment old gets an error (ErrUnavailable) and writes nothing, instead of
// bringing back the state hash the deletion removed.
func TestSettingsOfAQueueCreatedOverTheAPI(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		name := "api-" + b.name
		q := queue(name)
		q.Defined = true
		state := "t:{" + name + "}:state"

		_, err := s.Publish(ctx, q, []store.NewJob{{Payload: json.RawMessage(`{"n":1}`)}})
		require.ErrorIs(t, err, store.ErrUnavailable, "no definition: no settings, nothing written")
		require.Zero(t, b.rdb.Exists(ctx, state).Val())

		_, _, err = s.PutQueueDef(ctx, store.QueueDefParams{Name: name, WantRev: 0, Spec: []byte(`{}`), Limits: store.DefLimits{}})
		require.NoError(t, err)
		publish(t, s, q, `{"n":2}`)
		require.NotEmpty(t, b.rdb.HGet(ctx, state, "conf").Val())

		_, _, err = s.DropQueue(ctx, store.DropQueueParams{Name: name, Purge: true})
		require.NoError(t, err)
		require.Zero(t, b.rdb.Exists(ctx, state).Val(), "the deletion removed the state hash")
		_, err = s.Claim(ctx, q, 10)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Zero(t, b.rdb.Exists(ctx, state).Val(), "a late claim brings nothing back")
	})
}

// A QueueParams carrying a name only (a schedule look-up, a deletion of a
// queue's schedules) writes no settings: its zeros would become every
// daemon's limits.
func TestNameOnlyParamsWriteNoSettings(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		name := "bare-" + b.name
		_, err := s.ListSchedules(ctx, store.QueueParams{Name: name})
		require.NoError(t, err)
		require.Zero(t, b.rdb.HExists(ctx, "t:{"+name+"}:state", "conf").Val())
	})
}

// A delivery's lease is the claiming daemon's own (its webhook timeout
// plus its margin), not the one in the rules Redis holds: mid-way through
// a rolling reload that shortens timeout, a daemon still on the longer one
// keeps a lease that outlasts its HTTP request, so its job is not taken
// from it and delivered twice.
func TestLeaseIsTheClaimingDaemons(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		name := "lease-" + b.name
		long := queue(name)
		long.Timeout = 20 * time.Second
		old := newStore(t, b.rdb)
		_, err := old.Claim(ctx, long, 1) // writes its rules, lease 20,050 ms
		require.NoError(t, err)
		short := long
		short.Timeout = 100 * time.Millisecond
		publish(t, s, short, `{"n":1}`) // a reloaded daemon writes the short one
		require.Contains(t, b.rdb.HGet(ctx, "t:{"+name+"}:state", "conf").Val(), ",150,", "the rules say 150 ms")

		c, err := old.Claim(ctx, long, 1)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		deadline := b.rdb.ZScore(ctx, "t:{"+name+"}:inflight", c.Jobs[0].ID).Val()
		require.Greater(t, time.UnixMilli(int64(deadline)).Sub(b.rdb.Time(ctx).Val()), 10*time.Second,
			"the lease of the daemon whose request it guards")
	})
}
