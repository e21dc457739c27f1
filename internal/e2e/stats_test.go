package test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatsSameOnEveryDaemon: two daemons deliver one queue's jobs (one
// answered 429); its statistics are counted in Redis by the scripts, so
// both daemons answer GET .../stats with the same counts, and the job lists
// are the same through either.
func TestStatsSameOnEveryDaemon(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var mu sync.Mutex
	limited := false
	hook := NewWebhook(t, func(Delivery) Reply {
		mu.Lock()
		defer mu.Unlock()
		if !limited {
			limited = true
			return Reply{Status: 429, RetryAfter: "0.3"}
		}
		return Reply{Status: 200}
	})
	yaml := QueueYAML("fleet", hook.URL, "concurrency: 4")
	a := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml})
	b := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml})
	var ids []string
	for i := 0; i < 20; i++ {
		d := a
		if i%2 == 1 {
			d = b
		}
		ids = append(ids, d.Publish("fleet", map[string]any{"n": i}))
	}
	for _, id := range ids {
		a.WaitStatus(id, "completed", 15*time.Second)
	}

	until := time.Now().UTC().Add(time.Minute).Format(time.RFC3339)
	since := time.Now().UTC().Add(-5 * time.Minute).Format(time.RFC3339)
	path := fmt.Sprintf("/v1/queues/fleet/stats?since=%s&until=%s", since, until)
	read := func(d *Daemon) map[string]any {
		r := d.Do("GET", path, nil)
		require.Equal(t, 200, r.Status, string(r.Body))
		var v map[string]any
		require.NoError(t, json.Unmarshal(r.Body, &v))
		delete(v, "now") // Redis' clock at the moment of each read
		return v
	}
	fromA, fromB := read(a), read(b)
	require.Equal(t, fromA, fromB, "both daemons answer the same statistics")
	totals := fromA["totals"].(map[string]any)
	deliveries := totals["deliveries"].(map[string]any)
	require.EqualValues(t, 20, deliveries["success"])
	require.EqualValues(t, 1, deliveries["deferred"])
	require.EqualValues(t, 1, totals["http429"])
	require.EqualValues(t, 21, totals["started"], "20 jobs, one delivered twice")
	require.EqualValues(t, 1, totals["probes"])
	require.EqualValues(t, 1, totals["holds"])
	require.Len(t, fromA["holds"], 1)
	require.Len(t, fromA["buckets"], 6)

	la := a.Do("GET", "/v1/queues/fleet/jobs?status=completed&limit=1000", nil)
	lb := b.Do("GET", "/v1/queues/fleet/jobs?status=completed&limit=1000", nil)
	require.Equal(t, 200, la.Status, string(la.Body))
	require.JSONEq(t, string(la.Body), string(lb.Body))
	require.Len(t, la.JSON(t)["jobs"], 20)
}
