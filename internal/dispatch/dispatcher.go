package dispatch

import (
	"container/heap"
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
	// The queue's settings reach the store as the QueueParams a pump built
	// when they last changed (queueSettings), not converted at each call.
	ClaimCall(ctx context.Context, q store.QueueParams, p store.ClaimParams) (store.ClaimResult, error)
	// SettleAndClaim records outcomes and claims their replacements in the
	// same script call.
	SettleAndClaim(ctx context.Context, q store.QueueParams, outcomes []store.Outcome, refill store.Refill) ([]store.Settled, store.ClaimResult, error)
}

// Broadcaster tells every daemon of the fleet that a queue can deliver again
// (a probe reopened it, a callback freed a slot), so their pumps do not wait
// for a timer.
type Broadcaster interface {
	NotifyState(queue string)
}

// Observer receives every claim and every applied outcome (Dispatcher.Settled:
// deliveries and callbacks alike), for metrics and the event timeline.
// Optional.
type Observer interface {
	Claimed(queue string, j store.ClaimedJob)
	Settled(s store.Settlement)
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
	// PumpIdle is how long a queue's pump stays after its last delivery
	// when its next claim is further away than that (or nothing is due):
	// then it retires, and a wake-up or its due time makes a new one. A
	// pump that never delivered anything (a check that found the queue
	// idle) retires at once. Default DefaultPumpIdle.
	PumpIdle time.Duration
	// Housekeeping is the least time between two runs of a queue's Redis
	// housekeeping (expired leases, ack timeouts, ended lifetimes, purges)
	// by this daemon's settle calls. A saturated queue refills its slots
	// through settle calls, hundreds a second, and each run costs Redis
	// about 30 µs; every deadline is still handled within this much of its
	// time. The claim loop's own claims always run it. Default 10ms;
	// negative runs it in every settle call.
	Housekeeping time.Duration
}

// DefaultPumpIdle is Options.PumpIdle's default.
const DefaultPumpIdle = 10 * time.Second

// sweepWidth bounds the pumps that checks (Dispatcher.check) have started
// and whose first claim has not answered yet: a start-up, a pub/sub
// reconnect or a burst of queue writes claims every queue concerned once,
// a few dozen at a time, not 10,000 pumps at once.
const sweepWidth = 32

// Dispatcher runs a pump for each configured queue that has work.
//
// A queue's pump exists only while the queue has work on this daemon or
// will have some within Options.PumpIdle: it is made by a wake-up (a
// publish here or anywhere in the fleet, a callback, a resume, a
// reopened queue), by the time its last claim said the queue next needs
// attention, or by a check (start-up, a pub/sub reconnect, a change of
// the queue's settings), and it retires once it has had nothing to do
// for PumpIdle and its next claim is further away than that. A retired
// queue costs its settings and a map entry: no goroutine, no timer, no
// buffer. Its next due time, if the last claim gave one (a delayed job, a
// lease or ack deadline, a hold's release, a lifetime's end, the safety
// re-check), is kept in one min-heap served by one timer for the whole
// dispatcher, so 10,000 retired queues cost one goroutine.
//
// Nothing is stranded: a pump retires only under d.mu, after checking
// that no wake-up reached it, and every wake-up looks the queue up under
// d.mu, so it either reaches the pump before it retires or finds the queue
// retired and makes a new pump.
type Dispatcher struct {
	opts Options
	log  *zap.Logger

	mu     sync.Mutex
	queues map[string]*queueEntry
	// due holds the retired queues with a due time, earliest first;
	// dueKick tells the timer loop the earliest one changed.
	due     dueHeap
	dueKick chan struct{}
	// sweep holds the queues waiting for a check, in order; sweepKick
	// tells the sweep loop there are some, and sweepSlots bounds the
	// checks under way (sweepWidth).
	sweep      []*queueEntry
	sweepKick  chan struct{}
	sweepSlots chan struct{}
	// active counts the pumps whose goroutines run.
	active int
	// workCtx is cancelled when the grace period ends; deliveries watch it.
	workCtx    context.Context
	cancelWork context.CancelFunc
	fetchCtx   context.Context
	wg         sync.WaitGroup
	started    bool
	// stopped is set when Run's context has ended: no pump is made after.
	stopped bool
	// onRetire, when set (tests), is told each queue whose pump ended.
	onRetire func(queue string)
}

