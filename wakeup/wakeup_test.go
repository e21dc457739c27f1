package wakeup_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/wakeup"
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
