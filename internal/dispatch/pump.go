package dispatch

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/store"
)

// pump drives one queue on this daemon while the queue has work (see
// Dispatcher: pumps are made by wake-ups and retire when idle).
type pump struct {
	d        *Dispatcher
	name     string
	q        atomic.Pointer[queueSettings]
	wakeCh   chan struct{}
	stopCh   chan struct{}
	stopOnce sync.Once
	inflight atomic.Int64
	// idle is set while the last claim found the queue paused or held: new
	// work cannot be delivered then, so "new work" wake-ups are ignored
	// (see Dispatcher.Wake); a state wake-up or the claim's timer ends it.
	idle atomic.Bool
	// wakeBy (unix ns, 0: none) is the latest time an idle pump may wait
	// before its next claim: a job published meanwhile ends its lifetime
	// within jobLifetime, and that end must be handled on time while the
	// queue is held or paused (housekeeping runs in claims). soonCh tells
	// the waiting loop to look at it.
	wakeBy atomic.Int64
	soonCh chan struct{}
	// deliveries tracks delivery goroutines, so run returns only after all
	// outcomes are recorded.
	deliveries sync.WaitGroup
	settleCh   chan settleItem
	// handoff passes a claimed job to a delivery goroutine idle after its
	// last delivery; quit, closed when run returns, ends the idle ones.
	// Reusing goroutines spares a busy queue a goroutine start and a stack
	// growth per delivery.
	handoff chan delivery
	quit    chan struct{}
	// born and housekept time the queue's Redis housekeeping on this
	// daemon: housekept is when a claim last ran it, as time since born
	// (monotonic), so settle calls can leave it out for a while.
	born      time.Time
	housekept atomic.Int64
	// busyAt is when the pump last had work (claimed jobs or recorded
	// outcomes), as time since born; 0: never. It starts the PumpIdle
	// countdown to retirement.
	busyAt atomic.Int64
	// checked, when set, is called once the first claim has answered (or
	// the pump ended before): the sweep's slot is free again.
	checked func()
}

// delivery is one claimed job to deliver under its queue's settings.
type delivery struct {
	q config.Queue
	j store.ClaimedJob
}

// idleWait stands for "no due time": the queue is idle, and only a wake-up
// can give it work.
const idleWait = time.Duration(math.MaxInt64)

// deliveryIdle is how long a delivery goroutine waits for the next job
// before it ends.
const deliveryIdle = 2 * time.Second

type settleItem struct {
	out     store.Outcome
	started time.Time
	probe   bool
	// flowKey is the job's lane ("" for none), for the outcome's log line.
	flowKey   string
	laneProbe bool
	attempt   int
	// span is the delivery's span, ended once the outcome is recorded
	// (nil while tracing is off).
	span *span
}

// newPump prepares queue name's pump with settings q (shared with the
// dispatcher's entry, never modified).
func newPump(d *Dispatcher, name string, q *config.Queue) *pump {
	p := &pump{d: d, name: name, wakeCh: make(chan struct{}, 1), soonCh: make(chan struct{}, 1), stopCh: make(chan struct{}),
		settleCh: make(chan settleItem, settleBuffer(*q)), handoff: make(chan delivery), quit: make(chan struct{}),
		born: time.Now()}
	p.housekept.Store(math.MinInt64 / 2) // never: the first settle call runs it
	p.q.Store(newQueueSettings(q))
	return p
}

// queueSettings are a pump's queue settings: the dispatcher's (shared,
// never modified) and the store's view of them, built once when they
// change (putLocked) instead of at every claim and settle.
type queueSettings struct {
	cfg    *config.Queue
	params store.QueueParams
}

func newQueueSettings(q *config.Queue) *queueSettings {
	return &queueSettings{cfg: q, params: queueparams.Of(*q)}
}

// markBusy notes that the pump has work now.
func (p *pump) markBusy() { p.busyAt.Store(max(int64(time.Since(p.born)), 1)) }

// idleFor is how long the pump has had no work (since it was made, if it
// never had any: such a pump may retire at once).
func (p *pump) idleFor() time.Duration {
	at := p.busyAt.Load()
	if at == 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Since(p.born) - time.Duration(at)
}

// settleBuffer sizes a pump's settle channel by its queue's concurrency at
// start (at most that many outcomes are pending at once; a later raise
// only makes deliveries wait a moment for the settle loop). A fixed 1,024
// slots were 160 KiB per pump, allocated up front: 1.6 GB for 10,000
// idle queues created over the API.
func settleBuffer(q config.Queue) int { return min(max(2*q.Concurrency, 16), 1024) }

// maxSettleBatch bounds the outcomes one settle call records.
const maxSettleBatch = 256

