package test

// End-to-end checks of the correctness review's timer findings and of the
// breaker (semantics.md §4, §4b), on real daemon processes and redis-server.

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitDeadOnTime waits for every id to be dead / lifetime_exceeded and
// checks each died within slack of its own expiresAt.
func waitDeadOnTime(t *testing.T, d *Daemon, ids []string, within, slack time.Duration) {
	t.Helper()
	for _, id := range ids {
		job := d.WaitStatus(id, "dead", within)
		require.Equal(t, "lifetime_exceeded", job["deadReason"], id)
		require.EqualValues(t, 0, job["attempts"], id)
		expires, died := bpTime(t, job["expiresAt"]), bpTime(t, job["completedAt"])
		bpNotBefore(t, died, expires, "%s died before its lifetime ended", id)
		require.Less(t, died.Sub(expires), slack, "%s died %s after its expiresAt", id, died.Sub(expires))
	}
}

// TestLifetimeEndsOnTimeWhileHeld is the scenario: a queue held by
// a defer of retryAfter 10 s, a job published afterwards under jobLifetime
// 3 s must be dead / lifetime_exceeded about a second after its expiresAt
// (it used to stay pending until the hold ended) — and so must hundreds of
// jobs at once (more than one housekeeping batch).
func TestLifetimeEndsOnTimeWhileHeld(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, func(bpCall) Reply { return Reply{Status: 429, RetryAfter: "10"} })
	d := bpStart(t, 1, rs.Addr, bpQ("heldlife", hook.URL, "concurrency: 1", "jobLifetime: 3s"))[0]
	holder := d.Publish("heldlife", map[string]any{"holder": true})
	require.Eventually(t, func() bool { return bpQueue(t, d, "heldlife").State == "held" }, 5*time.Second, 5*time.Millisecond, "the queue is held")
	d.WaitStatus(holder, "dead", 5*time.Second) // 10 s exceed its 3 s: dead, the queue held anyway

	one := d.Publish("heldlife", map[string]any{"n": 1})
	many := bpPublishBatch(t, d, "heldlife", 300)
	waitDeadOnTime(t, d, append([]string{one}, many...), 6*time.Second, 1500*time.Millisecond)
	require.Equal(t, "held", bpQueue(t, d, "heldlife").State, "still held: the lifetimes ended inside the hold")
	require.Len(t, hook.Started(), 1, "only the holder was ever delivered")
}

// TestLifetimeEndsOnTimeWhilePaused: the same while an operator pause holds
// the queue.
func TestLifetimeEndsOnTimeWhilePaused(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr, bpQ("pausedlife", hook.URL, "jobLifetime: 2s"))[0]
	r := d.Do("POST", "/v1/queues/pausedlife/pause", map[string]any{})
	require.Equal(t, 200, r.Status, string(r.Body))
	ids := bpPublishBatch(t, d, "pausedlife", 250)
	waitDeadOnTime(t, d, ids, 6*time.Second, 1500*time.Millisecond)
	require.Empty(t, hook.Started())
}

// TestBreakerHoldsAFailingWebhook: a webhook that answers 401 to everything
// (a signing secret copied wrong) trips the breaker after 3 failures: the
// queue holds, the backlog spends nothing, one probe goes out per holdFor;
// once the webhook is fixed the probe's success reopens the queue and the
// backlog is delivered with its attempts intact.
func TestBreakerHoldsAFailingWebhook(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	var broken atomic.Bool
	broken.Store(true)
	hook := bpNewHook(t, func(bpCall) Reply {
		if broken.Load() {
			return Reply{Status: 401, Body: "bad signature"}
		}
		return Reply{Status: 200}
	})
	d := bpStart(t, 1, rs.Addr, bpQ("brk", hook.URL, "concurrency: 1", "maxAttempts: 3",
		"backoff: {type: fixed, base: 50ms}", "breaker: {failures: 3, holdFor: 700ms}"))[0]
	ids := bpPublishBatch(t, d, "brk", 20)

	var v bpView
	require.Eventually(t, func() bool {
		v = bpQueue(t, d, "brk")
		return v.State == "held"
	}, 5*time.Second, 5*time.Millisecond, "the breaker holds the queue")
	require.True(t, strings.HasPrefix(v.Reason, "breaker: 3 consecutive failures; last: webhook responded 401"), v.Reason)
	// While held (and its probes fail), the backlog spends nothing: a few
	// deliveries per holdFor, not 20 jobs × 3 attempts within seconds.
	require.Never(t, func() bool { return len(hook.Started()) > 6 }, 1500*time.Millisecond, 10*time.Millisecond,
		"3 failures, then about one probe per holdFor")
	started := len(hook.Started())
	require.LessOrEqual(t, started, 6, "3 failures, then about one probe per holdFor")
	dead := 0
	for _, id := range ids {
		if d.Job(id)["status"] == "dead" {
			dead++
		}
	}
	require.LessOrEqual(t, dead, 2, "the breaker keeps the backlog from burning its attempts")

	metrics := d.Do("GET", "/metrics", nil)
	require.Contains(t, string(metrics.Body), `simpleqd_breaker_holds_total{queue="brk"}`)
	require.NotContains(t, string(metrics.Body), `simpleqd_breaker_holds_total{queue="brk"} 0`)
	events := d.Do("GET", "/v1/queues/brk/events", nil)
	require.Equal(t, 200, events.Status, string(events.Body))
	require.Contains(t, string(events.Body), `"breaker: webhook responded 401`)

	broken.Store(false) // the secret is fixed
	for _, id := range ids {
		job := d.Job(id)
		if job["status"] == "dead" {
			continue
		}
		job = d.WaitStatus(id, "completed", 10*time.Second)
		require.LessOrEqual(t, job["attempts"].(float64), float64(3))
	}
	require.Equal(t, "open", bpQueue(t, d, "brk").State, "the probe's success reopened the queue")
}
