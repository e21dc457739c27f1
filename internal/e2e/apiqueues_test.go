package test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Queues over the API (runtime.md §1) on a fleet of two real daemons and a
// real redis-server, all on loopback.

// apiSecret is the signing secret of the API queues here; no answer and no
// log line may ever contain it.
const apiSecret = "whsec_api_queue_secret_never_shown_9f3c"

// apiFleetYAML: webhooks on loopback are allowed (the test's webhook is on
// 127.0.0.1), one file queue, and quick defaults.
func apiFleetYAML(webhook string) string {
	return "webhooks:\n  allowPrivateNetworks: true\ndefaults:\n  timeout: 2s\n  backoff: {type: fixed, base: 100ms}\n" +
		QueueYAML("filed", webhook)
}

// recorder keeps every answer body, so the test can look for the secret.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) do(d *Daemon, method, path string, body any) Response {
	d.t.Helper()
	resp := d.Do(method, path, body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(resp.Body))
	r.mu.Unlock()
	return resp
}

func TestAPIQueuesAcrossTheFleet(t *testing.T) {
	t.Parallel()
	rd := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	yaml := apiFleetYAML(hook.URL)
	a := StartDaemon(t, DaemonConfig{RedisAddr: rd.Addr, YAML: yaml})
	b := StartDaemon(t, DaemonConfig{RedisAddr: rd.Addr, YAML: yaml})
	rec := &recorder{}

	// Created on a: 201, with source api and a hint of the secret only.
	spec := map[string]any{"webhookUrl": hook.URL, "signingSecret": apiSecret, "concurrency": 3, "rateLimitWindow": 0.5}
	r := rec.do(a, "PUT", "/v1/queues/cust-1", spec)
	require.Equal(t, 201, r.Status, string(r.Body))
	q := r.JSON(t)
	require.Equal(t, "api", q["source"])
	require.Equal(t, "9f3c", q["signingSecretHint"])
	require.EqualValues(t, 3, q["concurrency"])
	require.EqualValues(t, 0.5, q["rateLimitWindow"])
	require.EqualValues(t, 5, q["maxAttempts"], "unset settings come from the defaults")

	// Seen by b within 1 s, without a reload.
	created := time.Now()
	require.Eventually(t, func() bool { return rec.do(b, "GET", "/v1/queues/cust-1", nil).Status == 200 },
		time.Second, 10*time.Millisecond, "b never saw the queue a created")
	t.Logf("b saw the new queue after %s", time.Since(created))
	names := func(d *Daemon) []string {
		var out []string
		for _, q := range rec.do(d, "GET", "/v1/queues", nil).JSON(t)["queues"].([]any) {
			out = append(out, fmt.Sprintf("%s:%s", q.(map[string]any)["name"], q.(map[string]any)["source"]))
		}
		return out
	}
	require.Equal(t, []string{"cust-1:api", "filed:file"}, names(b))

	// Published through b, delivered and signed with the API queue's secret.
	id := b.Publish("cust-1", map[string]any{"n": 1})
	a.WaitStatus(id, "completed", 5*time.Second)
	dl := hook.Deliveries()[0]
	mac := hmac.New(sha256.New, []byte(apiSecret))
	mac.Write(dl.Body)
	require.Equal(t, "sha256="+hex.EncodeToString(mac.Sum(nil)), dl.Header.Get("X-Simpleq-Signature"))

	// PUT again replaces: 200.
	r = rec.do(b, "PUT", "/v1/queues/cust-1", spec)
	require.Equal(t, 200, r.Status, string(r.Body))

	// PATCH changes only what it is given, and a reaches b within 1 s.
	r = rec.do(b, "PATCH", "/v1/queues/cust-1", map[string]any{"concurrency": 7, "rateLimitMax": 20})
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EqualValues(t, 7, r.JSON(t)["concurrency"])
	require.EqualValues(t, 0.5, r.JSON(t)["rateLimitWindow"], "a setting not in the patch stays")
	require.Eventually(t, func() bool {
		q := rec.do(a, "GET", "/v1/queues/cust-1", nil).JSON(t)
		return q["concurrency"] == float64(7) && q["rateLimitMax"] == float64(20)
	}, time.Second, 10*time.Millisecond, "a never saw the patch")
	// null puts a setting back to the file's default.
	r = rec.do(a, "PATCH", "/v1/queues/cust-1", map[string]any{"rateLimitMax": nil})
	require.Equal(t, 200, r.Status, string(r.Body))
	require.EqualValues(t, 0, r.JSON(t)["rateLimitMax"])

	// The file's queue is the file's.
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		r = rec.do(a, m, "/v1/queues/filed", spec)
		require.Equal(t, 409, r.Status, m)
		require.JSONEq(t, `{"error":"Queue 'filed' is managed by the config file"}`, string(r.Body), m)
	}
	// PATCH and DELETE of a queue nobody created: 404.
	require.Equal(t, 404, rec.do(a, "PATCH", "/v1/queues/nobody", map[string]any{"concurrency": 1}).Status)
	require.Equal(t, 404, rec.do(a, "DELETE", "/v1/queues/nobody", nil).Status)

	// Validation is the file's, every bad setting named.
	r = rec.do(a, "PUT", "/v1/queues/cust-2", map[string]any{"webhookUrl": "ftp://x", "concurrency": 0,
		"mode": "fast", "backoff": map[string]any{"type": "fixed", "base": -1}, "concurency": 2})
	require.Equal(t, 400, r.Status)
	require.JSONEq(t, `{"error":{"formErrors":[],"fieldErrors":{
		"backoff.base":["must be > 0 (got -1s)"],
		"concurency":["unknown key (did you mean \"concurrency\"?)"],
		"concurrency":["must be ≥ 1 (got 0)"],
		"mode":["must be \"standard\" or \"ack\" (got \"fast\")"],
		"signingSecret":["required (or signingSecrets listing several to rotate)"],
		"webhookUrl":["must be an absolute http:// or https:// URL (got \"ftp://x\")"]}}}`, string(r.Body))
	require.Equal(t, 404, rec.do(b, "GET", "/v1/queues/cust-2", nil).Status, "nothing stored")

	// Delete: refused while a job waits; purge removes the job, then the queue.
	require.Equal(t, 200, rec.do(a, "POST", "/v1/queues/cust-1/pause", map[string]any{}).Status)
	waiting := a.Publish("cust-1", map[string]any{"n": 2})
	r = rec.do(b, "DELETE", "/v1/queues/cust-1", nil)
	require.Equal(t, 409, r.Status, string(r.Body))
	require.Contains(t, string(r.Body), "1 jobs that are not terminal")
	require.Equal(t, 200, rec.do(a, "GET", "/v1/jobs/"+waiting, nil).Status, "a refused delete changes nothing")
	r = rec.do(b, "DELETE", "/v1/queues/cust-1?purge=true", nil)
	require.Equal(t, 204, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return rec.do(a, "GET", "/v1/queues/cust-1", nil).Status == 404 },
		time.Second, 10*time.Millisecond, "a still serves the deleted queue")
	require.Equal(t, 404, rec.do(b, "GET", "/v1/queues/cust-1", nil).Status)
	require.Equal(t, 404, rec.do(a, "GET", "/v1/jobs/"+waiting, nil).Status)
	require.Equal(t, []string{"filed:file"}, names(a))
	// Nothing of the queue stays but claim and settle call logs, which
	// expire by themselves within seconds (lib.lua K_CALL).
	rc := rd.Client(t)
	for _, k := range rc.Keys(t.Context(), "simpleq:{cust-1}:*").Val() {
		require.Contains(t, k, ":call:", "the purge left %s", k)
		require.Greater(t, rc.TTL(t.Context(), k).Val(), time.Duration(0), "%s does not expire", k)
	}

	// Created again after the purge, empty; delete without jobs: 204.
	require.Equal(t, 201, rec.do(a, "PUT", "/v1/queues/cust-1", spec).Status)
	require.EqualValues(t, 0, rec.do(a, "GET", "/v1/queues/cust-1", nil).JSON(t)["counts"].(map[string]any)["pending"])
	require.Equal(t, 204, rec.do(a, "DELETE", "/v1/queues/cust-1", nil).Status)

	// The secret was never in an answer or a log line.
	for _, body := range rec.bodies {
		require.NotContains(t, body, apiSecret)
	}
	for _, d := range []*Daemon{a, b} {
		log := d.Log()
		require.NotContains(t, log, apiSecret)
		require.NotContains(t, log, strings.TrimPrefix(apiSecret, "whsec_"))
	}
	require.Contains(t, a.Log(), `"msg":"queue created over the API","queue":"cust-1"`)
}

