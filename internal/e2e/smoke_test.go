package test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSmoke: one daemon on real Redis delivers, retries and completes a job.
func TestSmoke(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	n := 0
	hook := NewWebhook(t, func(Delivery) Reply {
		n++
		if n == 1 {
			return Reply{Status: 500, Body: "boom"}
		}
		return Reply{Status: 200}
	})
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("emails", hook.URL,
		"backoff: {type: fixed, base: 50ms}")})
	id := d.Publish("emails", map[string]any{"to": "a@b.com"})
	job := d.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 2, job["attempts"])
	require.Len(t, job["history"], 2)
	require.Equal(t, 0, d.Stop(15*time.Second))
}
