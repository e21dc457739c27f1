package test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIQueueWrites: simpleqd queue create|set|delete against a real
// daemon, with the exit codes of every other command.
func TestCLIQueueWrites(t *testing.T) {
	t.Parallel()
	rd := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rd.Addr, YAML: apiFleetYAML(hook.URL)})
	env := []string{"SIMPLEQ_URL=" + d.URL, "SIMPLEQ_SIGNING_SECRET=" + apiSecret}

	r := runBinary(t, env, "queue", "create", "cli-1", "--webhook-url", hook.URL, "--concurrency", "3", "--set", "backoff.max=60", "--set", "rateLimitWindow=1m")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "created queue cli-1 (concurrency 3, signing secret …9f3c)\n", r.stdout)
	q := d.Queue("cli-1")
	require.Equal(t, "api", q["source"])
	require.EqualValues(t, 60, q["rateLimitWindow"])

	r = runBinary(t, []string{"SIMPLEQ_URL=" + d.URL}, "queue", "set", "cli-1", "--rate-limit-max", "10", "--set", "rateLimitWindow=null")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "changed queue cli-1 (concurrency 3, signing secret …9f3c)\n", r.stdout)
	q = d.Queue("cli-1")
	require.EqualValues(t, 10, q["rateLimitMax"])
	require.EqualValues(t, 1, q["rateLimitWindow"], "null: back to the default")

	// A bad setting: exit 1, the file's message on stderr.
	r = runBinary(t, env, "queue", "set", "cli-1", "--concurrency", "0")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "concurrency: must be ≥ 1 (got 0)")
	// Usage errors: exit 2, nothing sent.
	r = runBinary(t, env, "queue", "set", "cli-1")
	require.Equal(t, 2, r.code, r.stderr)
	r = runBinary(t, env, "queue", "delete", "cli-1", "--concurrency", "2")
	require.Equal(t, 2, r.code, r.stderr)
	// The file's queue: exit 1 with the 409's message; unknown: exit 3.
	r = runBinary(t, env, "queue", "delete", "filed")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "Queue 'filed' is managed by the config file")
	r = runBinary(t, env, "queue", "delete", "nobody")
	require.Equal(t, 3, r.code, r.stderr)

	// Show still works, and a job makes delete need --purge.
	r = runBinary(t, env, "queue", "cli-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "cli-1")
	require.Equal(t, 0, runBinary(t, env, "pause", "cli-1").code)
	d.Publish("cli-1", map[string]any{})
	r = runBinary(t, env, "queue", "delete", "cli-1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "?purge=true")
	r = runBinary(t, env, "queue", "delete", "cli-1", "--purge")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "deleted queue cli-1\n", r.stdout)
	require.NotContains(t, r.stdout+r.stderr, apiSecret)
	require.NotContains(t, d.Log(), apiSecret)
}
