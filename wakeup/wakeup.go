// Package wakeup carries "this queue may have work" signals between the
// daemons of a fleet over Redis pub/sub, so dispatchers react to a publish, a
// callback or a reopened queue on any daemon within a round trip instead of
// polling. Signals are hints: losing one only delays work until the claim
// script's own wake time or the dispatcher's safety timer.
package wakeup

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Bus publishes and receives wake-ups.
type Bus struct {
	rdb     redis.UniversalClient
	channel string
	local   func(queue string)
	log     *zap.Logger

	mu      sync.Mutex
	pending map[string]struct{}
	kick    chan struct{}
}

// New returns a Bus on channel; local is called for every wake-up, including
// this daemon's own (delivered directly, without waiting for Redis).
func New(rdb redis.UniversalClient, channel string, local func(queue string), log *zap.Logger) *Bus {
	return &Bus{rdb: rdb, channel: channel, local: local, log: log,
		pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

// Notify wakes this daemon's pump for queue at once and the fleet's shortly
// after. Under load many notifications coalesce into one PUBLISH per queue.
func (b *Bus) Notify(queue string) {
	b.local(queue)
	b.mu.Lock()
	b.pending[queue] = struct{}{}
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Run subscribes and publishes until ctx ends, reconnecting as needed.
func (b *Bus) Run(ctx context.Context, onReconnect func()) error {
	go b.sendLoop(ctx)
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		ps := b.rdb.Subscribe(ctx, b.channel)
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			if ctx.Err() != nil {
				break
			}
			b.log.Warn("wake-up subscription failed; retrying", zap.Error(err), zap.Duration("in", delay))
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			delay = min(delay*2, 5*time.Second)
			continue
		}
		delay = 100 * time.Millisecond
		if onReconnect != nil {
			onReconnect()
		}
		ch := ps.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
	recv:
		for {
			select {
			case <-ctx.Done():
				break recv
			case m, ok := <-ch:
				if !ok {
					break recv
				}
				b.local(m.Payload)
			}
		}
		_ = ps.Close()
	}
	return nil
}

func (b *Bus) sendLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		b.mu.Lock()
		queues := make([]string, 0, len(b.pending))
		for q := range b.pending {
			queues = append(queues, q)
		}
		clear(b.pending)
		b.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		pipe := b.rdb.Pipeline()
		for _, q := range queues {
			pipe.Publish(pctx, b.channel, q)
		}
		if _, err := pipe.Exec(pctx); err != nil && ctx.Err() == nil {
			b.log.Debug("wake-up publish failed (other daemons catch up on their timers)", zap.Error(err))
		}
		cancel()
	}
}

// Wake is Notify under the name the API's Waker interface uses.
func (b *Bus) Wake(queue string) { b.Notify(queue) }
