// Package wakeup carries "this queue may have work" signals between the
// daemons of a fleet over Redis pub/sub, so dispatchers react to a publish, a
// callback or a reopened queue on any daemon within a round trip instead of
// polling. Signals are hints: losing one only delays work until the claim
// script's own wake time or the dispatcher's safety timer.
//
// A signal is of one of two kinds. "New work" (a publish, a replay) matters
// only to a queue that can deliver; a paused or held queue ignores it, so a
// publish burst into a held queue costs no claims. "State" (a resume, a
// callback, a probe that reopened the queue) can end a pause or hold and is
// always acted on. On the channel, a state signal is the queue name behind a
// "!" (no queue name contains one). A third kind, an abort, names a job
// cancelled while its delivery was under way ("^" + lease token + " " + job
// id): the daemon holding that delivery aborts its request (control.md §1);
// aborts go out at once, never coalesced or held back. A daemon alone on the channel (its last
// PUBLISH reached only itself) holds new-work signals back for a second at
// a time: nobody would hear them.
package wakeup

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Bus publishes and receives wake-ups.
type Bus struct {
	rdb     redis.UniversalClient
	channel string
	local   func(queue string, state bool)
	log     *zap.Logger

	mu      sync.Mutex
	pending map[string]bool // queue -> a state signal is among those pending
	kick    chan struct{}
	// listening is whether this daemon's own subscription is up, so that
	// sendLoop knows whether a PUBLISH's receiver count includes it.
	listening atomic.Bool
	// onAbort is told about every abort heard, this daemon's own included
	// (SetAbortHandler; nil: none).
	onAbort atomic.Pointer[func(token, jobID string)]
	// roundSignal is a test signal, nil in production (two nil checks a
	// round): it learns that a send round took the pending signals
	// (ended false) and that it finished sending them (ended true), so
	// tests wait on rounds instead of sleeping.
	roundSignal func(ended bool)
}

// abortPrefix starts an abort message on the channel.
const abortPrefix = "^"

// SetAbortHandler sets what is called for every abort message: the lease
// token and job id of a delivery whose job was cancelled (the dispatcher
// aborts it if it is its own).
func (b *Bus) SetAbortHandler(f func(token, jobID string)) { b.onAbort.Store(&f) }

func (b *Bus) abortHeard(token, jobID string) {
	if f := b.onAbort.Load(); f != nil {
		(*f)(token, jobID)
	}
}

// Abort tells every daemon, this one first and directly, that the job's
// delivery under the lease token must be aborted. It publishes at once and
// returns the PUBLISH's error: a lost abort leaves the request to run to
// its end (its outcome is ignored all the same: the lease fences it).
func (b *Bus) Abort(ctx context.Context, token, jobID string) error {
	b.abortHeard(token, jobID)
	return b.rdb.Publish(ctx, b.channel, abortPrefix+token+" "+jobID).Err()
}

// New returns a Bus on channel; local is called for every wake-up, including
// this daemon's own (delivered directly, without waiting for Redis).
func New(rdb redis.UniversalClient, channel string, local func(queue string, state bool), log *zap.Logger) *Bus {
	return &Bus{rdb: rdb, channel: channel, local: local, log: log,
		pending: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Notify wakes this daemon's pump for queue at once and the fleet's shortly
// after. Under load many notifications coalesce into one PUBLISH per queue.
func (b *Bus) Notify(queue string) { b.notify(queue, false) }

// NotifyState is Notify for a change that can end a pause or hold.
func (b *Bus) NotifyState(queue string) { b.notify(queue, true) }

func (b *Bus) notify(queue string, state bool) {
	b.local(queue, state)
	b.mu.Lock()
	b.pending[queue] = b.pending[queue] || state
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
		b.listening.Store(true)
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
				if rest, ok := strings.CutPrefix(m.Payload, abortPrefix); ok {
					if token, id, ok := strings.Cut(rest, " "); ok {
						b.abortHeard(token, id)
					}
				} else if q, ok := strings.CutPrefix(m.Payload, "!"); ok {
					b.local(q, true)
				} else {
					b.local(m.Payload, false)
				}
			}
		}
		b.listening.Store(false)
		_ = ps.Close()
	}
	return nil
}

func (b *Bus) sendLoop(ctx context.Context) {
	// While the last PUBLISH reached no daemon but this one, new-work
	// signals are not sent until quietUntil: nobody would hear them, and a
	// lone daemon under a publish burst otherwise sent ~1,000 PUBLISHes a
	// second to itself (~2 µs of its CPU per single-job publish, plus Redis'
	// and its own subscriber's share). State signals always go out, so a
	// daemon that joins meanwhile still hears a resume or a reopened queue;
	// it hears new work from this one within aloneRecheck. On Redis Cluster
	// a PUBLISH counts only the subscribers of the node that took it, so
	// there every signal goes out.
	_, cluster := b.rdb.(*redis.ClusterClient)
	var quietUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		quiet := time.Now().Before(quietUntil)
		b.mu.Lock()
		queues := make([]string, 0, len(b.pending))
		for q, state := range b.pending {
			if state {
				q = "!" + q
			} else if quiet {
				continue
			}
			queues = append(queues, q)
		}
		clear(b.pending)
		b.mu.Unlock()
		if b.roundSignal != nil {
			b.roundSignal(false)
		}
		if len(queues) > 0 {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			pipe := b.rdb.Pipeline()
			sent := make([]*redis.IntCmd, len(queues))
			for i, q := range queues {
				sent[i] = pipe.Publish(pctx, b.channel, q)
			}
			if _, err := pipe.Exec(pctx); err != nil {
				if ctx.Err() == nil {
					b.log.Debug("wake-up publish failed (other daemons catch up on their timers)", zap.Error(err))
				}
			} else {
				// PUBLISH answers how many subscribers received it; one
				// is this daemon's own subscription, when it is up.
				own := int64(0)
				if b.listening.Load() {
					own = 1
				}
				alone := true
				for _, c := range sent {
					alone = alone && c.Val() <= own
				}
				quietUntil = time.Time{}
				if alone && !cluster {
					quietUntil = time.Now().Add(aloneRecheck)
				}
			}
			cancel()
		}
		if b.roundSignal != nil {
			b.roundSignal(true)
		}
		// Let signals gather before the next PUBLISH: under a publish burst
		// the fleet hears at most about one per queue per sendLinger, not
		// one per job. This daemon's own pumps were woken directly.
		select {
		case <-ctx.Done():
			return
		case <-time.After(sendLinger):
		}
	}
}

// sendLinger is the least time between two rounds of wake-up PUBLISHes.
const sendLinger = time.Millisecond

// aloneRecheck is how long new-work signals are held back after a PUBLISH
// found no other daemon listening, and so the longest a daemon that joins
// waits to hear new work published through this one.
const aloneRecheck = time.Second

// Wake is Notify under the name the API's Waker interface uses.
func (b *Bus) Wake(queue string) { b.Notify(queue) }

// WakeState is NotifyState under the name the API's Waker interface uses.
func (b *Bus) WakeState(queue string) { b.NotifyState(queue) }
