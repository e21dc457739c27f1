package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/lua"
)

// scripts sends package lua's scripts to Redis. Where Redis has Functions
// (7.0 and later, and an ACL that allows FUNCTION), they run as one library
// loaded once (lua.Library): a call then runs only its script's body, not
// the whole prelude's definitions (docs/performance.md, round 21). Elsewhere
// (an older Redis, miniredis, or Options.EvalScripts) each is a script sent
// with EVALSHA, as before. The scripts are loaded in both cases: their cache
// is the one that a Redis restart empties, which Ping watches for.
type scripts struct {
	evals  map[string]*redis.Script
	lib    string            // the library's name
	fns    map[string]string // script name -> function name
	libSrc string
	useFns atomic.Bool // the library is loaded: calls use FCALL
	noFns  bool        // Options.EvalScripts
}

func newScripts(evalOnly bool) (*scripts, error) {
	sc := &scripts{evals: make(map[string]*redis.Script, len(lua.All)), noFns: evalOnly}
	for _, name := range lua.All {
		src, err := lua.Source(name)
		if err != nil {
			return nil, err
		}
		sc.evals[name] = redis.NewScript(src)
	}
	lib, fns, src, err := lua.Library()
	if err != nil {
		return nil, err
	}
	sc.lib, sc.fns, sc.libSrc = lib, fns, src
	return sc, nil
}

// load loads every script, and the library unless Redis refuses Functions
// (then calls use EVALSHA).
func (sc *scripts) load(ctx context.Context, rdb redis.UniversalClient) error {
	for name, e := range sc.evals {
		if err := e.Load(ctx, rdb).Err(); err != nil {
			return wrap(fmt.Errorf("load script %s: %w", name, err))
		}
	}
	if sc.noFns {
		return nil
	}
	err := sc.loadLibrary(ctx, rdb)
	switch {
	case err == nil:
		sc.useFns.Store(true)
	case noFunctions(err), redis.HasErrorPrefix(err, "READONLY"):
		// An older Redis, one that does not let us load functions, or a
		// replica (a master demoted mid-failover, where no write can run
		// anyway): the scripts serve alone, until the next Load.
		sc.useFns.Store(false)
	default:
		return wrap(fmt.Errorf("load function library %s: %w", sc.lib, err))
	}
	return nil
}

// loadLibrary loads the library on one Redis, or on every master of a
// cluster; a library of that name already there is this one (the name
// carries the source's hash).
func (sc *scripts) loadLibrary(ctx context.Context, c redis.UniversalClient) error {
	one := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, sc.libSrc).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return one(ctx, m) })
	}
	return one(ctx, c)
}

// noFunctions reports a Redis that cannot or will not load functions: it
// has no FUNCTION command (before 7.0, miniredis) or the ACL forbids it.
func noFunctions(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	return redis.HasErrorPrefix(err, "NOPERM") || strings.HasPrefix(err.Error(), "ERR unknown command") ||
		strings.HasPrefix(err.Error(), "ERR unknown subcommand")
}

// missing reports a call that found its script or function not loaded: a
// Redis that restarted without persistence, a promoted replica (Redis 7
// does not replicate SCRIPT LOAD), FUNCTION FLUSH.
func missing(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "NOSCRIPT") || strings.HasPrefix(err.Error(), "ERR Function not found"))
}

// run calls script name on rdb and waits for its reply, loading the
// script or the library once when rdb has lost it.
func (sc *scripts) run(ctx context.Context, rdb redis.UniversalClient, name string, keys []string, args []any) *redis.Cmd {
	if !sc.useFns.Load() {
		return sc.evals[name].Run(ctx, rdb, keys, args...)
	}
	cmd := rdb.FCall(ctx, sc.fns[name], keys, args...)
	if missing(cmd.Err()) {
		if err := sc.loadLibrary(ctx, rdb); err != nil {
			return cmd
		}
		cmd = rdb.FCall(ctx, sc.fns[name], keys, args...)
	}
	return cmd
}

// queue adds a call of script name to pipe; a reply that is missing (the
// caller's test) calls for sendSource or run.
func (sc *scripts) queue(ctx context.Context, pipe redis.Pipeliner, name string, keys []string, args []any) *redis.Cmd {
	if sc.useFns.Load() {
		return pipe.FCall(ctx, sc.fns[name], keys, args...)
	}
	return sc.evals[name].EvalSha(ctx, pipe, keys, args...)
}

// queueSource adds to pipe a call of script name that does not depend on
// what c has loaded: the script's source (EVAL), or the library loaded
// first and then the function (FCALL).
func (sc *scripts) queueSource(ctx context.Context, c redis.UniversalClient, pipe redis.Pipeliner, name string, keys []string, args []any) (*redis.Cmd, error) {
	if sc.useFns.Load() {
		if err := sc.loadLibrary(ctx, c); err != nil {
			return nil, fmt.Errorf("load function library %s: %w", sc.lib, err)
		}
		return pipe.FCall(ctx, sc.fns[name], keys, args...), nil
	}
	return sc.evals[name].Eval(ctx, pipe, keys, args...), nil
}

// hashes are the scripts' SHA1s, for SCRIPT EXISTS.
func (sc *scripts) hashes() []string {
	out := make([]string, 0, len(sc.evals))
	for _, e := range sc.evals {
		out = append(out, e.Hash())
	}
	return out
}
