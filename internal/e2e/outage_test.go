package test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A daemon survives Redis going away and coming back: while Redis is away,
// /readyz and the API answer 503 with Retry-After quickly (never 2xx, never a
// hang); when it returns, the daemon reloads its scripts and resumes.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	rs := Redis(t, "--appendonly", "yes", "--appendfsync", "always")
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("o", hook.URL)})
	before := d.Publish("o", map[string]any{"n": 1})
	d.WaitStatus(before, "completed", 10*time.Second)

	goroutinesBefore := goroutines(t, d)
	rs.Kill()
	require.Eventually(t, func() bool { return d.Do("GET", "/readyz", nil).Status == 503 }, 10*time.Second, 50*time.Millisecond)
	for i := 0; i < 3; i++ {
		start := time.Now()
		r := d.Do("POST", "/v1/queues/o/jobs", map[string]any{"payload": map[string]any{"n": 2}})
		require.Equal(t, 503, r.Status, string(r.Body))
		require.NotEmpty(t, r.Header.Get("Retry-After"))
		require.Less(t, time.Since(start), 8*time.Second, "the API answers, it does not hang")
	}
	require.False(t, d.Exited(), "the daemon survives")

	rs.Restart(t)
	require.Eventually(t, func() bool { return d.Do("GET", "/readyz", nil).Status == 200 }, 20*time.Second, 50*time.Millisecond)
	after := d.Publish("o", map[string]any{"n": 3})
	d.WaitStatus(after, "completed", 20*time.Second)
	// No goroutine growth: reconnect loops do not pile up.
	require.Eventually(t, func() bool { return goroutines(t, d) <= goroutinesBefore+10 }, 10*time.Second, 100*time.Millisecond,
		"goroutines before the outage %d", goroutinesBefore)
	// The job published before the outage survived it (AOF).
	require.Equal(t, "completed", d.Job(before)["status"])
	require.False(t, strings.Contains(d.Log(), "panic"), "no panic in the log")
}

// goroutines scrapes the daemon's go_goroutines gauge from /metrics.
func goroutines(t *testing.T, d *Daemon) int {
	t.Helper()
	r := d.Do("GET", "/metrics", nil)
	require.Equal(t, 200, r.Status)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(line, "go_goroutines ") {
			n, err := strconv.Atoi(strings.TrimPrefix(line, "go_goroutines "))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no go_goroutines in /metrics")
	return 0
}
