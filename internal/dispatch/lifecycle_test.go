package dispatch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
	"github.com/simpleq/simpleqd/internal/wakeup"
)

// The lazy pump lifecycle (Dispatcher): a queue's pump retires when it has
// nothing to do, and whatever can give the queue work makes a new one. These
// tests run against a real redis-server on loopback; each waits on the
// dispatcher's pump-end signal and on observed deliveries, never on sleeps.

// pumpIdle is the tests' Options.PumpIdle: short, so pumps retire at once.
const pumpIdle = 20 * time.Millisecond

// node is one daemon's worth of dispatching: a store, a wake-up bus and a
// dispatcher, on a shared Redis.
type node struct {
	st    queueparams.Store
	bus   *wakeup.Bus
	disp  *dispatch.Dispatcher
	ended atomic.Int32 // pumps that ended
	// subscribed is closed once the bus listens.
	subscribed chan struct{}
}

func startNode(t *testing.T, rd *redistest.Server, queues map[string]config.Queue) *node {
	t.Helper()
	raw, err := store.New(rd.Client(t), store.Options{Prefix: "lc", LeaseMargin: 50 * time.Millisecond})
	require.NoError(t, err)
	st := queueparams.Wrap(raw)
	require.NoError(t, st.Load(context.Background()))
	n := &node{st: st, subscribed: make(chan struct{})}
	n.disp = dispatch.New(dispatch.Options{Store: raw, Deliverer: dispatch.NewDeliverer("t"), Logger: zap.NewNop(),
		PumpIdle: pumpIdle, Grace: time.Second})
	dispatch.OnPumpEnd(n.disp, func(string) { n.ended.Add(1) })
	n.bus = wakeup.New(rd.Client(t), "lc:wake", n.disp.Wake, zap.NewNop())
	n.disp.SetBroadcast(n.bus)
	n.disp.SetQueues(queues)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	var once sync.Once
	go func() {
		defer wg.Done()
		_ = n.bus.Run(ctx, func() {
			n.disp.WakeAll()
			once.Do(func() { close(n.subscribed) })
		})
	}()
	go func() { defer wg.Done(); _ = n.disp.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return n
}

// quiet waits until n's bus listens and the checks of its start (Run's,
// and the bus's after it subscribed) are over: no pump runs, none waits.
func (n *node) quiet(t *testing.T) {
	t.Helper()
	<-n.subscribed
	require.Eventually(t, func() bool { return dispatch.Quiet(n.disp) }, 5*time.Second, time.Millisecond)
}

// retiredWhile waits until a pump has ended since ends was read and none
// runs, while cond holds: the queue waits with no pump.
func (n *node) retiredWhile(t *testing.T, ends int32, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool { return n.ended.Load() > ends && dispatch.Quiet(n.disp) && cond() },
		5*time.Second, time.Millisecond, msg)
}

func (n *node) publish(t *testing.T, q config.Queue, delay time.Duration) string {
	t.Helper()
	res, err := n.st.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(`{"n":1}`), Delay: delay}})
	require.NoError(t, err)
	n.bus.Notify(q.Name)
	return res[0].ID
}

func (n *node) status(t *testing.T, q config.Queue, id string) store.Status {
	t.Helper()
	j, err := n.st.GetJob(context.Background(), q, id)
	require.NoError(t, err)
	require.NotNil(t, j)
	return j.Status
}

// lifecycleQueue is a queue on url with quick retries.
func lifecycleQueue(name, url string) config.Queue {
	q := testQueue(url)
	q.Name = name
	q.Concurrency = 5
	q.Backoff = config.Backoff{Type: "fixed", Base: 10 * time.Millisecond, Max: 10 * time.Millisecond}
	q.JobLifetime = time.Hour
	q.Retention = time.Hour
	q.MaxDefers = 10
	return q
}

// hook is a webhook that answers with reply(n) for its n-th request (1-based).
type hook struct {
	*httptest.Server
	hits atomic.Int32
}

