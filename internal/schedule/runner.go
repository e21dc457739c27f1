package schedule

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/cronspec"
	"github.com/simpleq/simpleqd/internal/store"
)

// Store is what the scheduler needs from package store.
type Store interface {
	TakeScheduleQueues(ctx context.Context, lease time.Duration, max int) (time.Duration, []store.IndexedQueue, error)
	TickQueues(ctx context.Context, qs []config.Queue, max int) ([]store.Ticked, []error)
	FireSchedules(ctx context.Context, q config.Queue, fires []store.Fire) (time.Time, []store.Fired, string, error)
	SettleScheduleIndexes(ctx context.Context, settles []store.IndexSettle) error
	ScheduleWakeChannel() string
	Client() redis.UniversalClient
}

// Options configure a Runner.
type Options struct {
	Store Store
	// Queues returns the queues this daemon knows, by name.
	Queues func() map[string]config.Queue
	// Wake is told the queue of every job a tick published, so its
	// dispatcher (this daemon's and the fleet's) starts at once.
	Wake func(queue string)
	// OnFired, when set, is told every tick published: the lag is Redis'
	// time of the firing minus the tick (metrics, the bench).
	OnFired func(queue, schedule string, tick time.Time, lag time.Duration)
	Logger  *zap.Logger
	// Lease is how long a daemon owns a due queue before another daemon
	// may fire it (the one that took it died). Default 2s.
	Lease time.Duration
	// Batch bounds the queues taken per index call and the schedules fired
	// per script call. Default 100.
	Batch int
	// Workers fire a round's queues in that many groups at once, each
	// group's batches sent in one pipeline, so that Redis runs a round's
	// batches back to back rather than one per round trip. Default 8.
	Workers int
	// SafetyWake bounds a sleep, in case a wake-up message was lost while
	// the subscription reconnected. Default 30s.
	SafetyWake time.Duration
	// UnknownRetry is when a daemon looks again at a queue it does not know
	// (another daemon may; a rolling change). Default 10s.
	UnknownRetry time.Duration
}

// Runner is one daemon's scheduler. It sleeps until the fleet-wide index's
// earliest entry (or a wake-up published by a schedule change), takes the
// due queues for a lease, fires each one's due schedules in bounded batches
// (Workers groups of queues at once, a group's batches in one pipeline),
// and settles the round's queues in the index in one call: its cost follows the ticks that fire, not the number of
// schedules. An @every schedule's ticks are computed and fired by the
// script alone; a cron schedule's tick is computed here (robfig/cron) and
// fired by a second call.
type Runner struct {
	o    Options
	kick chan struct{}

	mu      sync.Mutex
	timings map[string]*cronspec.Timing // spec -> parsed, bounded by maxTimings
	warned  map[string]bool
}

const maxTimings = 10000

// New returns a Runner.
func New(o Options) *Runner {
	if o.Lease <= 0 {
		o.Lease = 2 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.SafetyWake <= 0 {
		o.SafetyWake = 30 * time.Second
	}
	if o.UnknownRetry <= 0 {
		o.UnknownRetry = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Wake == nil {
		o.Wake = func(string) {}
	}
	return &Runner{o: o, kick: make(chan struct{}, 1), timings: map[string]*cronspec.Timing{}, warned: map[string]bool{}}
}

// Kick makes the runner look at the index at once (a schedule changed here).
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run fires schedules until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	go r.listen(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		wake, err := r.round(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			r.o.Logger.Warn("scheduler: round failed; retrying", zap.Error(err), zap.Duration("in", backoff))
			wake = backoff
			backoff = min(backoff*2, 5*time.Second)
		} else {
			backoff = 100 * time.Millisecond
		}
		if wake == 0 {
			continue
		}
		if wake < 0 || wake > r.o.SafetyWake {
			wake = r.o.SafetyWake
		}
		t := time.NewTimer(wake)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-r.kick:
		}
		t.Stop()
	}
	return nil
}

// listen turns the fleet's wake-up messages into kicks, reconnecting as needed.
func (r *Runner) listen(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		ps := r.o.Store.Client().Subscribe(ctx, r.o.Store.ScheduleWakeChannel())
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(delay*2, 5*time.Second)
			continue
		}
		delay = 100 * time.Millisecond
		r.Kick() // anything missed while away
		ch := ps.Channel()
		for open := true; open; {
			select {
			case <-ctx.Done():
				_ = ps.Close()
				return
			case _, ok := <-ch:
				if !ok {
					open = false
					break
				}
				r.Kick()
			}
		}
		_ = ps.Close()
	}
}