func (p *pump) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// wakeWithin makes an idle pump claim no later than d from now (earlier if
// it was due earlier anyway), without claiming at once.
func (p *pump) wakeWithin(d time.Duration) {
	by := time.Now().Add(d).UnixNano()
	for {
		cur := p.wakeBy.Load()
		if cur != 0 && cur <= by {
			return
		}
		if p.wakeBy.CompareAndSwap(cur, by) {
			break
		}
	}
	select {
	case p.soonCh <- struct{}{}:
	default:
	}
}

func (p *pump) stop() { p.stopOnce.Do(func() { close(p.stopCh) }) }

// run is the claim loop. It returns when fetching stops, the queue is
// removed or the pump retires, once every delivery it started has been
// recorded.
func (p *pump) run(ctx context.Context) {
	log := p.d.log.With(zap.String("queue", p.name))
	checked := p.checked
	defer func() {
		if checked != nil {
			checked()
		}
	}()
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		p.settleLoop(ctx, log)
	}()
	defer func() {
		p.deliveries.Wait()
		close(p.settleCh)
		<-settled
		close(p.quit)
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	errDelay := 50 * time.Millisecond
	var lastClaim time.Time
	call := "" // the name of a claim call to send again after an error
	for {
		if ctx.Err() != nil {
			return
		}
		select {
		case <-p.stopCh:
			return
		default:
		}
		// Adaptive batching: right after a claim, let wake-ups gather for
		// the rest of the linger period so a busy queue claims many jobs
		// per call instead of one per publish; an idle queue claims at once.
		if !linger(ctx, lastClaim, p.d.opts.Linger) {
			return
		}
		lastClaim = time.Now()
		qs := p.q.Load()
		q := *qs.cfg
		free := q.Concurrency - int(p.inflight.Load())
		if free > p.d.opts.ClaimBatch {
			free = p.d.opts.ClaimBatch
		}
		// With every local slot busy the claim takes nothing (max 0) but still
		// runs the queue's housekeeping, so lifetimes end, purges happen and
		// lost leases return on time while deliveries are slow; it tells when
		// that is next due. A finished delivery wakes the loop for new work.
		free = max(free, 0)
		wait := time.Duration(-1)
		// A claim that failed is sent again under the same call name: if
		// Redis ran it and only its reply was lost, the jobs it leased come
		// back instead of being leased to nobody.
		if call == "" {
			call = p.d.opts.Store.NewCall()
		}
		// This claim's wake time covers every job stored before it starts.
		p.wakeBy.Store(0)
		res, err := p.d.opts.Store.ClaimCall(ctx, qs.params, store.ClaimParams{Max: free, Call: call})
		if checked != nil {
			checked()
			checked = nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("claim failed; retrying", zap.Error(err), zap.Duration("in", errDelay))
			wait = errDelay
			errDelay = min(errDelay*2, 5*time.Second)
		} else {
			call = ""
			p.markHousekeeping()
			errDelay = 50 * time.Millisecond
			p.idle.Store(res.Word == store.Paused || res.Word == store.Held)
			p.reaped(res.Reaped, log)
			if len(res.Jobs) > 0 {
				p.markBusy()
			}
			for _, j := range res.Jobs {
				p.start(q, j, log)
			}
			if free > 0 && res.Word == store.Claimed && len(res.Jobs) == free {
				continue // there may be more due and we may have slots
			}
			wait = res.WakeIn
		}
		if wait < 0 || wait > p.d.opts.SafetyWake {
			wait = p.d.opts.SafetyWake
		}
		// Nothing waits, nothing is in flight, nothing is due (no lease,
		// lifetime or purge): the queue is idle, and only a wake-up can give
		// it work (a publish or replay anywhere in the fleet, a resume; and
		// the wake-up bus wakes every queue after it reconnects). No timer
		// is needed, so 10,000 idle queues cost no claims rather than one
		// per SafetyWake each.
		if err == nil && res.Word == store.Empty && res.WakeIn < 0 && p.inflight.Load() == 0 {
			wait = idleWait
		}
		// A pump with nothing in flight whose next claim is PumpIdle away
		// or more may retire once it has been idle that long: the
		// dispatcher keeps its due time, and a wake-up makes a new pump.
		quiet := time.Duration(-1)
		if err == nil && p.inflight.Load() == 0 && wait >= p.d.opts.PumpIdle {
			quiet = max(p.d.opts.PumpIdle-p.idleFor(), 0)
		}
		switch next, due := p.rest(ctx, timer, wait, quiet); next {
		case restStop:
			return
		case restRetire:
			if p.d.retire(p, due) {
				return
			}
		}
	}
}

// What rest saw: a reason to claim, a reason to end, or an idle period
// over.
const (
	restClaim = iota
	restStop
	restRetire
)

