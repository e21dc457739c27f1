package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Queues created over the API (runtime.md §1) are stored in Redis, so that
// every daemon of the fleet serves them without a file or a reload:
//
//	<prefix>:{<queue>}:meta      HASH  the definition: spec (the settings as
//	                                   given, JSON, signing secret included),
//	                                   rev, created, updated (ms), deleting.
//	                                   In the queue's own slot, beside its jobs.
//	<prefix>:{<queue>}:state     HASH  (the queue's state) also holds the
//	                                   limits the spec sets: lim_conc,
//	                                   lim_rmax, lim_rwin (ms), which every
//	                                   claim reads (lua/queuedef.lua).
//	<prefix>:{#registry}:queues  HASH  queue name -> its definition's rev.
//	<prefix>:{#registry}:rev     STRING bumped by every create, change and
//	                                   delete.
//	<prefix>:queues              pub/sub channel: the name of a queue whose
//	                                   definition changed.
//
// The registry's hash tag "{#registry}" can never be a queue's ("#" is not
// allowed in queue names), so on Redis Cluster the registry has a slot of
// its own and registry.lua touches nothing else. A write is two scripts, in
// this order: the definition (queuedef.lua, in the queue's slot), then the
// registry (registry.lua); a delete unlists first, then removes. A crash
// between the two leaves a definition nobody lists (invisible; the same PUT
// again lists it) or, on delete, jobs still to remove (the same DELETE
// again removes them): never a listed queue without a definition.
//
// Daemons learn of changes from the channel at once and, should a message
// be lost, from the registry's rev, one GET a second whatever the number of
// queues (package queuesync).

// Errors of the queue definition calls.
var (
	// ErrDefConflict: the definition changed between the caller's read
	// and its write (a PATCH must read and merge again).
	ErrDefConflict = errors.New("queue definition changed meanwhile")
	// ErrDefDeleting: a delete of the queue is under way.
	ErrDefDeleting = errors.New("queue is being deleted")
)

// BusyError refuses a delete without purge: the queue still has jobs that
// are not terminal.
type BusyError struct{ Jobs int64 }

func (e *BusyError) Error() string {
	return fmt.Sprintf("queue has %d jobs waiting, in flight or awaiting ack", e.Jobs)
}

// QueueDef is the stored definition of a queue created over the API.
type QueueDef struct {
	Name string
	// Spec is the settings as given, a JSON object (QueueParamsSpec);
	// it holds the signing secret: never log or show it.
	Spec     []byte
	Rev      int64
	Created  time.Time
	Updated  time.Time
	Deleting bool
}

// DefLimits are the limits a spec sets, nil where it leaves them to the
// file's defaults. They are written where every claim reads them, so the
// fleet follows a change at once (lua/queuedef.lua).
type DefLimits struct {
	Concurrency     *int
	RateLimitMax    *int
	RateLimitWindow *time.Duration
}

// dropBatch is how many jobs one queuedrop.lua call removes at most: a few
// hundred keeps each call well under a millisecond or two of Redis time.
const dropBatch = 500

// MetaKey is the definition hash of queue.
func (s *Store) metaKey(queue string) string { return s.opts.Prefix + ":{" + queue + "}:meta" }

func (s *Store) registryKeys() []string {
	base := s.opts.Prefix + ":{#registry}:"
	return []string{base + "queues", base + "rev"}
}

// QueueDefsChannel is the pub/sub channel that carries the name of a queue
// whose definition changed.
func (s *Store) QueueDefsChannel() string { return s.opts.Prefix + ":queues" }

// defQueue is the Queue the definition scripts are run for: they read no
// setting (they are not among confScripts), only the queue's name.
func defQueue(name string) QueueParams { return QueueParams{Name: name} }