// round takes the due queues, fires them, and returns how long to sleep
// (0: more are due now; -1: nothing is indexed).
func (r *Runner) round(ctx context.Context) (time.Duration, error) {
	wake, due, err := r.o.Store.TakeScheduleQueues(ctx, r.o.Lease, r.o.Batch)
	if err != nil {
		return 0, err
	}
	if len(due) == 0 {
		return wake, nil
	}
	// Workers groups of about equal size, fired at once.
	size := (len(due) + r.o.Workers - 1) / r.o.Workers
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	settles := make([]store.IndexSettle, 0, len(due))
	for from := 0; from < len(due); from += size {
		group := due[from:min(from+size, len(due))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := r.fireGroup(ctx, group)
			mu.Lock()
			defer mu.Unlock()
			// A queue whose firing failed is not settled: the lease makes
			// the fleet look again.
			settles = append(settles, st...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if err := r.o.Store.SettleScheduleIndexes(ctx, settles); err != nil {
		errs = append(errs, err)
	}
	// Look again at once: this round's settles moved the index.
	return 0, errors.Join(errs...)
}

// fireGroup fires the due schedules of a group of queues taken from the
// index, a batch of each queue per pipelined call until every queue has no
// more due, and returns the index entries of the queues it fired.
func (r *Runner) fireGroup(ctx context.Context, group []store.IndexedQueue) ([]store.IndexSettle, error) {
	known := r.o.Queues()
	settles := make([]store.IndexSettle, 0, len(group))
	qs := make([]config.Queue, 0, len(group))
	vers := make([]string, 0, len(group))
	for _, iq := range group {
		q, ok := known[iq.Queue]
		if !ok {
			r.mu.Lock()
			first := !r.warned[iq.Queue]
			r.warned[iq.Queue] = true
			r.mu.Unlock()
			if first {
				r.o.Logger.Warn("scheduler: schedules of a queue this daemon does not know; looking again later",
					zap.String("queue", iq.Queue))
			}
			// Not settled to the truth: looked at again later, and a daemon
			// that knows the queue fires it meanwhile.
			settles = append(settles, store.IndexSettle{Queue: iq.Queue, Version: "-",
				Earliest: strconv.FormatInt(r.o.UnknownRetry.Milliseconds(), 10)})
			continue
		}
		if q.Name == "" {
			q.Name = iq.Queue
		}
		qs = append(qs, q)
		vers = append(vers, iq.Version)
	}
	earliest := make([]string, len(qs))
	failed := make([]bool, len(qs))
	var errs []error
	pending := make([]int, len(qs))
	for i := range pending {
		pending[i] = i
	}
	for range 1000 { // bounded: batches of due schedules
		if len(pending) == 0 {
			break
		}
		batch := make([]config.Queue, len(pending))
		for k, i := range pending {
			batch[k] = qs[i]
		}
		ticked, terrs := r.o.Store.TickQueues(ctx, batch, r.o.Batch)
		more := pending[:0]
		for k, i := range pending {
			q, t := qs[i], ticked[k]
			if terrs[k] != nil {
				failed[i] = true
				errs = append(errs, terrs[k])
				continue
			}
			earliest[i] = t.Earliest
			published := r.report(q.Name, t.Now, t.Fired)
			if len(t.Cron) > 0 {
				at, fired, e, err := r.o.Store.FireSchedules(ctx, q, r.cronFires(q.Name, t.Now, t.Cron))
				if err != nil {
					failed[i] = true
					errs = append(errs, err)
					continue
				}
				earliest[i] = e
				published = r.report(q.Name, at, fired) || published
			}
			if published {
				r.o.Wake(q.Name)
			}
			if t.Taken >= r.o.Batch {
				more = append(more, i)
			}
		}
		pending = more
	}
	for i, q := range qs {
		if !failed[i] {
			settles = append(settles, store.IndexSettle{Queue: q.Name, Version: vers[i], Earliest: earliest[i]})
		}
	}
	return settles, errors.Join(errs...)
}

// cronFires computes the tick to fire of each due cron schedule: the latest
// one due at now (Redis' clock), ticks missed caught up as one.
func (r *Runner) cronFires(queue string, now time.Time, due []store.DueSchedule) []store.Fire {
	fires := make([]store.Fire, 0, len(due))
	for _, d := range due {
		tm, err := r.timing(d.Spec)
		if err != nil {
			r.o.Logger.Error("scheduler: stored schedule does not parse; skipped a day", zap.String("queue", queue),
				zap.String("schedule", d.ID), zap.Error(err))
			fires = append(fires, store.Fire{ID: d.ID, Expected: d.Next, Tick: d.Next, After: now.Add(24 * time.Hour)})
			continue
		}
		tick, after := tm.Latest(d.Next, now)
		if after.IsZero() {
			after = cronspec.NeverMS
		}
		fires = append(fires, store.Fire{ID: d.ID, Expected: d.Next, Tick: tick, After: after})
	}
	return fires
}

// report logs and counts the ticks a call fired (at: Redis' time of the
// call) and says whether one published a job.
func (r *Runner) report(queue string, at time.Time, fired []store.Fired) bool {
	published := false
	for _, f := range fired {
		switch f.Word {
		case "FIRED":
			published = true
			r.o.Logger.Debug("schedule fired", zap.String("queue", queue), zap.String("schedule", f.ID),
				zap.String("job", f.JobID), zap.Time("tick", f.Tick))
			if r.o.OnFired != nil {
				r.o.OnFired(queue, f.ID, f.Tick, at.Sub(f.Tick))
			}
		case "DUP":
			r.o.Logger.Info("schedule tick already had its job", zap.String("queue", queue),
				zap.String("schedule", f.ID), zap.String("job", f.JobID), zap.Time("tick", f.Tick))
		}
	}
	return published
}

// timing parses a stored spec ("<cron>\t<timezone>"), cached.
func (r *Runner) timing(spec string) (*cronspec.Timing, error) {
	r.mu.Lock()
	t, ok := r.timings[spec]
	r.mu.Unlock()
	if ok {
		return t, nil
	}
	expr, tz, _ := strings.Cut(spec, "\t")
	t, err := cronspec.Parse(expr, tz)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.timings) >= maxTimings {
		clear(r.timings)
	}
	r.timings[spec] = t
	r.mu.Unlock()
	return t, nil
}