// rest waits up to wait (idleWait: no limit) for a wake-up, or until wakeBy
// if that comes first (it can move earlier while waiting), and reports
// restClaim. With quiet >= 0, once quiet has passed and the claim is still
// further away, it reports restRetire with the claim's due time (unix ns;
// 0: none). restStop: the pump must end.
func (p *pump) rest(ctx context.Context, timer *time.Timer, wait, quiet time.Duration) (int, int64) {
	now := time.Now()
	var deadline, retireAt time.Time // zero: none
	if wait != idleWait {
		deadline = now.Add(wait)
	}
	if quiet >= 0 {
		retireAt = now.Add(quiet)
	}
	// next is the earlier of the two; rest ends there.
	next := func() time.Time {
		switch {
		case retireAt.IsZero():
			return deadline
		case deadline.IsZero() || retireAt.Before(deadline):
			return retireAt
		}
		return deadline
	}
	armed := false
	arm := func() {
		if at := next(); !at.IsZero() {
			timer.Reset(max(time.Until(at), 0))
			armed = true
		}
	}
	arm()
	defer timer.Stop()
	var fired <-chan time.Time
	for {
		fired = nil
		if armed {
			fired = timer.C
		}
		select {
		case <-ctx.Done():
			return restStop, 0
		case <-p.stopCh:
			return restStop, 0
		case <-p.wakeCh:
			return restClaim, 0
		case <-fired:
			if !retireAt.IsZero() && (deadline.IsZero() || retireAt.Before(deadline)) {
				due := int64(0)
				if !deadline.IsZero() {
					due = deadline.UnixNano()
				}
				return restRetire, due
			}
			return restClaim, 0
		case <-p.soonCh:
			if by := p.wakeBy.Load(); by != 0 && (deadline.IsZero() || time.Unix(0, by).Before(deadline)) {
				deadline = time.Unix(0, by)
				arm()
			}
		}
	}
}

func (p *pump) start(q config.Queue, j store.ClaimedJob, log *zap.Logger) {
	p.inflight.Add(1)
	p.deliveries.Add(1)
	if o := p.d.opts.Observer; o != nil {
		o.Claimed(q.Name, j)
	}
	if j.Probe {
		log.Info("probe delivery", zap.String("job", j.ID), zap.Int("attempt", j.Attempt))
	}
	select {
	case p.handoff <- delivery{q, j}: // an idle delivery goroutine took it
	default:
		go p.deliverLoop(delivery{q, j})
	}
}

