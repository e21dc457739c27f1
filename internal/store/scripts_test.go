package store_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// A Redis that lost the function library (FUNCTION FLUSH; a restart without
// persistence) gets it again from the next call, which then succeeds, and
// nothing one call of the library leaves in its state reaches the next: a
// keyed call, then a call with no key, then one on another queue's lanes.
func TestFunctionLibraryReloadsAndKeepsNoState(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s := newStore(t, rdb)
	require.True(t, s.UsesFunctions())
	ctx := context.Background()
	qa, qb := queue("fn-a"), queue("fn-b")
	publishKeyed(t, s, qa, "A", 2)
	publishN(t, s, qb, 1)
	require.NoError(t, rdb.FunctionFlush(ctx).Err())
	c, err := s.Claim(ctx, qa, 1)
	require.NoError(t, err, "the library is loaded again")
	require.Len(t, c.Jobs, 1)
	require.Equal(t, "A", c.Jobs[0].FlowKey)
	cb, err := s.Claim(ctx, qb, 5)
	require.NoError(t, err)
	require.Len(t, cb.Jobs, 1)
	require.Empty(t, cb.Jobs[0].FlowKey)
	publishKeyed(t, s, qb, "B", 1)
	cb, err = s.Claim(ctx, qb, 5)
	require.NoError(t, err)
	require.Len(t, cb.Jobs, 1)
	require.Equal(t, "B", cb.Jobs[0].FlowKey, "queue b's lane, not a's left from an earlier call")
	k, err := s.GetKey(ctx, qa, "A")
	require.NoError(t, err)
	require.Equal(t, int64(1), k.Counts.Pending)
	require.Equal(t, int64(1), k.Counts.Processing)

	// The EVALSHA path serves where Functions are refused, on the same data.
	e, err := store.New(rdb, store.Options{Prefix: "t", EvalScripts: true})
	require.NoError(t, err)
	require.NoError(t, e.Load(ctx))
	require.False(t, e.UsesFunctions())
	c, err = e.Claim(ctx, qa, 5)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
	require.Equal(t, "A", c.Jobs[0].FlowKey)
}

// An ACL user that may not run FUNCTION gets the scripts (EVALSHA).
func TestFunctionsRefusedByACLFallBackToScripts(t *testing.T) {
	t.Parallel()
	admin := redistest.Start(t).Client(t)
	ctx := context.Background()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "nofn", "on", ">pw", "~*", "&*", "+@all", "-@dangerous", "-function").Err())
	rdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "nofn", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	s := newStore(t, rdb)
	require.False(t, s.UsesFunctions())
	q := queue("acl")
	id := publish(t, s, q, `{}`)
	c, err := s.Claim(ctx, q, 1)
	require.NoError(t, err)
	require.Len(t, c.Jobs, 1)
	require.Equal(t, id, c.Jobs[0].ID)
}
