package dispatch_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

// chainStore hands out one job per claim or settle call until it has handed
// out n, so a pump keeps one delivery going through settle calls only, and
// records whether each settle call asked for housekeeping.
type chainStore struct {
	n int

	mu      sync.Mutex
	handed  int
	skipped []bool // per settle call that claimed: SkipHousekeeping
}

func (s *chainStore) next() store.ClaimResult {
	if s.handed == s.n {
		return store.ClaimResult{Word: store.Empty, WakeIn: time.Hour}
	}
	s.handed++
	j := store.ClaimedJob{ID: "job_" + strconv.Itoa(s.handed) + "_q", Attempt: 1, Token: "t", Payload: []byte(`{}`), CreatedAt: time.Now()}
	return store.ClaimResult{Word: store.Claimed, Jobs: []store.ClaimedJob{j}}
}

func (s *chainStore) NewCall() string { return "call" }

func (s *chainStore) ClaimCall(_ context.Context, _ store.QueueParams, p store.ClaimParams) (store.ClaimResult, error) {
	max := p.Max
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handed > 0 || max == 0 {
		return store.ClaimResult{Word: store.Empty, WakeIn: time.Hour}, nil
	}
	return s.next(), nil
}

func (s *chainStore) SettleAndClaim(_ context.Context, _ store.QueueParams, outs []store.Outcome, refill store.Refill) ([]store.Settled, store.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := make([]store.Settled, len(outs))
	for i := range res {
		res[i] = store.Settled{Word: "COMPLETED"}
	}
	if refill.Max == 0 {
		return res, store.ClaimResult{}, nil
	}
	s.skipped = append(s.skipped, refill.SkipHousekeeping)
	return res, s.next(), nil
}

func (s *chainStore) settleCalls() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.skipped...)
}

// TestSettleCallsRunHousekeepingEveryInterval: a saturated queue refills its
// slots through settle calls, and those run the queue's Redis housekeeping
// only once Options.Housekeeping has passed since a claim of this daemon
// last ran it; with a negative interval, every settle call runs it.
func TestSettleCallsRunHousekeepingEveryInterval(t *testing.T) {
	t.Parallel()
	fast := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer fast.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		time.Sleep(30 * time.Millisecond) //nolint:testsleep // a delivery that takes longer than the interval in wall time
	}))
	defer slow.Close()

	run := func(every time.Duration, webhook string, jobs int) []bool {
		st := &chainStore{n: jobs}
		d := dispatch.New(dispatch.Options{Store: st, Deliverer: dispatch.NewDeliverer("t"), Linger: -1, Housekeeping: every})
		q := testQueue(webhook)
		q.Concurrency = 1
		d.SetQueues(map[string]config.Queue{"q": q})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		require.Eventually(t, func() bool { return len(st.settleCalls()) == jobs }, 10*time.Second, time.Millisecond)
		cancel()
		<-done
		return st.settleCalls()
	}

	for i, skipped := range run(-1, fast.URL, 20) {
		require.False(t, skipped, "settle call %d: a negative interval runs housekeeping in every call", i)
	}
	// The claim that started the chain ran it, and an hour has not passed.
	for i, skipped := range run(time.Hour, fast.URL, 20) {
		require.True(t, skipped, "settle call %d: housekeeping ran a moment ago", i)
	}
	// Each delivery takes 30 ms, longer than the interval: every settle
	// call finds housekeeping due again.
	for i, skipped := range run(20*time.Millisecond, slow.URL, 5) {
		require.False(t, skipped, "settle call %d: 20 ms have passed since housekeeping last ran", i)
	}
}