// QueueDefParams are one write of a queue's definition.
type QueueDefParams struct {
	// Name is the queue's name.
	Name string
	// WantRev is the revision the caller read and merged into (a PATCH),
	// or -1 to write whatever is stored (a PUT).
	WantRev int64
	// Spec is the definition, a JSON object.
	Spec []byte
	// Limits are the limits Spec sets.
	Limits DefLimits
}

// PutQueueDef writes a queue's definition, lists it in the registry and
// tells the fleet. created reports a new queue; rev is the definition's
// new revision. ErrDefConflict and ErrDefDeleting refuse it.
func (s *Store) PutQueueDef(ctx context.Context, p QueueDefParams) (created bool, rev int64, err error) {
	name, wantRev, spec, lim := p.Name, p.WantRev, p.Spec, p.Limits
	want := ""
	if wantRev >= 0 {
		want = strconv.FormatInt(wantRev, 10)
	}
	opt := func(v *int) string {
		if v == nil {
			return ""
		}
		return strconv.Itoa(*v)
	}
	win := ""
	if lim.RateLimitWindow != nil {
		win = strconv.FormatInt(lim.RateLimitWindow.Milliseconds(), 10)
	}
	q := defQueue(name)
	args := append(s.params(lua.QueueDef, q, 5), want, string(spec), opt(lim.Concurrency), opt(lim.RateLimitMax), win)
	res, err := s.runKeys(ctx, lua.QueueDef, q, s.Keys(name).List(s.metaKey(name)), args)
	if err != nil {
		return false, 0, err
	}
	a := newReply(lua.QueueDef, name, res, 1)
	switch word := a.str(0); word {
	case "DELETING":
		return false, 0, ErrDefDeleting
	case "CONFLICT":
		return false, 0, ErrDefConflict
	case "CREATED", "REPLACED":
		created, rev = word == "CREATED", a.int(1)
	default:
		a.unknown(0)
	}
	if err := a.err(); err != nil {
		return false, 0, err
	}
	if err := s.listQueue(ctx, name, rev, true); err != nil {
		return created, rev, err
	}
	return created, rev, nil
}

// listQueue lists (or unlists) name in the registry and publishes the
// change on QueueDefsChannel.
func (s *Store) listQueue(ctx context.Context, name string, rev int64, put bool) error {
	op := "del"
	if put {
		op = "put"
	}
	if _, err := s.runKeys(ctx, lua.Registry, defQueue(name), s.registryKeys(), []any{op, name, rev}); err != nil {
		return err
	}
	// A hint only: a daemon that misses it sees the registry's rev change
	// within its next check.
	if err := s.rdb.Publish(ctx, s.QueueDefsChannel(), name).Err(); err != nil {
		return wrap(fmt.Errorf("publish queue change of %s: %w", name, err))
	}
	return nil
}

// GetQueueDef reads one definition; nil when there is none.
func (s *Store) GetQueueDef(ctx context.Context, name string) (*QueueDef, error) {
	defs, err := s.GetQueueDefs(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	return defs[0], nil
}

// GetQueueDefs reads the definitions of names in one pipeline (on Redis
// Cluster, one round per node); an entry is nil where there is none.
func (s *Store) GetQueueDefs(ctx context.Context, names []string) ([]*QueueDef, error) {
	out := make([]*QueueDef, len(names))
	if len(names) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HMGet(ctx, s.metaKey(n), "spec", "rev", "created", "updated", "deleting")
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNil(err) {
		return nil, wrap(fmt.Errorf("read queue definitions: %w", err))
	}
	for i, c := range cmds {
		v := c.Val()
		if len(v) != 5 || v[0] == nil {
			continue
		}
		spec, err1 := cmdStr(v[0])
		rev, err2 := cmdInt(v[1])
		created, err3 := cmdInt(v[2])
		updated, err4 := cmdInt(v[3])
		deleting, err5 := cmdStr(v[4])
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("queue definition of %s: %w", names[i], err)
		}
		out[i] = &QueueDef{
			Name:     names[i],
			Spec:     []byte(spec),
			Rev:      rev,
			Created:  fromMS(created),
			Updated:  fromMS(updated),
			Deleting: deleting == "1",
		}
	}
	return out, nil
}

