package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// redis.durability defaults to local with a 1 s replica timeout; replicated
// is read from the file or the environment, and Redacted shows both keys so
// its output loads again with the same meaning.
func TestDurability(t *testing.T) {
	t.Parallel()
	c, err := load(t, `redis: {addr: "127.0.0.1:6379"}`, nil)
	require.NoError(t, err)
	require.Equal(t, DurabilityLocal, c.Redis.Durability)
	require.False(t, c.Redis.Replicated())
	require.Equal(t, time.Second, c.Redis.ReplicaTimeout)
	require.Contains(t, c.Redacted(), "durability: local")

	c, err = load(t, `redis: {addr: "127.0.0.1:6379", durability: replicated, replicaTimeout: 250ms}`, nil)
	require.NoError(t, err)
	require.True(t, c.Redis.Replicated())
	require.Equal(t, 250*time.Millisecond, c.Redis.ReplicaTimeout)
	again, err := load(t, c.Redacted(), nil)
	require.NoError(t, err)
	require.Equal(t, c.Redis.Durability, again.Redis.Durability)
	require.Equal(t, c.Redis.ReplicaTimeout, again.Redis.ReplicaTimeout)

	c, err = load(t, `redis: {sentinel: {masterName: m, addrs: ["127.0.0.1:26379"]}}`,
		map[string]string{"SIMPLEQ_REDIS_DURABILITY": "replicated", "SIMPLEQ_REDIS_REPLICATIMEOUT": "0.5"})
	require.NoError(t, err)
	require.True(t, c.Redis.Replicated())
	require.Equal(t, 500*time.Millisecond, c.Redis.ReplicaTimeout)
}

// A misspelt mode, a timeout the Redis read timeout would cut short, and
// replicated on the embedded store (no replica, so every write would fail)
// are refused by key.
func TestDurabilityProblems(t *testing.T) {
	t.Parallel()
	got := problems(t, `redis: {addr: "127.0.0.1:6379", durability: replica}`, nil)
	requireProblem(t, got, "redis.durability", "local or replicated", `"replica"`)
	got = problems(t, `redis: {addr: "127.0.0.1:6379", replicaTimeout: 5s}`, nil)
	requireProblem(t, got, "redis.replicaTimeout", "between 1ms and 2s", "5s")
	got = problems(t, `redis: {addr: "127.0.0.1:6379", replicaTimeout: 0}`, nil)
	requireProblem(t, got, "redis.replicaTimeout", "between 1ms and 2s")
	got = problems(t, `redis: {durability: replicated}`, nil)
	requireProblem(t, got, "redis.durability", "embedded store has none")
}