// deliverLoop delivers one job, then others handed to it, until it has been
// idle for deliveryIdle or the pump has ended. deliveries.Done is called by
// the settle loop once an outcome is recorded, so run cannot close settleCh
// while outcomes are pending.
func (p *pump) deliverLoop(next delivery) {
	idle := time.NewTimer(deliveryIdle)
	defer idle.Stop()
	for {
		began := time.Now()
		out, sp := p.d.opts.Deliverer.deliver(p.d.workCtx, next.q, next.j)
		p.settleCh <- settleItem{out: out, started: began, probe: next.j.Probe, flowKey: next.j.FlowKey, laneProbe: next.j.LaneProbe,
			attempt: next.j.Attempt, span: sp}
		idle.Reset(deliveryIdle)
		select {
		case next = <-p.handoff:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}

// settleLoop records outcomes, batching whatever has queued up meanwhile, and
// in the same script call claims jobs for the slots those outcomes freed, so
// a busy queue refills with one round trip. It keeps going after fetching
// stopped (outcomes must be written; nothing new is claimed then) and
// retries while Redis is unreachable; a lease that expires meanwhile is
// reaped as a failure, which is the best that can be known.
func (p *pump) settleLoop(fetch context.Context, log *zap.Logger) {
	// Allocated at the first outcome, not at start: an idle queue's pump
	// holds none of it.
	var batch []settleItem
	var outs []store.Outcome
	var lastSettle time.Time
	for first := range p.settleCh {
		if batch == nil {
			batch, outs = make([]settleItem, 0, maxSettleBatch), make([]store.Outcome, 0, maxSettleBatch)
		}
		// As in run: outcomes arriving right after a settle gather for the
		// rest of the linger period and go in one call. Outcomes are always
		// written, so this waits even after fetching stopped.
		linger(context.Background(), lastSettle, p.d.opts.Linger)
		lastSettle = time.Now()
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxSettleBatch {
			select {
			case it, ok := <-p.settleCh:
				if !ok {
					break drain
				}
				batch = append(batch, it)
			default:
				break drain
			}
		}
		outs = outs[:0]
		for _, it := range batch {
			outs = append(outs, it.out)
		}
		qs := p.q.Load()
		q := *qs.cfg
		refill := 0
		if p.fetching(fetch) {
			refill = min(q.Concurrency-int(p.inflight.Load())+len(batch), p.d.opts.ClaimBatch)
			refill = max(refill, 0)
		}
		housekeep := refill > 0 && p.housekeepingDue()
		res, claim, ok := p.settleWithRetry(qs, outs, store.Refill{Max: refill, SkipHousekeeping: !housekeep}, log)
		if ok && housekeep {
			p.markHousekeeping()
		}
		if refill > 0 {
			p.idle.Store(claim.Word == store.Paused || claim.Word == store.Held)
		}
		for i, it := range batch {
			var s store.Settled
			if res != nil {
				s = res[i]
			}
			// The span learns what its answer did: a hold, a probe's result.
			if it.span != nil {
				it.span.end(it.out, s, it.probe)
			}
			if res == nil {
				continue // not recorded: the lease will expire (settleWithRetry logged it)
			}
			p.d.settled(log, store.Settlement{Queue: p.name, JobID: it.out.ID, Source: store.FromDelivery, Outcome: it.out,
				Probe: it.probe, LaneProbe: it.laneProbe, Attempt: it.attempt, FlowKey: it.flowKey,
				Took: time.Since(it.started), Result: s})
		}
		p.reaped(claim.Reaped, log)
		// Start the replacements before releasing the finished deliveries,
		// so the pump's WaitGroup never touches zero in between.
		for _, j := range claim.Jobs {
			p.start(q, j, log)
		}
		p.markBusy()
		p.inflight.Add(-int64(len(batch)))
		for range batch {
			p.deliveries.Done()
		}
		// A full refill means the queue is saturated and this loop keeps it
		// busy; otherwise the pump decides what comes next (and when).
		if refill == 0 || claim.Word != store.Claimed || len(claim.Jobs) < refill {
			p.wake()
		}
	}
}

// reaped logs and reports what the claim's housekeeping did to jobs that no
// daemon was watching.
func (p *pump) reaped(rs []store.Reaped, log *zap.Logger) {
	for _, r := range rs {
		fields := []zap.Field{zap.String("job", r.ID), zap.String("cause", r.Kind)}
		if r.Word == store.Dead {
			log.Info("job dead-lettered", append(fields, zap.String("reason", r.Detail))...)
		} else {
			log.Info("delivery lost or not acked in time: will retry", fields...)
		}
		if o := p.d.opts.Observer; o != nil {
			o.Reaped(p.name, r)
		}
	}
}

// linger waits until period has passed since last (no wait when it has, or
// when last is zero). It reports false if ctx ended meanwhile.
func linger(ctx context.Context, last time.Time, period time.Duration) bool {
	if period <= 0 || last.IsZero() {
		return ctx.Err() == nil
	}
	d := period - time.Since(last)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fetching reports whether this pump may still claim new work.
func (p *pump) fetching(fetch context.Context) bool {
	if fetch.Err() != nil {
		return false
	}
	select {
	case <-p.stopCh:
		return false
	default:
		return true
	}
}

// housekeepingDue reports whether the queue's housekeeping should run in the
// next settle call: none of this daemon's claims ran it for
// Options.Housekeeping.
func (p *pump) housekeepingDue() bool {
	every := p.d.opts.Housekeeping
	return every < 0 || time.Since(p.born)-time.Duration(p.housekept.Load()) >= every
}

// markHousekeeping notes that a claim of this daemon just ran the queue's
// housekeeping.
func (p *pump) markHousekeeping() { p.housekept.Store(int64(time.Since(p.born))) }

// settleWithRetry records outs, retrying while Redis fails; ok is false when
// it gave up.
func (p *pump) settleWithRetry(qs *queueSettings, outs []store.Outcome, refill store.Refill, log *zap.Logger) (res []store.Settled, claim store.ClaimResult, ok bool) {
	delay := 50 * time.Millisecond
	deadline := time.Now().Add(qs.cfg.Timeout + time.Minute)
	// Every try is the same call: one whose reply was lost is answered from
	// its first run (its outcomes and the jobs it claimed), not run twice.
	refill.Call = p.d.opts.Store.NewCall()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, claim, err := p.d.opts.Store.SettleAndClaim(ctx, qs.params, outs, refill)
		cancel()
		if err == nil {
			return res, claim, true
		}
		if time.Now().After(deadline) {
			log.Error("giving up recording outcomes; their leases will expire and count as failures",
				zap.Error(err), zap.Int("outcomes", len(outs)))
			return nil, store.ClaimResult{}, false
		}
		log.Warn("settle failed; retrying", zap.Error(err), zap.Duration("in", delay))
		time.Sleep(delay)
		delay = min(delay*2, 2*time.Second)
	}
}