// RegistryRev reads the registry's revision: one GET, however many queues
// there are, that tells a daemon whether anything changed.
func (s *Store) RegistryRev(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.registryKeys()[1]).Int64()
	if err != nil && !isNil(err) {
		return 0, wrap(fmt.Errorf("read queue registry rev: %w", err))
	}
	return v, nil
}

// QueueRegistry reads the whole registry, name -> definition rev, and its
// revision (read first: a change in between is seen again next time).
func (s *Store) QueueRegistry(ctx context.Context) (int64, map[string]int64, error) {
	rev, err := s.RegistryRev(ctx)
	if err != nil {
		return 0, nil, err
	}
	all, err := s.rdb.HGetAll(ctx, s.registryKeys()[0]).Result()
	if err != nil && !isNil(err) {
		return 0, nil, wrap(fmt.Errorf("read queue registry: %w", err))
	}
	out := make(map[string]int64, len(all))
	for n, r := range all {
		out[n], _ = strconv.ParseInt(r, 10, 64)
	}
	return rev, out, nil
}

// DropQueueParams name the queue DropQueue deletes and how.
type DropQueueParams struct {
	// Name is the queue's name.
	Name string
	// Purge deletes its jobs too; without it a busy queue is refused.
	Purge bool
}

// DropQueue deletes a queue created over the API. Without p.Purge, a queue
// with jobs waiting, in flight or awaiting ack is refused with a
// *BusyError and nothing changes. Otherwise the definition is marked
// deleting, unlisted (every daemon drops the queue), and its jobs are
// removed in batches of at most dropBatch per script call, then its keys.
// kept counts jobs published by daemons that had not yet heard of the
// delete (without purge they stay, and a queue created under the name
// again delivers them). A delete interrupted part-way (an error) is
// finished by the same call again.
func (s *Store) DropQueue(ctx context.Context, p DropQueueParams) (removed, kept int64, err error) {
	name, purge := p.Name, p.Purge
	q := defQueue(name)
	keys := s.Keys(name).List(s.metaKey(name), s.statsKey(name))
	purgeArg := "0"
	if purge {
		purgeArg = "1"
	}
	call := func(first bool) (*reply, error) {
		f := "0"
		if first {
			f = "1"
		}
		args := append(s.params(lua.QueueDrop, q, 3), purgeArg, f, dropBatch)
		res, err := s.runKeys(ctx, lua.QueueDrop, q, keys, args)
		if err != nil {
			return nil, err
		}
		a := newReply(lua.QueueDrop, name, res, 2)
		return a, a.err()
	}
	a, err := call(true)
	if err != nil {
		return 0, 0, err
	}
	if a.str(0) == "BUSY" {
		return 0, 0, &BusyError{Jobs: a.int(1)}
	}
	if err := s.listQueue(ctx, name, 0, false); err != nil {
		return 0, 0, err
	}
	// Bounded: each round removes up to dropBatch jobs or ends; a queue
	// that keeps growing under a purge (stale daemons publishing) cannot
	// hold the loop past maxDropRounds.
	for range maxDropRounds {
		removed += a.int(1)
		switch a.str(0) {
		case "DONE":
			return removed, 0, nil
		case "KEPT":
			if a.len() > 2 {
				kept = a.int(2)
			}
			return removed, kept, a.err()
		case "MORE":
		default:
			a.unknown(0)
			return removed, 0, a.err()
		}
		if a, err = call(false); err != nil {
			return removed, 0, err
		}
	}
	return removed, 0, fmt.Errorf("queuedrop on queue %s: still removing after %d rounds", name, maxDropRounds)
}

// maxDropRounds bounds one DropQueue: 20 million jobs at dropBatch a round.
const maxDropRounds = 40000
