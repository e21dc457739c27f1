package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Replicated durability (production.md §1, redis.durability: replicated).
//
// Redis replicates asynchronously: a master that acknowledged a script can
// die before its replica received it, and Sentinel then promotes a replica
// that never saw the write. A publish answered 201 would be gone. With
// Options.ReplicaTimeout above zero, every script whose effect a client is
// told about (publish, ack/nack/defer callbacks, replay, pause and resume)
// or that records a delivery's outcome (settle) is followed by WAIT 1
// <ReplicaTimeout> before its answer is used; fewer than one confirming
// replica is ErrNotReplicated, which the API answers with 503 and
// Retry-After, so the client retries (an idempotencyKey makes that safe).
//
// WAIT counts replicas that have acknowledged this connection's last write,
// so it must follow the script on the same connection: a go-redis Pipeline
// on one *redis.Client is one connection, in order. It must not be inside
// MULTI (a TxPipeline): Redis answers WAIT in a transaction at once with the
// replicas that already confirmed, without waiting. On Redis Cluster a
// Pipeline sends a keyless command such as WAIT to some other node, so the
// pipeline runs on the master that owns the queue's slot (MasterForKey).
//
// A script that wrote nothing (an idempotent repeat of a publish, a repeated
// ack, a settle answered from its call log) reports state that another
// connection or daemon wrote, perhaps not yet replicated. WAIT covers it all
// the same: Redis sets a connection's write offset to the master's current
// offset after every command it runs, reads included, so WAIT after the
// script waits for every write made before the script, by anyone.
//
// Claims do not wait: a claim lost in a failover leaves its jobs waiting on
// the new master, so they are claimed and delivered again (a repeat, never a
// loss), and housekeeping a claim did is redone by the next claim. Settles do
// wait, because they also claim and because an outcome lost in a failover
// makes a finished job run again; a settle that cannot confirm is retried by
// the dispatcher under the same call name (see NewCall), not applied twice.

// replicatedScripts are the scripts followed by WAIT under replicated
// durability; the others (claim, inspect) are not.
var replicatedScripts = map[string]bool{
	lua.Publish: true, lua.Settle: true, lua.Callback: true, lua.Control: true, lua.Replay: true,
}

// evalReplicated runs a script and then WAIT 1 <ReplicaTimeout> on one
// connection of the master that owns keys[0]. acks is how many replicas
// confirmed; err is the script's error or the connection's, unwrapped
// (runKeys wraps it).
func (s *Store) evalReplicated(ctx context.Context, name, queue string, keys []string, args []any) (res any, acks int64, err error) {
	c := s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, 0, fmt.Errorf("find the master of queue %s: %w", queue, err)
		}
		c = node
	}
	res, acks, err = s.pipeWait(ctx, c, name, keys, args, false)
	if missing(err) {
		// This master has not loaded the script (a promoted replica:
		// Redis 7 does not replicate SCRIPT LOAD) or the library: send
		// the script's source, or load the library, as scripts.run does.
		res, acks, err = s.pipeWait(ctx, c, name, keys, args, true)
	}
	if err != nil && isMoved(err) {
		if cc, ok := s.rdb.(*redis.ClusterClient); ok {
			// The slot moved (a failover or resharding): let the cluster
			// client learn the new layout before the caller retries.
			cc.ReloadState(ctx)
		}
	}
	return res, acks, err
}

func (s *Store) pipeWait(ctx context.Context, c redis.UniversalClient, name string, keys []string, args []any, source bool) (any, int64, error) {
	pipe := c.Pipeline()
	var run *redis.Cmd
	if source {
		var err error
		if run, err = s.sc.queueSource(ctx, c, pipe, name, keys, args); err != nil {
			return nil, 0, err
		}
	} else {
		run = s.sc.queue(ctx, pipe, name, keys, args)
	}
	// Pipeliner has no Wait method; the pipeline read timeout (the
	// client's ReadTimeout) must exceed ReplicaTimeout, which config checks.
	wait := pipe.Do(ctx, "wait", 1, s.opts.ReplicaTimeout.Milliseconds())
	_, _ = pipe.Exec(ctx)
	res, err := run.Result()
	if err != nil {
		return nil, 0, err
	}
	acks, err := wait.Int64()
	if err != nil {
		// Whatever Redis said, the write is not confirmed, and retrying
		// can help: on a node demoted to replica mid-failover a script
		// that wrote nothing succeeds and WAIT is refused ("WAIT cannot
		// be used with replica instances"), which must be a 503, not a 500.
		return nil, 0, fmt.Errorf("%w: wait for a replica: %w", ErrUnavailable, err)
	}
	return res, acks, nil
}

// isMoved reports a Redis Cluster redirection: the node no longer serves the
// slot.
func isMoved(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED ") || redis.HasErrorPrefix(err, "ASK ")
}

// notReplicated is the error of a write that no replica confirmed in time.
func (s *Store) notReplicated(name, queue string, acks int64) error {
	return fmt.Errorf("%w: script %s on queue %s: %d of 1 replicas within %s",
		ErrNotReplicated, name, queue, acks, s.opts.ReplicaTimeout)
}

// DefaultReplicaTimeout is the WAIT timeout of replicated durability when
// Options.ReplicaTimeout is 0: on a healthy link a replica confirms within
// a millisecond or two, so a second only runs out when no replica is
// connected or one is far behind, and it leaves the API room to answer 503
// well within its own 4 s bound.
const DefaultReplicaTimeout = time.Second