// queueEntry is one configured queue on this daemon. All fields are
// guarded by Dispatcher.mu.
type queueEntry struct {
	name string
	// q is the queue's settings; a running pump holds the same pointer.
	q *config.Queue
	// pump runs the queue (nil: retired, or not yet made).
	pump *pump
	// held is what the last claim before the pump retired said: the queue
	// was paused or held, so a "new work" wake-up needs no claim, only one
	// by the new job's lifetime end (see Wake).
	held bool
	// dueAt (unix ns, 0: none) is when a retired queue must claim next;
	// index is its place in Dispatcher.due (-1: not there).
	dueAt int64
	index int
	// queued: the entry waits in Dispatcher.sweep.
	queued bool
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
	if opts.PumpIdle <= 0 {
		opts.PumpIdle = DefaultPumpIdle
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	work, cancel := context.WithCancel(context.Background())
	return &Dispatcher{opts: opts, log: opts.Logger, queues: map[string]*queueEntry{}, workCtx: work, cancelWork: cancel,
		dueKick: make(chan struct{}, 1), sweepKick: make(chan struct{}, 1), sweepSlots: make(chan struct{}, sweepWidth)}
}

// SetQueues makes the configured queues queues: new ones are checked (a
// pump claims once, and stays only if there is work), running ones take
// changed settings at their next claim, and removed ones stop (their jobs
// stay in Redis untouched). Safe to call while running: live reload.
func (d *Dispatcher) SetQueues(queues map[string]config.Queue) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, q := range queues {
		// Only a queue whose settings changed is checked: a set of
		// thousands of queues applied again for one change must not make
		// every idle queue claim.
		if e, ok := d.queues[name]; ok && reflect.DeepEqual(*e.q, q) {
			continue
		}
		d.putLocked(name, &q)
	}
	for name := range d.queues {
		if _, ok := queues[name]; !ok {
			d.removeLocked(name)
		}
	}
}

// UpdateQueues is SetQueues for a few queues among many (queues created
// over the API, package queuesync): it puts the queues in changed and
// removes those named in removed, leaving every other queue alone, in time
// proportional to the change. The dispatcher keeps the pointers it is
// given, so a caller that holds the same settings shares one copy with it
// (10,000 queues' worth of memory); it must never modify them afterwards.
func (d *Dispatcher) UpdateQueues(changed map[string]*config.Queue, removed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, q := range changed {
		d.putLocked(name, q)
	}
	for _, name := range removed {
		d.removeLocked(name)
	}
}

// putLocked gives queue name the settings q: a running pump takes them at
// its next claim and claims now; a retired or new queue is checked (its
// limits may let a job waiting for a slot go now). d.mu is held.
func (d *Dispatcher) putLocked(name string, q *config.Queue) {
	e, ok := d.queues[name]
	if !ok {
		e = &queueEntry{name: name, index: -1}
		d.queues[name] = e
	}
	e.q = q
	if p := e.pump; p != nil {
		p.q.Store(newQueueSettings(e.q))
		p.wake()
		return
	}
	d.checkLocked(e)
}

// removeLocked stops queue name's pump, if any, and forgets the queue.
func (d *Dispatcher) removeLocked(name string) {
	e, ok := d.queues[name]
	if !ok {
		return
	}
	if e.pump != nil {
		e.pump.stop()
		e.pump = nil
	}
	if e.index >= 0 {
		heap.Remove(&d.due, e.index)
	}
	delete(d.queues, name)
}

// Wake makes this daemon's pump for queue claim now, making one if the
// queue's pump has retired.
//
// state says whether the signal can end a pause or hold (a resume, a
// callback, a reopened queue); a mere "new work" signal does not make a
// queue whose last claim found it paused or held claim now, only no later
// than the new job's lifetime end.
func (d *Dispatcher) Wake(queue string, state bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.queues[queue]
	if e == nil {
		return
	}
	if p := e.pump; p != nil {
		if state || !p.idle.Load() {
			p.wake()
			return
		}
		// New work on a held or paused queue: nothing can be delivered,
		// but the new job's lifetime ends within jobLifetime, and it must
		// die on time (semantics.md 4), so claim (housekeeping) no later
		// than that.
		p.wakeWithin(p.q.Load().cfg.JobLifetime)
		return
	}
	if !state && e.held {
		d.dueLocked(e, time.Now().Add(e.q.JobLifetime).UnixNano())
		return
	}
	d.startLocked(e, nil)
}

// WakeAll makes every queue claim now (after a pub/sub reconnect, when a
// wake-up may have been lost): running pumps at once, retired queues
// through the bounded sweep.
func (d *Dispatcher) WakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.queues {
		if e.pump != nil {
			e.pump.wake()
			continue
		}
		d.checkLocked(e)
	}
}

// ActivePumps is the number of queues whose pump runs on this daemon now
// (the others are retired and cost no goroutine).
func (d *Dispatcher) ActivePumps() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active
}

// checkLocked queues e for a check: a pump claims once, through the
// bounded sweep, unless one runs already. Before Run, Run checks every
// queue anyway.
func (d *Dispatcher) checkLocked(e *queueEntry) {
	if !d.started || d.stopped {
		return
	}
	if e.pump != nil {
		e.pump.wake()
		return
	}
	if e.queued {
		return
	}
	e.queued = true
	d.sweep = append(d.sweep, e)
	select {
	case d.sweepKick <- struct{}{}:
	default:
	}
}

