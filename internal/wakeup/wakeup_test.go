package wakeup_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/wakeup"
)

// A Notify on one daemon wakes its own pump at once and the other daemon's
// through Redis pub/sub; a burst coalesces instead of queueing PUBLISHes.
func TestNotifyReachesLocalAndFleet(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	localA := make(chan string, 100)
	localB := make(chan string, 100)
	mark := func(q string, state bool) string {
		if state {
			return "state:" + q
		}
		return q
	}
	a := wakeup.New(newClient(), "t:wake", func(q string, state bool) { localA <- mark(q, state) }, zap.NewNop())
	b := wakeup.New(newClient(), "t:wake", func(q string, state bool) { localB <- mark(q, state) }, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subscribed := make(chan struct{}, 2)
	go func() { _ = a.Run(ctx, func() { subscribed <- struct{}{} }) }()
	go func() { _ = b.Run(ctx, func() { subscribed <- struct{}{} }) }()
	for i := 0; i < 2; i++ {
		select {
		case <-subscribed:
		case <-time.After(5 * time.Second):
			t.Fatal("bus never subscribed")
		}
	}

	a.Notify("emails")
	require.Equal(t, "emails", <-localA, "the local pump is woken directly")
	select {
	case q := <-localB:
		require.Equal(t, "emails", q)
	case <-time.After(5 * time.Second):
		t.Fatal("the other daemon was not woken")
	}

	// A state signal keeps its kind across the fleet.
	a.NotifyState("held")
	await := func(ch chan string, want string) {
		t.Helper()
		for {
			select {
			case q := <-ch:
				if q == want {
					return
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("never received %q", want)
			}
		}
	}
	await(localA, "state:held")
	await(localB, "state:held")

	for i := 0; i < 50; i++ {
		a.Notify("burst")
	}
	require.Eventually(t, func() bool {
		for {
			select {
			case q := <-localB:
				if q == "burst" {
					return true
				}
			default:
				return false
			}
		}
	}, 5*time.Second, 5*time.Millisecond)
}

// A daemon alone on the channel stops sending new-work PUBLISHes that only
// it would hear; state signals always go out, and a daemon that joins hears
// new work again within aloneRecheck (1 s).
func TestLoneDaemonHoldsBackNewWork(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The send rounds of the buses started: how many took their pending
	// signals, and how many finished sending them.
	var roundsMu sync.Mutex
	takes, ends := 0, 0
	// sent waits until every signal given to bus so far went out in a send
	// round that has finished.
	sent := func(bus *wakeup.Bus) {
		t.Helper()
		require.Eventually(t, func() bool {
			if wakeup.Pending(bus) > 0 {
				return false
			}
			roundsMu.Lock()
			defer roundsMu.Unlock()
			return takes == ends
		}, 5*time.Second, time.Millisecond, "a send round took every pending signal and finished")
	}
	start := func(local chan string) *wakeup.Bus {
		bus := wakeup.New(srv.Client(t), "t:wake", func(q string, state bool) {
			if state {
				q = "state:" + q
			}
			select {
			case local <- q:
			default:
			}
		}, zap.NewNop())
		wakeup.SetRoundSignal(bus, func(ended bool) {
			roundsMu.Lock()
			defer roundsMu.Unlock()
			if ended {
				ends++
			} else {
				takes++
			}
		})
		subscribed := make(chan struct{}, 1)
		go func() { _ = bus.Run(ctx, func() { subscribed <- struct{}{} }) }()
		select {
		case <-subscribed:
		case <-time.After(5 * time.Second):
			t.Fatal("bus never subscribed")
		}
		return bus
	}
	publishes := func() int64 {
		calls, err := admin.InfoMap(ctx, "commandstats").Result()
		require.NoError(t, err)
		line := calls["Commandstats"]["cmdstat_publish"]
		var n int64
		if line != "" {
			_, err = fmt.Sscanf(line, "calls=%d", &n)
			require.NoError(t, err)
		}
		return n
	}
	receive := func(ch chan string, want string, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case q := <-ch:
				if q == want {
					return
				}
			case <-deadline:
				t.Fatalf("did not receive %q within %s", want, within)
			}
		}
	}

	localA := make(chan string, 1000)
	a := start(localA)
	require.NoError(t, admin.ConfigResetStat(ctx).Err())
	for i := range 20 {
		a.Notify("q")
		receive(localA, "q", time.Second) // the own pump is always woken directly
		if i%5 == 4 {
			sent(a) // several send rounds
		}
	}
	require.Equal(t, int64(1), publishes(), "only the first PUBLISH, which found nobody else listening")

	localB := make(chan string, 1000)
	start(localB)
	a.NotifyState("held")
	receive(localB, "state:held", 2*time.Second) // state goes out even while quiet
	a.Notify("q2")
	receive(localB, "q2", 2*time.Second) // and that PUBLISH found B: new work flows again
}