func newHook(t *testing.T, reply func(n int32, w http.ResponseWriter)) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reply(h.hits.Add(1), w)
	}))
	t.Cleanup(h.Close)
	return h
}

func ok200(int32, http.ResponseWriter) {}

// TestRetiredPumpWakesForPublishElsewhere: a daemon whose pump for a queue
// has retired delivers a job another daemon published, woken through the
// wake-up bus, and retires again once done.
func TestRetiredPumpWakesForPublishElsewhere(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := newHook(t, ok200)
	q := lifecycleQueue("cust-1", h.URL)
	b := startNode(t, rd, map[string]config.Queue{q.Name: q})
	b.quiet(t)
	a := startNode(t, rd, nil) // serves no queue: only publishes
	<-a.subscribed

	ends := b.ended.Load()
	id := a.publish(t, q, 0)
	require.Eventually(t, func() bool { return b.status(t, q, id) == store.StatusCompleted }, 5*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 1, h.hits.Load())
	b.retiredWhile(t, ends, func() bool { return true }, "the pump retires again once idle")
}

// TestRetiredPumpClaimsDelayedJobOnTime: a pump whose claim found only a
// delayed job retires at once, and the dispatcher's timer makes a new one
// when the job comes due.
func TestRetiredPumpClaimsDelayedJobOnTime(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := newHook(t, ok200)
	q := lifecycleQueue("cust-2", h.URL)
	b := startNode(t, rd, map[string]config.Queue{q.Name: q})
	b.quiet(t)

	const delay = 500 * time.Millisecond
	published := time.Now()
	ends := b.ended.Load()
	id := b.publish(t, q, delay)
	// Its claim said "due in 500ms": nothing to do until then.
	b.retiredWhile(t, ends, func() bool { return h.hits.Load() == 0 }, "the pump retires while the job is delayed")
	require.Eventually(t, func() bool { return b.status(t, q, id) == store.StatusCompleted }, 5*time.Second, 5*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(published), delay-50*time.Millisecond)
	require.EqualValues(t, 1, h.hits.Load())
}

