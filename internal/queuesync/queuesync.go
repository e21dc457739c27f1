// Package queuesync keeps a daemon's copy of the queues created over the
// API (runtime.md §1) in step with Redis, so every daemon of a fleet sees a
// create, change or delete within a second without a reload.
//
// Two paths bring a change. The daemon that wrote it publishes the queue's
// name on a pub/sub channel (store.QueueDefsChannel): every daemon reads
// that queue's definition at once. Should a message be lost (a subscription
// that was down), a cheap version check catches it: once a second each
// daemon reads the registry's revision, one GET whatever the number of
// queues, and only when it moved reads the registry (name -> revision) and
// then only the definitions whose revision differs from its own. An idle
// fleet therefore costs one GET a second per daemon, not one call per
// queue.
//
// Changes are applied in batches (at most one apply per ApplyEvery), so
// 10,000 queues created in a burst cost a few dozen applies, not 10,000,
// and each apply is handed only what changed: a write costs the daemon the
// same with 10 queues or 10,000.
package queuesync

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/store"
)

// Source is what the syncer reads; *store.Store implements it.
type Source interface {
	QueueDefsChannel() string
	RegistryRev(ctx context.Context) (int64, error)
	QueueRegistry(ctx context.Context) (int64, map[string]int64, error)
	GetQueueDefs(ctx context.Context, names []string) ([]*store.QueueDef, error)
}

// Defaults of Options.
const (
	// DefaultCheckEvery is the version check's period: the longest a lost
	// notification delays a change (runtime.md: within 1 s).
	DefaultCheckEvery = 500 * time.Millisecond
	// DefaultApplyEvery is the least time between two applies, so a burst
	// of notifications is applied in a few batches.
	DefaultApplyEvery = 50 * time.Millisecond
)

// Options configure a Syncer.
type Options struct {
	Source Source
	// Redis carries the subscription.
	Redis redis.UniversalClient
	// Apply receives what changed: the definitions that are new or have a
	// new revision (name -> definition, never one that is being deleted)
	// and the names of queues that are gone (deleted, or being deleted).
	// The first read passes every definition (it is called even when
	// there is none). It runs on the syncer's goroutine, or on a Refresh
	// caller's, one at a time; it may keep the definitions, not the map.
	Apply func(changed map[string]*store.QueueDef, removed []string)
	// Logger receives warnings about Redis failures; nil discards them.
	Logger     *zap.Logger
	CheckEvery time.Duration
	ApplyEvery time.Duration
}

// Syncer holds this daemon's copy of the API queue definitions.
type Syncer struct {
	opts Options
	log  *zap.Logger

	mu sync.Mutex // guards revs, rev, dirty, full and loaded
	// revs are the revisions of the definitions applied, by name.
	revs map[string]int64
	// rev is the registry revision defs reflect (-1: never read).
	rev   int64
	dirty map[string]bool
	full  bool // a full registry read is wanted
	// loaded is set by the first full read, which is applied even when
	// it found nothing, so the daemon knows the registry has been read.
	loaded bool
	kick   chan struct{}
	// applyMu serialises Apply calls.
	applyMu sync.Mutex
}

