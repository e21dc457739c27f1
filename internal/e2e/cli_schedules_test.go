package test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// simpleqd schedule create|list|get|pause|resume|delete against a daemon,
// with the exit codes of a bad line (2) and an unknown schedule (3).
func TestCLISchedules(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info",
		YAML: "auth:\n  apiKeys: [sk_cli_test]\n" + QueueYAML("reports", hook.URL)})
	env := []string{"SIMPLEQ_URL=" + d.URL, "SIMPLEQ_API_KEY=sk_cli_test"}
	cli := func(args ...string) cliResult {
		t.Helper()
		return runBinary(t, env, args...)
	}

	r := cli("schedule", "create", "reports", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Paris",
		"--payload", `{"b":1,"a":12345678901234567890}`, "--id", "weekday", "--priority", "2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "created schedule weekday on reports: next run ")
	r = cli("schedule", "create", "reports", "--cron", "0 9 * * 1-5", "--id", "weekday")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "replaced schedule weekday")
	r = cli("schedule", "create", "reports", "--cron", "@every 1s", "--payload", `{"tick":true}`, "--id", "tick", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"payload":{"tick":true}`)

	r = cli("schedule", "list", "reports")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "NEXT RUN")
	require.Contains(t, r.stdout, "weekday")
	require.Contains(t, r.stdout, "tick")
	r = cli("schedule", "get", "weekday", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"timezone":"UTC"`, "the replacement set the default zone")

	require.Eventually(t, func() bool { return hook.Count() >= 1 }, 10*time.Second, 20*time.Millisecond)
	r = cli("schedule", "get", "tick")
	require.Equal(t, 0, r.code)
	require.Regexp(t, `tick\s+reports\s+@every 1s\s+UTC\s+running\s+\S+\s+\S+Z\s+job_`, r.stdout)

	r = cli("schedule", "pause", "tick")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "paused schedule tick: now paused")
	r = cli("schedule", "resume", "tick")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "resumed schedule tick: now running, next run ")
	r = cli("schedule", "delete", "tick")
	require.Equal(t, 0, r.code, r.stderr)

	// Exit codes: 3 for an unknown schedule, 2 for a bad line, 1 for a 400.
	r = cli("schedule", "get", "tick")
	require.Equal(t, 3, r.code, r.stdout+r.stderr)
	r = cli("schedule", "frobnicate", "x")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "unknown action")
	r = cli("schedule", "create", "reports")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--cron")
	r = cli("schedule", "get", "weekday", "--cron", "x")
	require.Equal(t, 2, r.code)
	r = cli("schedule", "create", "reports", "--cron", "61 * * * *")
	require.Equal(t, 1, r.code)
	require.True(t, strings.Contains(r.stderr, "cron"), r.stderr)
}
