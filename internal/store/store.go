package store

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Options tune a Store.
type Options struct {
	// Prefix starts every key.
	Prefix string
	// LeaseMargin is added to a queue's webhook timeout to form a delivery's lease.
	LeaseMargin time.Duration
	// MaintenanceBatch bounds how many expired leases, lifetimes and purges one
	// claim handles, so no script call grows with the backlog.
	MaintenanceBatch int
	// OnScript, when set, is told how long each script call took as this
	// process saw it (sending, Redis running the script, the answer coming
	// back, and waiting for a CPU on either side), and its error. It runs on
	// the caller's goroutine after every call, so it must be cheap and safe
	// for concurrent use. It feeds the daemon's Redis latency metrics:
	// Redis' own INFO commandstats shows only the middle part. Under
	// replicated durability the time includes the wait for a replica, and
	// a write no replica confirmed counts as an error.
	OnScript func(script string, took time.Duration, err error)
	// Replicated makes every acknowledged write and every recorded outcome
	// wait until at least one replica has it (WAIT), so a master that dies
	// right after answering cannot take it along (redis.durability:
	// replicated; see durability.go). Off, a write is acknowledged once the
	// master has it (local).
	Replicated bool
	// EvalScripts sends every script with EVALSHA even where Redis has
	// Functions (scripts.go): for tests and benchmarks of that path, which
	// serves a Redis older than 7.0 or one whose ACL forbids FUNCTION.
	EvalScripts bool
	// ReplicaTimeout bounds that wait; past it the call fails with
	// ErrNotReplicated. 0 means DefaultReplicaTimeout.
	ReplicaTimeout time.Duration
}

// Store runs simpleqd's scripts against one Redis or Redis Cluster.
type Store struct {
	rdb  redis.UniversalClient
	opts Options
	sc   *scripts
	ids  IDGen
	node string
	seq  atomic.Uint64
	// conf is what this Store last wrote of each queue's settings (conf.go).
	conf confs
}

// New prepares a Store; call Load before use so pipelined calls never meet NOSCRIPT.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = "simpleq"
	}
	if opts.MaintenanceBatch <= 0 {
		opts.MaintenanceBatch = 100
	}
	if opts.ReplicaTimeout <= 0 {
		opts.ReplicaTimeout = DefaultReplicaTimeout
	}
	sc, err := newScripts(opts.EvalScripts)
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, opts: opts, sc: sc}
	var b [6]byte
	if _, err := cryptoRead(b[:]); err != nil {
		// Fail rather than run with a zero node id: lease tokens would then
		// differ between daemons only by their per-process counters, so two
		// daemons could hold the same token and pass each other's fencing.
		return nil, fmt.Errorf("store: random node id for lease tokens: %w", err)
	}
	s.node = hex.EncodeToString(b[:])
	return s, nil
}

// cryptoRead is crypto/rand's Read, a variable so tests can make it fail.
var cryptoRead = crand.Read

// Load loads every script into Redis (on every master of a cluster), and
// the function library where Redis has Functions (scripts.go).
func (s *Store) Load(ctx context.Context) error { return s.sc.load(ctx, s.rdb) }

// UsesFunctions reports whether calls run as Redis Functions (FCALL) rather
// than scripts (EVALSHA): what Load found Redis to allow.
func (s *Store) UsesFunctions() bool { return s.sc.useFns.Load() }

// Ping reports whether Redis answers and the scripts are loaded.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return wrap(fmt.Errorf("ping: %w", err))
	}
	ok, err := s.rdb.ScriptExists(ctx, s.sc.hashes()...).Result()
	if err != nil {
		return wrap(fmt.Errorf("script exists: %w", err))
	}
	for _, v := range ok {
		if !v {
			// Redis restarted (the script cache is not persisted): load
			// again, and write every queue's settings again on its next
			// call, since the data Redis came back with may be older.
			s.conf.forget("")
			return s.Load(ctx)
		}
	}
	return nil
}

// Client exposes the Redis client to the wake-up notifier (pub/sub only).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

func ms(d time.Duration) int64 { return d.Milliseconds() }

// callKey is the call log of one claim or settle call (lib.lua K_CALL),
// passed as KEYS[12]: it carries the queue's hash tag like every key.
func (s *Store) callKey(queue, call string) string {
	return s.opts.Prefix + ":{" + queue + "}:call:" + call
}

