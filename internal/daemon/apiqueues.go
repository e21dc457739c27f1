package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/api"
	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Queues over the API (runtime.md §1). The daemon serves the file's
// queues and every queue defined in Redis over the API (package queuesync
// keeps that set in step and hands over only what changed). A change of an
// API queue costs the daemon time for that queue alone, however many there
// are: its definition is resolved against the file's defaults and put in
// d.api.served, and the dispatcher is told about that queue only
// (Dispatcher.UpdateQueues). Readers look a queue up by name (lookupQueue);
// the few that need every queue (listings, the scheduler) share a map built
// at their first read after a change (queueMap). A limit changed over the
// API reaches the dispatcher as a reload's does: the pump, if the queue has
// one, picks up the new settings at its next claim; no job is touched. The
// limits an API queue sets are also in Redis, where every claim reads them
// (lua/queuedef.lua), so the fleet never claims past the lower of an old
// and a new limit while daemons' copies differ.

// apiQueues is the daemon's resolved copy of the API queues.
type apiQueues struct {
	mu sync.RWMutex
	// served are the API queues by name, each with its definition and its
	// Queue resolved against the file's defaults.
	served map[string]*servedDef
	// snap is every queue served, the file's and the API's, built by the
	// first queueMap after a change and shared by its readers (nil: none
	// built since the last change).
	snap map[string]config.Queue
	// conflicts are the names a file queue and an API queue both claim,
	// logged once each.
	conflicts map[string]bool
	// known are the file's queue names metrics were initialised for (API
	// queues' series are made at first use: metrics.InitQueues).
	known map[string]bool
	// onDelete are called after a queue was deleted over the API.
	onDelete []func(ctx context.Context, queue string)
}

// servedDef is one API queue: its definition and, when ok, the Queue it
// resolves to (a definition that does not validate with the file's
// defaults is not served, ok false). Neither is modified once made: the
// dispatcher holds the same q (Dispatcher.UpdateQueues), so a change makes
// a new servedDef.
type servedDef struct {
	def *store.QueueDef
	q   *config.Queue
	ok  bool
}

// newServed resolves def against defaults.
func (d *Daemon) newServed(def *store.QueueDef, defaults config.QueueSettings) *servedDef {
	q, ok := d.resolveDef(def, defaults)
	return &servedDef{def: def, q: &q, ok: ok}
}

// OnQueueDeleted registers f to be called, on the daemon that served the
// DELETE, once a queue created over the API is deleted (its jobs removed,
// every daemon told). Other parts of the daemon that keep state per queue
// hang off it: runtime.md §4 "a schedule on a queue that is deleted is
// deleted with it". f runs before the DELETE answers; ctx bounds it.
func (d *Daemon) OnQueueDeleted(f func(ctx context.Context, queue string)) {
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	d.api.onDelete = append(d.api.onDelete, f)
}

// lookupQueue returns the queue called name as this daemon serves it: the
// API queue of that name if it validates, else the file's.
func (d *Daemon) lookupQueue(name string) (config.Queue, bool) {
	d.api.mu.RLock()
	s := d.api.served[name]
	var q config.Queue
	ok := s != nil && s.ok
	if ok {
		q = *s.q
	}
	d.api.mu.RUnlock()
	if ok {
		return q, true
	}
	q, ok = d.file.Load().Queues[name]
	return q, ok
}

// queueMap returns every queue this daemon serves, by name. The map is
// shared: callers must not change it. It is built by the first call after a
// change, so writes stay O(1) and a reader that needs every queue pays for
// the copy once per change, not once per call.
func (d *Daemon) queueMap() map[string]config.Queue {
	d.api.mu.RLock()
	m := d.api.snap
	d.api.mu.RUnlock()
	if m != nil {
		return m
	}
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	if d.api.snap == nil {
		file := d.file.Load()
		m := make(map[string]config.Queue, len(file.Queues)+len(d.api.served))
		maps.Copy(m, file.Queues)
		for name, s := range d.api.served {
			if s.ok {
				m[name] = *s.q
			}
		}
		d.api.snap = m
	}
	return d.api.snap
}