// TestAPIQueueLimitConvergesAtOnce: a lowered concurrency holds fleet-wide
// from the write on, whatever copy of the queue each daemon holds: the
// limit lives in Redis, where every claim reads it.
func TestAPIQueueLimitConvergesAtOnce(t *testing.T) {
	t.Parallel()
	rd := Redis(t)
	release := make(chan struct{})
	var once sync.Once
	hook := NewWebhook(t, func(Delivery) Reply {
		<-release
		return Reply{Status: 200}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	yaml := apiFleetYAML(hook.URL)
	a := StartDaemon(t, DaemonConfig{RedisAddr: rd.Addr, YAML: yaml})
	b := StartDaemon(t, DaemonConfig{RedisAddr: rd.Addr, YAML: yaml})
	r := a.Do("PUT", "/v1/queues/lim", map[string]any{"webhookUrl": hook.URL, "signingSecret": apiSecret, "concurrency": 6})
	require.Equal(t, 201, r.Status, string(r.Body))
	require.Eventually(t, func() bool { return b.Do("GET", "/v1/queues/lim", nil).Status == 200 }, time.Second, 10*time.Millisecond)
	var ids []string
	for i := range 20 {
		ids = append(ids, []*Daemon{a, b}[i%2].Publish("lim", map[string]any{"i": i}))
	}
	require.Eventually(t, func() bool { return hook.MaxInflight() == 6 }, 5*time.Second, 10*time.Millisecond)
	r = b.Do("PATCH", "/v1/queues/lim", map[string]any{"concurrency": 2})
	require.Equal(t, 200, r.Status, string(r.Body))
	// The six in flight finish; from then on never more than two at once.
	once.Do(func() { close(release) })
	for _, id := range ids {
		a.WaitStatus(id, "completed", 20*time.Second)
	}
	after := hook.Deliveries()[6:]
	// Deliveries that started after the first six ended: at most 2 at once.
	firstEnd := hook.Deliveries()[0].End
	for _, dl := range hook.Deliveries()[:6] {
		if dl.End.After(firstEnd) {
			firstEnd = dl.End
		}
	}
	for _, dl := range after {
		if dl.Start.After(firstEnd) {
			require.LessOrEqual(t, dl.Inflight, 2, "a delivery started under the lowered limit with %d in flight", dl.Inflight)
		}
	}
}