// params builds ARGV[1..ARG0] of lib.lua for script name: the per-call
// values it reads (lua.CallValues: a random value, the maintenance batch,
// the delivery lease of this daemon, its webhook timeout plus its margin),
// and no others, with room for extra more. The queue's rules are not among
// them: the scripts read the ones in Redis (conf.go).
func (s *Store) params(name string, q QueueParams, extra int) []any {
	vals := lua.CallValues(name)
	a := make([]any, 0, len(vals)+extra)
	for _, v := range vals {
		switch v {
		case lua.RandValue:
			a = append(a, strconv.FormatFloat(rand.Float64(), 'f', 8, 64))
		case lua.BatchValue:
			a = append(a, s.opts.MaintenanceBatch)
		case lua.LeaseValue:
			a = append(a, ms(q.Timeout+s.opts.LeaseMargin))
		}
	}
	return a
}

func (s *Store) run(ctx context.Context, name string, q QueueParams, args []any) (any, error) {
	return s.runKeys(ctx, name, q, s.Keys(q.Name).List(), args)
}

// runCall runs a claim or settle script with the call log of call as
// KEYS[12] and the queue's statistics as KEYS[13].
func (s *Store) runCall(ctx context.Context, name string, q QueueParams, call string, args []any) (any, error) {
	return s.runKeys(ctx, name, q, s.Keys(q.Name).List(s.callKey(q.Name, call), s.statsKey(q.Name)), args)
}

func (s *Store) runKeys(ctx context.Context, name string, q QueueParams, keys []string, args []any) (any, error) {
	var began time.Time
	if s.opts.OnScript != nil {
		began = time.Now()
	}
	res, acks, err := s.eval(ctx, name, q, keys, args)
	if isNoConf(err) {
		// Redis has no settings for the queue (lost, or never written by
		// this Store): write this Store's and run the call once more. The
		// script answered before writing anything.
		s.conf.forget(q.Name)
		res, acks, err = s.eval(ctx, name, q, keys, args)
	}
	var short error
	if err == nil && acks < 1 {
		short = s.notReplicated(name, q.Name, acks)
	}
	if s.opts.OnScript != nil {
		callErr := err
		if isNil(err) {
			callErr = nil // a script's empty answer, not a failure
		}
		if short != nil {
			callErr = short
		}
		s.opts.OnScript(name, time.Since(began), callErr)
	}
	if err != nil {
		moved := isMoved(err) // only from the replicated path's node pipeline
		err = fmt.Errorf("script %s on queue %s: %w", name, q.Name, err)
		if moved {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, wrap(err)
	}
	if short != nil {
		return nil, short
	}
	return res, nil
}

// eval runs one script call, with the queue's settings written first when
// the script reads them and this Store has not written them as they are.
func (s *Store) eval(ctx context.Context, name string, q QueueParams, keys []string, args []any) (res any, acks int64, err error) {
	if confScripts[name] {
		if err := s.ensureConf(ctx, q); err != nil {
			return nil, 0, err
		}
	}
	if s.opts.Replicated && replicatedScripts[name] {
		return s.evalReplicated(ctx, name, q.Name, keys, args)
	}
	res, err = s.sc.run(ctx, s.rdb, name, keys, args).Result()
	return res, 1, err
}

// unavailablePrefixes start the errors of a Redis that cannot serve now but
// will: loading its data, a cluster slot in flux, a replica or a master
// that is down (MASTERDOWN), a queue's settings missing even after this
// Store wrote them (NOCONF: a replica answering, or a removal racing the
// call). A retry can help, so they are ErrUnavailable.
var unavailablePrefixes = []string{"LOADING", "CLUSTER", "TRYAGAIN", "READONLY", "MASTERD", "NOCONF"}

// wrap marks connection-level failures with ErrUnavailable; errors Redis itself
// returned (a script error) stay plain, since retrying them cannot help.
func wrap(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, redis.ErrClosed) {
		for _, p := range unavailablePrefixes {
			if redis.HasErrorPrefix(err, p) {
				return fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
		}
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func (s *Store) token() string {
	return s.node + "." + strconv.FormatUint(s.seq.Add(1), 36)
}

// toStr reads a reply value as a string: a Lua number answers as an
// integer. Anything else is "", which the word checks (words.go) refuse.
func toStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// statsKey is the queue's statistics hash (lib.lua stats_flush), passed
// after the queue keys to the scripts that count: it carries the queue's
// hash tag like every key.
func (s *Store) statsKey(queue string) string {
	return s.opts.Prefix + ":{" + queue + "}:stats"
}

// holdScope is flowKeys.holdScope as lib.lua reads it: a queue built in
// code without one (tests, the demo) holds lanes, as the default does.
func holdScope(s string) string {
	if s == "" {
		return "key"
	}
	return s
}