// queueNames are the names of every queue this daemon serves, sorted.
func (d *Daemon) queueNames() []string {
	d.api.mu.RLock()
	names := make([]string, 0, len(d.api.served)+len(d.file.Load().Queues))
	for name, s := range d.api.served {
		if s.ok {
			names = append(names, name)
		}
	}
	d.api.mu.RUnlock()
	for name := range d.file.Load().Queues {
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// applyDefs is the syncer's Apply: the API queues in changed are new or
// changed, those in removed are gone. It costs time for those queues only.
func (d *Daemon) applyDefs(changed map[string]*store.QueueDef, removed []string) {
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	if d.api.served == nil {
		d.api.served = map[string]*servedDef{}
	}
	file := d.file.Load()
	disp := make(map[string]*config.Queue, len(changed)+len(removed))
	var gone []string
	// serve decides what the dispatcher runs for name: the API queue if
	// it validates, else the file's queue of that name, else nothing.
	serve := func(name string, s *servedDef) {
		switch _, filed := file.Queues[name]; {
		case s != nil && s.ok:
			if filed {
				d.clashLocked(name)
			}
			disp[name] = s.q
		case filed:
			fq := file.Queues[name]
			disp[name] = &fq
		default:
			gone = append(gone, name)
		}
	}
	for name, def := range changed {
		s := d.newServed(def, file.Defaults)
		d.api.served[name] = s
		serve(name, s)
	}
	for _, name := range removed {
		if _, ok := d.api.served[name]; !ok {
			continue
		}
		delete(d.api.served, name)
		serve(name, nil)
	}
	d.api.snap = nil
	d.disp.UpdateQueues(disp, gone)
}

// clashLocked logs, once per name, that the file's queue called name is
// ignored: start-up (a reload would have been refused), and the name is
// the API queue's, whose jobs must not go to the file's URL.
func (d *Daemon) clashLocked(name string) {
	if d.api.conflicts[name] {
		return
	}
	d.api.conflicts[name] = true
	d.log.Error("a queue in the configuration file is ignored: a queue created over the API holds the name; delete that one over the API first, or rename the file's",
		zap.String("queue", name))
}

// rebuild applies a reloaded file: its queues, and every API queue
// resolved again against its defaults (they may have changed), as a
// reload does (Dispatcher.SetQueues compares each queue and touches only
// those that changed).
func (d *Daemon) rebuild() {
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	file := d.file.Load()
	d.cfg.Store(file)
	eff := maps.Clone(file.Queues)
	if eff == nil {
		eff = map[string]config.Queue{}
	}
	for name, old := range d.api.served {
		s := d.newServed(old.def, file.Defaults)
		if s.ok == old.ok && (!s.ok || reflect.DeepEqual(*s.q, *old.q)) {
			s = old // unchanged: the dispatcher keeps sharing old.q
		}
		d.api.served[name] = s
		if !s.ok {
			continue
		}
		if _, clash := file.Queues[name]; clash {
			d.clashLocked(name)
		}
		eff[name] = *s.q
	}
	d.api.snap = nil
	var added []string
	for _, name := range file.QueueNames() {
		if !d.api.known[name] {
			d.api.known[name] = true
			added = append(added, name)
		}
	}
	d.metrics.InitQueues(added)
	d.disp.SetQueues(eff)
}

// resolveDef turns a stored definition into its Queue against the file's
// defaults. A definition that no longer validates (the defaults changed
// under it, say backoff.base above its backoff.max) is left out, and said
// so, rather than run with settings nobody chose.
func (d *Daemon) resolveDef(def *store.QueueDef, defaults config.QueueSettings) (config.Queue, bool) {
	var spec config.QueueSpec
	if err := json.Unmarshal(def.Spec, &spec); err != nil {
		d.log.Error("queue created over the API has an unreadable definition; it is not served",
			zap.String("queue", def.Name), zap.Int64("rev", def.Rev))
		return config.Queue{}, false
	}
	q, _, problems := config.ResolveQueueSpec(def.Name, spec, defaults)
	if len(problems) > 0 {
		fields := make([]string, len(problems))
		for i, p := range problems {
			fields[i] = p.Field + ": " + p.Message
		}
		d.log.Error("queue created over the API is not valid with this file's defaults; it is not served until it is changed",
			zap.String("queue", def.Name), zap.Strings("problems", fields))
		return config.Queue{}, false
	}
	return q, true
}

// CheckReload refuses a configuration file that adds a queue whose name a
// queue created over the API holds (reload.Checker).
func (d *Daemon) CheckReload(cfg *config.Config) error {
	d.api.mu.RLock()
	defer d.api.mu.RUnlock()
	var clash []string
	for name := range cfg.Queues {
		if _, ok := d.api.served[name]; ok {
			clash = append(clash, name)
		}
	}
	if len(clash) == 0 {
		return nil
	}
	slices.Sort(clash)
	return fmt.Errorf("queues %q are held by queues created over the API; delete those over the API first, or rename the file's", clash)
}

// specProblems are the validation failures of a spec.
type specProblems []config.FieldProblem

// validateSpec resolves spec for name against the running file's defaults and
// checks the webhook URL against webhooks.allowedHosts and
// allowPrivateNetworks (runtime.md §2).
func (d *Daemon) validateSpec(name string, spec config.QueueSpec) (config.Queue, config.QueueSpec, specProblems) {
	file := d.file.Load()
	q, canon, problems := config.ResolveQueueSpec(name, spec, file.Defaults)
	if len(problems) > 0 {
		return q, nil, problems
	}
	if policy, err := file.Webhooks.Policy(); err == nil {
		if err := policy.CheckURL(q.WebhookURL); err != nil {
			return q, nil, specProblems{{Field: "webhookUrl", Message: err.Error()}}
		}
	}
	return q, canon, nil
}

// limitsOf are the limits canon sets itself, for the claim scripts.
func limitsOf(canon config.QueueSpec, q config.Queue) store.DefLimits {
	var lim store.DefLimits
	if _, ok := canon["concurrency"]; ok {
		lim.Concurrency = &q.Concurrency
	}
	if _, ok := canon["rateLimitMax"]; ok {
		lim.RateLimitMax = &q.RateLimitMax
	}
	if _, ok := canon["rateLimitWindow"]; ok {
		lim.RateLimitWindow = &q.RateLimitWindow
	}
	return lim
}

// isFileQueue reports whether the running file defines name.
func (d *Daemon) isFileQueue(name string) bool {
	_, ok := d.file.Load().Queues[name]
	return ok
}

// writeDef stores a validated definition and applies it on this daemon
// before answering, so the writer's next request sees it.
func (d *Daemon) writeDef(ctx context.Context, name string, rev int64, canon config.QueueSpec, q config.Queue) (bool, error) {
	raw, err := json.Marshal(canon)
	if err != nil {
		return false, fmt.Errorf("encode queue definition: %w", err)
	}
	created, _, err := d.store.PutQueueDef(ctx, store.QueueDefParams{Name: name, WantRev: rev, Spec: raw, Limits: limitsOf(canon, q)})
	if err != nil {
		return false, err
	}
	if err := d.sync.Refresh(ctx, name); err != nil {
		d.log.Warn("queue definition written; reading it back failed (the periodic check applies it)",
			zap.String("queue", name), zap.Error(err))
	}
	return created, nil
}

func (b backend) PutQueue(ctx context.Context, name string, spec config.QueueSpec) (config.Queue, bool, []config.FieldProblem, error) {
	d := b.d
	if d.isFileQueue(name) {
		return config.Queue{}, false, nil, api.ErrFileQueue
	}
	q, canon, problems := d.validateSpec(name, spec)
	if len(problems) > 0 {
		return config.Queue{}, false, problems, nil
	}
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	created, err := d.writeDef(ctx, name, -1, canon, q)
	if err != nil {
		return config.Queue{}, false, nil, err
	}
	verb := "queue replaced over the API"
	if created {
		verb = "queue created over the API"
	}
	// Settings are named, never shown: the URL may carry a token and the
	// spec holds the signing secret.
	d.log.Info(verb, zap.String("queue", name), zap.Strings("settings", slices.Sorted(maps.Keys(canon))))
	return q, created, nil, nil
}

// patchAttempts bounds the read-merge-write rounds of one PATCH that
// meets concurrent writes of the same queue.
const patchAttempts = 5

func (b backend) PatchQueue(ctx context.Context, name string, patch config.QueueSpec) (config.Queue, []config.FieldProblem, error) {
	d := b.d
	if d.isFileQueue(name) {
		return config.Queue{}, nil, api.ErrFileQueue
	}
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	for range patchAttempts {
		def, err := d.store.GetQueueDef(ctx, name)
		if err != nil {
			return config.Queue{}, nil, err
		}
		if def == nil {
			return config.Queue{}, nil, store.ErrNotFound
		}
		if def.Deleting {
			return config.Queue{}, nil, store.ErrDefDeleting
		}
		var base config.QueueSpec
		if err := json.Unmarshal(def.Spec, &base); err != nil {
			return config.Queue{}, nil, fmt.Errorf("queue %s: stored definition unreadable: %w", name, err)
		}
		q, canon, problems := d.validateSpec(name, config.MergeQueueSpec(base, patch))
		if len(problems) > 0 {
			return config.Queue{}, problems, nil
		}
		_, err = d.writeDef(ctx, name, def.Rev, canon, q)
		if errors.Is(err, store.ErrDefConflict) {
			continue // another write came between: merge into it
		}
		if err != nil {
			return config.Queue{}, nil, err
		}
		d.log.Info("queue changed over the API", zap.String("queue", name), zap.Strings("settings", slices.Sorted(maps.Keys(patch))))
		return q, nil, nil
	}
	return config.Queue{}, nil, fmt.Errorf("queue %s: %w (%d attempts)", name, store.ErrDefConflict, patchAttempts)
}

// deleteTimeout bounds one DELETE's removal of jobs. The removal goes on
// when the client gives up waiting: a half-deleted queue is finished by
// the same DELETE again, but is better finished now.
const deleteTimeout = 5 * time.Minute

func (b backend) DeleteQueue(ctx context.Context, name string, purge bool) error {
	d := b.d
	if d.isFileQueue(name) {
		return api.ErrFileQueue
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	removed, kept, err := d.store.DropQueue(ctx, store.DropQueueParams{Name: name, Purge: purge})
	if err != nil {
		return err
	}
	if err := d.sync.Refresh(ctx, name); err != nil {
		d.log.Warn("queue deleted; applying it here failed (the periodic check applies it)", zap.String("queue", name), zap.Error(err))
	}
	d.log.Info("queue deleted over the API", zap.String("queue", name), zap.Bool("purge", purge),
		zap.Int64("jobsRemoved", removed), zap.Int64("jobsKept", kept))
	d.api.mu.Lock()
	hooks := slices.Clone(d.api.onDelete)
	d.api.mu.Unlock()
	for _, f := range hooks {
		f(ctx, name)
	}
	return nil
}