// TestRetiredPumpClaimsAtHoldRelease: a webhook's 429 holds the queue; the
// pump retires during the hold and the hold's release makes a new one,
// which delivers the job.
func TestRetiredPumpClaimsAtHoldRelease(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := newHook(t, func(n int32, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	q := lifecycleQueue("cust-3", h.URL)
	b := startNode(t, rd, map[string]config.Queue{q.Name: q})
	b.quiet(t)

	ends := b.ended.Load()
	id := b.publish(t, q, 0)
	// Delivered once, deferred: held for 1s (the job shows as processing:
	// deferred, not yet waiting again).
	b.retiredWhile(t, ends, func() bool { return h.hits.Load() == 1 && b.status(t, q, id) != store.StatusCompleted },
		"the pump retires while the queue is held")
	require.Eventually(t, func() bool { return b.status(t, q, id) == store.StatusCompleted }, 5*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 2, h.hits.Load())
}

// TestRetiredPumpReapsExpiredLease: a job leased by a daemon that died
// (claimed here straight from the store, never settled) is retried by a
// daemon whose pump retired in the meantime: its claim's wake time was the
// lease's end.
func TestRetiredPumpReapsExpiredLease(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := newHook(t, ok200)
	q := lifecycleQueue("cust-4", h.URL)
	q.Timeout = 300 * time.Millisecond // lease: timeout + 50ms margin
	raw, err := store.New(rd.Client(t), store.Options{Prefix: "lc", LeaseMargin: 50 * time.Millisecond})
	require.NoError(t, err)
	st := queueparams.Wrap(raw)
	require.NoError(t, st.Load(context.Background()))
	res, err := st.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	dead, err := st.Claim(context.Background(), q, 1)
	require.NoError(t, err)
	require.Len(t, dead.Jobs, 1, "the dead daemon's lease")

	b := startNode(t, rd, map[string]config.Queue{q.Name: q})
	// Nothing to claim before the lease ends.
	b.retiredWhile(t, 0, func() bool { return h.hits.Load() == 0 && b.status(t, q, res[0].ID) == store.StatusProcessing },
		"the pump retires while another daemon's lease runs")
	require.Eventually(t, func() bool { return b.status(t, q, res[0].ID) == store.StatusCompleted }, 5*time.Second, 5*time.Millisecond)
	j, err := b.st.GetJob(context.Background(), q, res[0].ID)
	require.NoError(t, err)
	require.Equal(t, 2, j.Attempts, "the lost delivery counted as an attempt")
}

// TestRetiredPumpPauseAndResume: a paused queue's pump retires and new work
// does not make it claim; a resume (a state wake-up) does. The wake-ups are
// this daemon's own (no pub/sub echo), so the test knows every one.
func TestRetiredPumpPauseAndResume(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	h := newHook(t, ok200)
	q := lifecycleQueue("cust-5", h.URL)
	b := startNode(t, rd, map[string]config.Queue{q.Name: q})
	b.quiet(t)
	require.NoError(t, b.st.Pause(context.Background(), q, "test"))
	ends := b.ended.Load()
	b.disp.Wake(q.Name, true)
	b.retiredWhile(t, ends, func() bool { return true }, "the claim found it paused")

	res, err := b.st.Publish(context.Background(), q, []store.NewJob{{Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	b.disp.Wake(q.Name, false)
	require.Never(t, func() bool { return b.disp.ActivePumps() != 0 }, 100*time.Millisecond, time.Millisecond,
		"new work on a paused queue needs no pump")
	require.Equal(t, store.StatusPending, b.status(t, q, res[0].ID))

	require.NoError(t, b.st.Resume(context.Background(), q))
	b.disp.Wake(q.Name, true)
	require.Eventually(t, func() bool { return b.status(t, q, res[0].ID) == store.StatusCompleted }, 5*time.Second, 5*time.Millisecond)
}

// idleStore answers every claim: empty, nothing due.
type idleStore struct{ claims atomic.Int64 }

func (s *idleStore) NewCall() string { return "call" }

func (s *idleStore) ClaimCall(context.Context, store.QueueParams, store.ClaimParams) (store.ClaimResult, error) {
	s.claims.Add(1)
	return store.ClaimResult{Word: store.Empty, WakeIn: -1}, nil
}

func (s *idleStore) SettleAndClaim(context.Context, store.QueueParams, []store.Outcome, store.Refill) ([]store.Settled, store.ClaimResult, error) {
	return nil, store.ClaimResult{Word: store.Empty, WakeIn: -1}, nil
}

// TestIdleQueuesCostNoGoroutines: 2,000 idle queues are each claimed once
// at start and then cost no goroutine; a wake-up makes one pump, which
// retires again.
func TestIdleQueuesCostNoGoroutines(t *testing.T) {
	t.Parallel()
	const n = 2000
	st := &idleStore{}
	d := dispatch.New(dispatch.Options{Store: st, Deliverer: dispatch.NewDeliverer("t"), PumpIdle: pumpIdle})
	queues := make(map[string]config.Queue, n)
	for i := range n {
		q := testQueue("http://127.0.0.1:1/")
		q.Name = "q" + strconv.Itoa(i)
		queues[q.Name] = q
	}
	d.SetQueues(queues)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return st.claims.Load() == n && d.ActivePumps() == 0 }, 10*time.Second, time.Millisecond)
	// The dispatcher's own two loops, whatever the number of queues.
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+3 }, 5*time.Second, time.Millisecond)

	for name := range queues {
		d.Wake(name, false)
		require.Eventually(t, func() bool { return st.claims.Load() == n+1 && d.ActivePumps() == 0 }, 5*time.Second, time.Millisecond)
		break
	}
	cancel()
	<-done
}
