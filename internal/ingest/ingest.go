// Package ingest merges concurrent publishes to one queue into one script
// call (group commit). Under load, HTTP publish throughput is bound by Redis
// round trips and script calls, not by the work inside them; while one
// publish script runs, requests that arrive meanwhile queue up and go
// together in the next call. An idle publish goes out at once, so latency is
// unchanged when there is nothing to merge. Each job keeps its own result,
// and idempotency keys are checked job by job inside the script, so merging
// changes nothing a client can observe.
package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Publisher is the store call being merged.
type Publisher interface {
	Publish(ctx context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error)
}

// MaxJobs bounds one merged call, like the batch endpoint.
const MaxJobs = 1000

// Coalescer merges publishes per queue.
type Coalescer struct {
	pub     Publisher
	timeout time.Duration

	mu     sync.Mutex
	queues map[string]*lane
}

// New returns a Coalescer over pub.
func New(pub Publisher) *Coalescer {
	return &Coalescer{pub: pub, queues: map[string]*lane{}}
}

// WithCallTimeout bounds how long a publish may take from the moment it
// arrives, waiting included (0: no bound beyond the caller's context). Each
// call runs until the earliest deadline of the publishes it carries, so a
// publish stuck behind a slow call still ends on time. One timer per call,
// not per request: under load a call carries many requests, and a timer per
// HTTP request was a measurable share of a publish's CPU.
func (c *Coalescer) WithCallTimeout(d time.Duration) *Coalescer {
	c.timeout = d
	return c
}

type request struct {
	ctx context.Context
	// deadline is when this publish must have ended (zero: no timeout).
	deadline time.Time
	q        config.Queue
	jobs     []store.NewJob
	done     chan result
}

type result struct {
	res []store.Published
	err error
}

// lane is one queue's line of waiting requests; busy while a call runs.
type lane struct {
	mu      sync.Mutex
	waiting []*request
	busy    bool
}

// Publish stores jobs like Publisher.Publish, merged with concurrent calls
// for the same queue. A request larger than MaxJobs goes on its own.
func (c *Coalescer) Publish(ctx context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
	var deadline time.Time
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout)
	}
	if len(jobs) >= MaxJobs {
		ctx, cancel := bound(ctx, deadline)
		defer cancel()
		return c.pub.Publish(ctx, q, jobs)
	}
	c.mu.Lock()
	l := c.queues[q.Name]
	if l == nil {
		l = &lane{}
		c.queues[q.Name] = l
	}
	c.mu.Unlock()

	r := &request{ctx: ctx, deadline: deadline, q: q, jobs: jobs, done: make(chan result, 1)}
	l.mu.Lock()
	l.waiting = append(l.waiting, r)
	lead := !l.busy
	l.busy = true
	l.mu.Unlock()
	if lead {
		// This goroutine drives the lane until nothing is waiting.
		go c.drive(l)
	}
	select {
	case out := <-r.done:
		return out.res, out.err
	case <-ctx.Done():
		// The call may still store the jobs; the client retries with its
		// idempotency key, as after any timeout.
		return nil, ctx.Err()
	}
}

func (c *Coalescer) drive(l *lane) {
	for {
		l.mu.Lock()
		if len(l.waiting) == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		var take []*request
		n := 0
		rest := l.waiting[:0:0]
		now := time.Now()
		for _, r := range l.waiting {
			if r.ctx.Err() != nil {
				r.done <- result{err: r.ctx.Err()}
				continue
			}
			if !r.deadline.IsZero() && !now.Before(r.deadline) {
				r.done <- result{err: context.DeadlineExceeded}
				continue
			}
			if n+len(r.jobs) > MaxJobs && n > 0 {
				rest = append(rest, r)
				continue
			}
			take = append(take, r)
			n += len(r.jobs)
		}
		l.waiting = rest
		l.mu.Unlock()
		if len(take) == 0 {
			continue
		}
		c.call(take, n)
	}
}

func (c *Coalescer) call(take []*request, n int) {
	if len(take) == 1 {
		r := take[0]
		ctx, cancel := bound(r.ctx, r.deadline)
		res, err := c.pub.Publish(ctx, r.q, r.jobs)
		cancel()
		r.done <- result{res, err}
		return
	}
	all := make([]store.NewJob, 0, n)
	for _, r := range take {
		all = append(all, r.jobs...)
	}
	// The merged call is not bound to any one client's context: it must not
	// fail every request because one client went away. Use the newest queue
	// settings and a context that ends when all callers have gone.
	// Requests wait in arrival order, so the first has the earliest deadline.
	ctx, cancel := bound(context.WithoutCancel(take[0].ctx), take[0].deadline)
	defer cancel()
	res, err := c.pub.Publish(ctx, take[len(take)-1].q, all)
	i := 0
	for _, r := range take {
		if err != nil {
			r.done <- result{err: err}
			continue
		}
		r.done <- result{res: res[i : i+len(r.jobs)]}
		i += len(r.jobs)
	}
}

// bound ends ctx at deadline (zero: only when ctx ends).
func bound(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if !deadline.IsZero() {
		return context.WithDeadline(ctx, deadline)
	}
	return context.WithCancel(ctx)
}
