package dispatch

import (
	"context"
	"reflect"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Store is what the dispatcher needs from package store.
type Store interface {
	// NewCall names a claim or settle call; a failed call is sent again
	// under the same name (see store.Store.NewCall).
	NewCall() string
	ClaimCall(ctx context.Context, q config.Queue, max int, call string) (store.ClaimResult, error)
	// SettleAndClaim records outcomes and claims their replacements in the
	// same script call.
	SettleAndClaim(ctx context.Context, q config.Queue, outcomes []store.Outcome, refill store.Refill) ([]store.Settled, store.ClaimResult, error)
}

// Broadcaster tells every daemon of the fleet that a queue can deliver again
// (a probe reopened it), so their pumps do not wait for a timer.
type Broadcaster interface {
	NotifyState(queue string)
}

// Observer receives every claim and settle result, for metrics. Optional.
type Observer interface {
	Claimed(queue string, j store.ClaimedJob)
	Settled(queue string, o store.Outcome, s store.Settled, took time.Duration)
	// Reaped is told about jobs that Redis housekeeping moved on: lost
	// deliveries, ack timeouts and lifetimes that ended while waiting.
	Reaped(queue string, r store.Reaped)
}

// Options configure a Dispatcher.
type Options struct {
	Store     Store
	Deliverer *Deliverer
	Broadcast Broadcaster
	Observer  Observer
	Logger    *zap.Logger
	// ClaimBatch bounds the jobs one claim call takes.
	ClaimBatch int
	// Grace is how long in-flight deliveries may finish after Run's context ends.
	Grace time.Duration
	// SafetyWake re-checks an idle queue in case a pub/sub wake-up was lost.
	SafetyWake time.Duration
	// Linger is the least time between two claim (and two settle) script
	// calls of one queue on this daemon: under load, jobs and outcomes that
	// arrive meanwhile share a call; an idle queue is never delayed. It caps
	// script calls at about 1/Linger per queue and loop. Default 300µs;
	// negative disables it.
	Linger time.Duration
	// Housekeeping is the least time between two runs of a queue's Redis
	// housekeeping (expired leases, ack timeouts, ended lifetimes, purges)
	// by this daemon's settle calls. A saturated queue refills its slots
	// through settle calls, hundreds a second, and each run costs Redis
	// about 30 µs; every deadline is still handled within this much of its
	// time. The claim loop's own claims always run it. Default 10ms;
	// negative runs it in every settle call.
	Housekeeping time.Duration
}

// Dispatcher runs one pump per configured queue.
type Dispatcher struct {
	opts Options
	log  *zap.Logger

	mu    sync.Mutex
	pumps map[string]*pump
	// workCtx is cancelled when the grace period ends; deliveries watch it.
	workCtx    context.Context
	cancelWork context.CancelFunc
	fetchCtx   context.Context
	wg         sync.WaitGroup
	started    bool
}

// New prepares a dispatcher; queues are added with SetQueues.
func New(opts Options) *Dispatcher {
	if opts.ClaimBatch <= 0 {
		opts.ClaimBatch = 64
	}
	if opts.SafetyWake <= 0 {
		opts.SafetyWake = 30 * time.Second
	}
	if opts.Linger == 0 {
		opts.Linger = 300 * time.Microsecond
	}
	if opts.Housekeeping == 0 {
		opts.Housekeeping = 10 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	work, cancel := context.WithCancel(context.Background())
	return &Dispatcher{opts: opts, log: opts.Logger, pumps: map[string]*pump{}, workCtx: work, cancelWork: cancel}
}

// SetQueues starts pumps for new queues, updates the settings of running ones
// (taking effect at their next claim) and stops pumps of removed queues (their
// jobs stay in Redis untouched). Safe to call while running: live reload.
func (d *Dispatcher) SetQueues(queues map[string]config.Queue) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, q := range queues {
		// Only a pump whose settings changed claims at once: a set of
		// thousands of queues (API queues, package queuesync) applied
		// again for one change must not make every idle pump claim.
		if p, ok := d.pumps[name]; ok && reflect.DeepEqual(*p.q.Load(), q) {
			continue
		}
		d.putPumpLocked(name, q)
	}
	for name, p := range d.pumps {
		if _, ok := queues[name]; !ok {
			p.stop()
			delete(d.pumps, name)
		}
	}
}

// UpdateQueues is SetQueues for a few queues among many (queues created
// over the API, package queuesync): it starts or updates the pumps of the
// queues in changed and stops those named in removed, leaving every other
// pump alone.
func (d *Dispatcher) UpdateQueues(changed map[string]config.Queue, removed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, q := range changed {
		d.putPumpLocked(name, q)
	}
	for _, name := range removed {
		if p, ok := d.pumps[name]; ok {
			p.stop()
			delete(d.pumps, name)
		}
	}
}

// putPumpLocked gives queue name the settings q: a running pump takes them
// at its next claim and claims now; a new queue gets a pump, started if the
// dispatcher runs. d.mu is held.
func (d *Dispatcher) putPumpLocked(name string, q config.Queue) {
	if p, ok := d.pumps[name]; ok {
		p.setQueue(q)
		p.wake()
		return
	}
	p := newPump(d, q)
	d.pumps[name] = p
	if d.started {
		d.startPump(p)
	}
}

// Wake makes this daemon's pump for queue claim now.
//
// state says whether the signal can end a pause or hold (a resume, a
// callback, a reopened queue); a mere "new work" signal does not make a pump
// whose last claim found its queue paused or held claim now, only no later
// than the new job's lifetime end.
func (d *Dispatcher) Wake(queue string, state bool) {
	d.mu.Lock()
	p := d.pumps[queue]
	d.mu.Unlock()
	if p == nil {
		return
	}
	if state || !p.idle.Load() {
		p.wake()
		return
	}
	// New work on a held or paused queue: nothing can be delivered, but
	// the new job's lifetime ends within jobLifetime, and it must die on
	// time (semantics.md 4), so claim (housekeeping) no later than that.
	p.wakeWithin(p.q.Load().JobLifetime)
}

// WakeAll makes every pump claim now (after a pub/sub reconnect, say).
func (d *Dispatcher) WakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pumps {
		p.wake()
	}
}

func (d *Dispatcher) startPump(p *pump) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		p.run(d.fetchCtx)
	}()
}

// Run claims and delivers until ctx ends, then stops claiming, gives
// deliveries in flight the grace period, hands back the rest and returns once
// every outcome is recorded.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	d.fetchCtx = ctx
	d.started = true
	for _, p := range d.pumps {
		d.startPump(p)
	}
	d.mu.Unlock()

	<-ctx.Done()
	d.log.Info("dispatcher stopping: no new claims", zap.Duration("grace", d.opts.Grace))
	timer := time.AfterFunc(d.opts.Grace, func() {
		d.log.Warn("grace period over: cancelling deliveries still in flight and handing them back")
		d.cancelWork()
	})
	d.wg.Wait()
	timer.Stop()
	d.cancelWork()
	return nil
}

// SetBroadcast sets the fleet-wide notifier after construction (the notifier
// itself needs the dispatcher to deliver local wake-ups).
func (d *Dispatcher) SetBroadcast(b Broadcaster) { d.opts.Broadcast = b }
