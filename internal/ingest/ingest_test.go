package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/ingest"
	"github.com/simpleq/simpleqd/internal/store"
)

// slowStore records how many calls it got and answers each job with its payload as id.
type slowStore struct {
	calls atomic.Int64
	jobs  atomic.Int64
	gate  chan struct{}
}

func (s *slowStore) Publish(ctx context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
	s.calls.Add(1)
	s.jobs.Add(int64(len(jobs)))
	if s.gate != nil {
		<-s.gate
	}
	out := make([]store.Published, len(jobs))
	for i, j := range jobs {
		out[i] = store.Published{ID: string(j.Payload)}
	}
	return out, nil
}

func TestConcurrentPublishesAreMergedAndAnsweredIndividually(t *testing.T) {
	t.Parallel()
	st := &slowStore{gate: make(chan struct{})}
	c := ingest.New(st)
	q := config.Queue{Name: "q"}
	const n = 200
	var wg sync.WaitGroup
	results := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := c.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(fmt.Sprint(i))}})
			require.NoError(t, err)
			results[i] = res[0].ID
		}(i)
	}
	// Let the first call block while the rest queue up, then release all.
	require.Eventually(t, func() bool { return st.calls.Load() == 1 }, time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return c.Waiting("q")+int(st.jobs.Load()) == n }, 5*time.Second, time.Millisecond,
		"every other publish waits behind the first call")
	close(st.gate)
	wg.Wait()
	for i := range results {
		require.Equal(t, fmt.Sprint(i), results[i], "each caller gets its own job's result")
	}
	require.EqualValues(t, n, st.jobs.Load())
	require.Less(t, st.calls.Load(), int64(n/4), "calls were merged")
}

func TestIdlePublishGoesAlone(t *testing.T) {
	t.Parallel()
	st := &slowStore{}
	c := ingest.New(st)
	for i := 0; i < 5; i++ {
		res, err := c.Publish(context.Background(), config.Queue{Name: "q"}, []store.NewJob{{Payload: json.RawMessage(`1`)}})
		require.NoError(t, err)
		require.Len(t, res, 1)
	}
	require.EqualValues(t, 5, st.calls.Load())
}

// stuckStore never answers until its context ends; it counts the calls.
type stuckStore struct{ calls atomic.Int64 }

func (s *stuckStore) Publish(ctx context.Context, _ config.Queue, _ []store.NewJob) ([]store.Published, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCallTimeoutBoundsEveryCall: with a call timeout, a publish whose own
// context has no deadline still ends (with an error) when Redis does not
// answer, within the timeout of its own arrival: also when it queued behind
// a call that was already stuck.
func TestCallTimeoutBoundsEveryCall(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	st := &stuckStore{}
	c := ingest.New(st).WithCallTimeout(timeout)
	q := config.Queue{Name: "q"}
	var wg sync.WaitGroup
	publish := func(i int) {
		defer wg.Done()
		start := time.Now()
		_, err := c.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(fmt.Sprint(i))}})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// Queued behind the stuck call, it would take about 2 × timeout.
		require.Less(t, time.Since(start), timeout+150*time.Millisecond, "publish %d", i)
	}
	wg.Add(1)
	go publish(0)
	require.Eventually(t, func() bool { return st.calls.Load() == 1 }, time.Second, time.Millisecond, "the first call is stuck")
	for i := 1; i < 5; i++ {
		wg.Add(1)
		go publish(i)
	}
	wg.Wait()
}
