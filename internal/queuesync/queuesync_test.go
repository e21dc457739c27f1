package queuesync_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/queuesync"
	"github.com/simpleq/simpleqd/internal/store"
)

// applied records the syncer's Apply calls.
type applied struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	changed map[string]int64 // name -> rev
	removed []string
}

func (a *applied) apply(changed map[string]*store.QueueDef, removed []string) {
	c := call{changed: map[string]int64{}, removed: removed}
	for n, d := range changed {
		c.changed[n] = d.Rev
	}
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

func (a *applied) last(t *testing.T, n int) call {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.Len(t, a.calls, n)
	return a.calls[n-1]
}

func setup(t *testing.T) (*store.Store, *redis.Client, *applied, *queuesync.Syncer) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := store.New(rdb, store.Options{Prefix: "qs"})
	require.NoError(t, err)
	require.NoError(t, st.Load(context.Background()))
	a := &applied{}
	s := queuesync.New(queuesync.Options{Source: st, Redis: rdb, Apply: a.apply, CheckEvery: 10 * time.Millisecond, ApplyEvery: time.Millisecond})
	return st, rdb, a, s
}

func put(t *testing.T, st *store.Store, name string) int64 {
	t.Helper()
	_, rev, err := st.PutQueueDef(context.Background(), store.QueueDefParams{Name: name, WantRev: -1, Spec: []byte(`{"webhookUrl":"https://example.com/h"}`), Limits: store.DefLimits{}})
	require.NoError(t, err)
	return rev
}

// TestApplyGetsOnlyWhatChanged: the first read hands over every
// definition; after that each Apply carries only the queues written or
// deleted, whatever the number of others.
func TestApplyGetsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	st, _, a, s := setup(t)
	ctx := context.Background()
	require.NoError(t, s.Load(ctx))
	require.Empty(t, a.last(t, 1).changed, "the first read is applied even when empty")

	revs := map[string]int64{}
	for _, n := range []string{"a", "b", "c"} {
		revs[n] = put(t, st, n)
		require.NoError(t, s.Refresh(ctx, n))
	}
	require.Equal(t, map[string]int64{"c": revs["c"]}, a.last(t, 4).changed)
	require.Equal(t, 3, s.Len())

	// Read again unchanged: nothing to apply.
	require.NoError(t, s.Refresh(ctx, "a"))
	a.last(t, 4)

	revs["b"] = put(t, st, "b")
	require.NoError(t, s.Refresh(ctx, "b"))
	require.Equal(t, map[string]int64{"b": revs["b"]}, a.last(t, 5).changed)

	_, _, err := st.DropQueue(ctx, store.DropQueueParams{Name: "a", Purge: false})
	require.NoError(t, err)
	require.NoError(t, s.Refresh(ctx, "a"))
	c := a.last(t, 6)
	require.Empty(t, c.changed)
	require.Equal(t, []string{"a"}, c.removed)
	require.Equal(t, 2, s.Len())
}

// deaf is a source whose notifications go unheard: the syncer listens on
// a channel nobody publishes on.
type deaf struct{ *store.Store }

func (deaf) QueueDefsChannel() string { return "qs:nobody" }

// TestCheckCatchesWriteWithoutNotice: a write whose notification was lost
// is found by the registry check and applied alone.
func TestCheckCatchesWriteWithoutNotice(t *testing.T) {
	t.Parallel()
	st, rdb, a, _ := setup(t)
	s := queuesync.New(queuesync.Options{Source: deaf{st}, Redis: rdb, Apply: a.apply, CheckEvery: 10 * time.Millisecond, ApplyEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	put(t, st, "a")
	require.NoError(t, s.Load(ctx))
	require.Len(t, a.last(t, 1).changed, 1)
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()

	rev := put(t, st, "b")
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, c := range a.calls[1:] {
			if c.changed["b"] == rev && len(c.changed) == 1 {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	<-done
}
