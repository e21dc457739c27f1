package config

import "time"

// The values of redis.durability (production.md §1).
const (
	// DurabilityLocal acknowledges a write once the master has it. Redis
	// replicates asynchronously, so a master that dies right after
	// answering can take the last writes with it when a replica is
	// promoted in its place (docs/reliability.md says how many, measured).
	DurabilityLocal = "local"
	// DurabilityReplicated acknowledges a write, and counts a delivery's
	// outcome as recorded, only once at least one replica has it too
	// (WAIT 1); if none confirms within redis.replicaTimeout the API
	// answers 503 with Retry-After, and the client retries.
	DurabilityReplicated = "replicated"
)

// DefaultReplicaTimeout is redis.replicaTimeout's default. A replica on a
// healthy link confirms within a millisecond or two, so the timeout only
// runs out when none is connected or one is far behind; a second leaves
// room in the API's 4 s bound for the 503 to go out.
const DefaultReplicaTimeout = time.Second

// MaxReplicaTimeout bounds redis.replicaTimeout: the wait is one Redis
// command and must end within the daemon's 3 s Redis read timeout (and a
// publish within the API's 4 s bound), or a missing replica would look
// like a dead Redis.
const MaxReplicaTimeout = 2 * time.Second

// Replicated reports whether writes wait for a replica.
func (r Redis) Replicated() bool { return r.Durability == DurabilityReplicated }

// validateDurability checks redis.durability and redis.replicaTimeout.
func (l *loader) validateDurability(r *Redis) {
	switch r.Durability {
	case DurabilityLocal:
	case DurabilityReplicated:
		if r.Embedded() {
			l.problemf("redis.durability", "replicated needs a Redis with a replica (redis.url, addr, addrs or sentinel); the embedded store has none, so every write would fail")
		}
	default:
		l.problemf("redis.durability", "must be %s or %s (got %q)", DurabilityLocal, DurabilityReplicated, r.Durability)
	}
	if r.ReplicaTimeout < time.Millisecond || r.ReplicaTimeout > MaxReplicaTimeout {
		l.problemf("redis.replicaTimeout", "must be between 1ms and %s (got %s)", MaxReplicaTimeout, r.ReplicaTimeout)
	}
}
