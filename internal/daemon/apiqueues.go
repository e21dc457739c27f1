package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/api"
	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Queues over the API (runtime.md §1). The daemon runs with an effective
// configuration: the file's, plus every queue defined in Redis over the
// API (package queuesync keeps that set in step). Both kinds go through
// one path, rebuild, which is also what a file reload takes, so a limit
// changed over the API reaches the dispatcher exactly as a reload's does:
// each pump picks up its queue's new settings at its next claim, no job
// is touched. The limits an API queue sets are also in Redis, where every
// claim reads them (lua/queuedef.lua), so the fleet never claims past the
// lower of an old and a new limit while daemons' copies differ.

// apiQueues is the daemon's resolved copy of the API queues.
type apiQueues struct {
	mu sync.Mutex
	// defs are the definitions last applied; resolved caches each one's
	// Queue, by name, valid while its rev is the same and the file's
	// defaults have not changed.
	defs     map[string]*store.QueueDef
	resolved map[string]resolvedDef
	// conflicts are the names a file queue and an API queue both claim,
	// logged once each.
	conflicts map[string]bool
	// known are the queue names metrics were initialised for.
	known map[string]bool
	// onDelete are called after a queue was deleted over the API.
	onDelete []func(ctx context.Context, queue string)
}

type resolvedDef struct {
	rev int64
	q   config.Queue
	ok  bool
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

// applyDefs is the syncer's Apply: the API queues changed.
func (d *Daemon) applyDefs(defs map[string]*store.QueueDef) {
	d.api.mu.Lock()
	d.api.defs = defs
	d.api.mu.Unlock()
	d.rebuild(false)
}

// rebuild makes the effective configuration from the file's and the API
// queues, and applies it as a reload does. fileChanged re-resolves every
// API queue (the file's defaults may have changed).
func (d *Daemon) rebuild(fileChanged bool) {
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	file := d.file.Load()
	if fileChanged || d.api.resolved == nil {
		d.api.resolved = map[string]resolvedDef{}
	}
	eff := *file
	eff.Queues = maps.Clone(file.Queues)
	if eff.Queues == nil {
		eff.Queues = map[string]config.Queue{}
	}
	for name := range d.api.resolved {
		if _, ok := d.api.defs[name]; !ok {
			delete(d.api.resolved, name)
		}
	}
	// touched are the API queues resolved anew: with the file unchanged,
	// only they (and removed ones) reach the dispatcher, so a change of
	// one queue among 10,000 costs one pump's update, not 10,000 compares.
	var touched []string
	for name, def := range d.api.defs {
		r, ok := d.api.resolved[name]
		if !ok || r.rev != def.Rev {
			r = resolvedDef{rev: def.Rev}
			r.q, r.ok = d.resolveDef(def, file.Defaults)
			d.api.resolved[name] = r
			touched = append(touched, name)
		}
		if !r.ok {
			continue
		}
		if _, clash := file.Queues[name]; clash {
			// Start-up (a reload would have been refused): the name is
			// the API queue's, whose jobs must not go to the file's URL.
			if !d.api.conflicts[name] {
				d.api.conflicts[name] = true
				d.log.Error("a queue in the configuration file is ignored: a queue created over the API holds the name; delete that one over the API first, or rename the file's",
					zap.String("queue", name))
			}
		}
		eff.Queues[name] = r.q
	}
	prev := d.cfg.Load()
	d.cfg.Store(&eff)
	var added []string
	for name := range eff.Queues {
		if !d.api.known[name] {
			d.api.known[name] = true
			added = append(added, name)
		}
	}
	slices.Sort(added)
	d.metrics.InitQueues(added)
	if fileChanged || prev == nil {
		d.disp.SetQueues(eff.Queues)
		return
	}
	changed := make(map[string]config.Queue, len(touched))
	for _, name := range touched {
		if q, ok := eff.Queues[name]; ok {
			changed[name] = q
		}
	}
	var removed []string
	for name := range prev.Queues {
		if _, ok := eff.Queues[name]; !ok {
			removed = append(removed, name)
		}
	}
	d.disp.UpdateQueues(changed, removed)
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
	d.api.mu.Lock()
	defer d.api.mu.Unlock()
	var clash []string
	for name := range cfg.Queues {
		if _, ok := d.api.defs[name]; ok {
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
	created, _, err := d.store.PutQueueDef(ctx, name, rev, raw, limitsOf(canon, q))
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
	removed, kept, err := d.store.DropQueue(ctx, name, purge)
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