// startLocked makes and starts e's pump, unless one runs or fetching has
// stopped; checked, when set, is called once its first claim has answered.
func (d *Dispatcher) startLocked(e *queueEntry, checked func()) bool {
	if !d.started || d.stopped || e.pump != nil {
		return false
	}
	if e.index >= 0 {
		heap.Remove(&d.due, e.index)
	}
	e.dueAt = 0
	p := newPump(d, e.name, e.q)
	p.checked = checked
	e.pump = p
	d.active++
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		p.run(d.fetchCtx)
		d.mu.Lock()
		if e.pump == p { // ended without retiring (stopped): forget it
			e.pump = nil
		}
		d.active--
		hook := d.onRetire
		d.mu.Unlock()
		if hook != nil {
			hook(e.name)
		}
	}()
	return true
}

// retire ends p if nothing reached it meanwhile: it reports false when a
// wake-up is pending (the pump must claim). dueAt (unix ns, 0: none) is when
// the queue must claim next; the timer loop makes a pump then.
func (d *Dispatcher) retire(p *pump, dueAt int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.queues[p.name]
	if e == nil || e.pump != p {
		return true // removed or replaced meanwhile
	}
	select {
	case <-p.wakeCh:
		return false
	default:
	}
	if by := p.wakeBy.Load(); by != 0 && (dueAt == 0 || by < dueAt) {
		dueAt = by
	}
	e.pump = nil
	e.held = p.idle.Load()
	if dueAt != 0 {
		d.dueLocked(e, dueAt)
	}
	return true
}

// dueLocked makes retired queue e claim no later than at (unix ns).
func (d *Dispatcher) dueLocked(e *queueEntry, at int64) {
	if !d.started || d.stopped {
		return
	}
	if e.index >= 0 {
		if at >= e.dueAt {
			return
		}
		e.dueAt = at
		heap.Fix(&d.due, e.index)
	} else {
		e.dueAt = at
		heap.Push(&d.due, e)
	}
	if e.index == 0 {
		select {
		case d.dueKick <- struct{}{}:
		default:
		}
	}
}

// timerLoop makes a pump for each retired queue whose due time has come.
func (d *Dispatcher) timerLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		now := time.Now().UnixNano()
		for len(d.due) > 0 && d.due[0].dueAt <= now {
			e := heap.Pop(&d.due).(*queueEntry)
			e.dueAt = 0
			d.startLocked(e, nil)
		}
		wait := time.Hour
		if len(d.due) > 0 {
			wait = time.Duration(d.due[0].dueAt - now)
		}
		d.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.dueKick:
		case <-timer.C:
		}
	}
}

// sweepLoop checks the queued queues, at most sweepWidth at a time.
func (d *Dispatcher) sweepLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d.sweepSlots <- struct{}{}:
		}
		// A queue leaves the sweep and gets its pump under one hold of
		// d.mu, so a check is always either queued or running.
		d.mu.Lock()
		for len(d.sweep) == 0 {
			d.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-d.sweepKick:
			}
			d.mu.Lock()
		}
		e := d.sweep[0]
		d.sweep[0] = nil
		d.sweep = d.sweep[1:]
		if len(d.sweep) == 0 {
			d.sweep = nil // let a long backlog's array go
		}
		e.queued = false
		started := false
		if d.queues[e.name] == e {
			if e.pump != nil {
				e.pump.wake()
			} else {
				started = d.startLocked(e, func() { <-d.sweepSlots })
			}
		}
		d.mu.Unlock()
		if !started {
			<-d.sweepSlots
		}
	}
}

// Run claims and delivers until ctx ends, then stops claiming, gives
// deliveries in flight the grace period, hands back the rest and returns once
// every outcome is recorded. It checks every configured queue first (jobs
// may be waiting from before this daemon started).
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	d.fetchCtx = ctx
	d.started = true
	for _, e := range d.queues {
		d.checkLocked(e)
	}
	d.mu.Unlock()
	var loops sync.WaitGroup
	loops.Add(2)
	go func() { defer loops.Done(); d.sweepLoop(ctx) }()
	go func() { defer loops.Done(); d.timerLoop(ctx) }()

	<-ctx.Done()
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	loops.Wait()
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

// dueHeap orders retired queues by due time (container/heap).
type dueHeap []*queueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].dueAt < h[j].dueAt }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	e := x.(*queueEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}

// SetBroadcast sets the fleet-wide notifier after construction (the notifier
// itself needs the dispatcher to deliver local wake-ups).
func (d *Dispatcher) SetBroadcast(b Broadcaster) { d.opts.Broadcast = b }