// New returns a Syncer; Run keeps it in step.
func New(opts Options) *Syncer {
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = DefaultCheckEvery
	}
	if opts.ApplyEvery <= 0 {
		opts.ApplyEvery = DefaultApplyEvery
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Syncer{opts: opts, log: opts.Logger, revs: map[string]int64{}, rev: -1,
		dirty: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Load reads every definition once (start-up) and applies them.
func (s *Syncer) Load(ctx context.Context) error {
	return s.sync(ctx, true, nil)
}

// Refresh reads name's definition now and applies it before returning, so
// the daemon that wrote a change serves it to its next request.
func (s *Syncer) Refresh(ctx context.Context, name string) error {
	return s.sync(ctx, false, []string{name})
}

// Run subscribes and checks until ctx ends. onReconnect-style catch-up is
// built in: every (re)subscription is followed by a full check.
func (s *Syncer) Run(ctx context.Context) error {
	go s.subscribe(ctx)
	check := time.NewTicker(s.opts.CheckEvery)
	defer check.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			rev, err := s.opts.Source.RegistryRev(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Debug("queue registry check failed; retrying", zap.Error(err))
				}
				continue
			}
			s.mu.Lock()
			if rev != s.rev {
				s.full = true
			}
			full := s.full
			s.mu.Unlock()
			if !full {
				continue
			}
		case <-s.kick:
		}
		if wait := s.opts.ApplyEvery - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		last = time.Now()
		s.mu.Lock()
		full, names := s.full, make([]string, 0, len(s.dirty))
		for n := range s.dirty {
			names = append(names, n)
		}
		s.full = false
		clear(s.dirty)
		s.mu.Unlock()
		if err := s.sync(ctx, full, names); err != nil && ctx.Err() == nil {
			s.log.Warn("queue definitions: read failed; retrying", zap.Error(err))
			s.mu.Lock()
			s.full = true
			s.mu.Unlock()
		}
	}
}

// subscribe listens on the channel, reconnecting with a backoff.
func (s *Syncer) subscribe(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		ps := s.opts.Redis.Subscribe(ctx, s.opts.Source.QueueDefsChannel())
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			delay = min(delay*2, 5*time.Second)
			continue
		}
		delay = 100 * time.Millisecond
		// What changed while the subscription was down.
		s.mark("", true)
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
				s.mark(m.Payload, false)
			}
		}
		_ = ps.Close()
	}
}

func (s *Syncer) mark(name string, full bool) {
	s.mu.Lock()
	if full {
		s.full = true
	} else {
		s.dirty[name] = true
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sync reads what changed and applies the result. full reads the registry
// and every definition whose revision differs from the one held; names are
// read in any case.
func (s *Syncer) sync(ctx context.Context, full bool, names []string) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var listed map[string]int64
	rev := int64(-1)
	if full {
		var err error
		if rev, listed, err = s.opts.Source.QueueRegistry(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		for n, r := range listed {
			if have, ok := s.revs[n]; !ok || have != r {
				want[n] = true
			}
		}
		for n := range s.revs {
			if _, ok := listed[n]; !ok {
				want[n] = true
			}
		}
		s.mu.Unlock()
	}
	if len(want) == 0 && !full {
		return nil
	}
	list := make([]string, 0, len(want))
	for n := range want {
		list = append(list, n)
	}
	// Bounded reads: a pipeline of at most readBatch definitions at a time.
	got := make(map[string]*store.QueueDef, len(list))
	for i := 0; i < len(list); i += readBatch {
		part := list[i:min(i+readBatch, len(list))]
		defs, err := s.opts.Source.GetQueueDefs(ctx, part)
		if err != nil {
			return err
		}
		for j, d := range defs {
			got[part[j]] = d
		}
	}
	s.mu.Lock()
	changed := map[string]*store.QueueDef{}
	var removed []string
	for n, d := range got {
		// Unlisted (when the registry was read) or being deleted: gone.
		if d == nil || d.Deleting || (listed != nil && !inRegistry(listed, n)) {
			if _, ok := s.revs[n]; ok {
				delete(s.revs, n)
				removed = append(removed, n)
			}
			continue
		}
		if have, ok := s.revs[n]; !ok || have != d.Rev {
			s.revs[n] = d.Rev
			changed[n] = d
		}
	}
	if rev >= 0 {
		s.rev = rev
	}
	first := s.opts.Apply != nil && full && rev >= 0 && !s.loaded
	s.loaded = s.loaded || full
	s.mu.Unlock()
	if (len(changed) > 0 || len(removed) > 0 || first) && s.opts.Apply != nil {
		s.opts.Apply(changed, removed)
	}
	return nil
}

func inRegistry(listed map[string]int64, n string) bool {
	_, ok := listed[n]
	return ok
}

// readBatch bounds one pipeline of definition reads.
const readBatch = 1000

// Len is the number of API queue definitions applied.
func (s *Syncer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.revs)
}
