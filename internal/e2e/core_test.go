package test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

// End-to-end tests of the core pipeline: publish → claim → deliver → record,
// against a real redis-server and a simpleqd process. Every test has its own
// Redis and daemon; durations are shortened so each runs in a few seconds.

// coreHMAC is the signature a webhook expects: sha256= + hex HMAC of the raw body.
func coreHMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// coreTime parses a wire timestamp (ISO-8601 UTC with milliseconds).
func coreTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "not a timestamp string: %#v", v)
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, s)
	ts, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return ts
}

// corePublishRaw publishes a raw JSON body and returns the decoded answer.
func corePublishRaw(t *testing.T, d *Daemon, queue, body string, wantStatus int, headers ...string) map[string]any {
	t.Helper()
	r := d.Do("POST", "/v1/queues/"+queue+"/jobs", body, headers...)
	require.Equal(t, wantStatus, r.Status, string(r.Body))
	return r.JSON(t)
}

// coreHistory returns a job's history entries.
func coreHistory(t *testing.T, job map[string]any) []map[string]any {
	t.Helper()
	raw, ok := job["history"].([]any)
	require.True(t, ok, "history is not an array: %#v", job["history"])
	out := make([]map[string]any, len(raw))
	for i, e := range raw {
		out[i] = e.(map[string]any)
	}
	return out
}

// coreByAttempt returns the deliveries of one job sorted by attempt header.
func coreByAttempt(ds []Delivery, id string) []Delivery {
	var out []Delivery
	for _, d := range ds {
		if d.JobID == id {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Attempt < out[j].Attempt })
	return out
}

// coreStartSignal returns a script wrapper that closes the returned channel
// when the first delivery reaches the webhook (before it answers).
func coreStartSignal(script func(Delivery) Reply) (func(Delivery) Reply, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(dl Delivery) Reply {
		once.Do(func() { close(ch) })
		return script(dl)
	}, ch
}

func coreWait(t *testing.T, ch <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestCoreDeliveryEnvelopeAndHeaders: the webhook receives the envelope byte
// for byte (payload exactly as published: key order, whitespace, escapes and
// an integer above 2^53), signed with the queue's secret (from the file or
// from an environment variable), with the documented headers.
func TestCoreDeliveryEnvelopeAndHeaders(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	envHook := NewWebhook(t, nil)
	yaml := fmt.Sprintf(`queues:
  core.env-1:
    webhookUrl: %s
    signingSecret: whsec_core_file
    maxAttempts: 3
  core_env2:
    webhookUrl: %s
    signingSecretEnv: CORE_TEST_SIGNING_SECRET
    maxAttempts: 7
`, hook.URL, envHook.URL)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml,
		Env: []string{"CORE_TEST_SIGNING_SECRET=whsec_core_from_env"}})

	// Exact bytes: inner whitespace and a newline, escapes, number spellings.
	payload := "{\"b\":1, \"a\":12345678901234567890,\n \"s\":\"\\u00e9\\/x\",\"n\":[1.50,-0,1E+2],\"o\":{}}"
	pub := corePublishRaw(t, d, "core.env-1", `{"payload": `+payload+` }`, 201)
	id := pub["id"].(string)
	createdAt := pub["createdAt"].(string)
	coreTime(t, createdAt)
	require.Equal(t, "pending", pub["status"])

	require.Eventually(t, func() bool { return hook.Count() == 1 }, 10*time.Second, 10*time.Millisecond)
	dl := hook.Deliveries()[0]
	want := `{"id":"` + id + `","queue":"core.env-1","payload":` + payload +
		`,"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"` + createdAt + `"}`
	require.Equal(t, want, string(dl.Body), "envelope must be byte for byte")

	// The big integer survives as written when decoded with UseNumber.
	dec := json.NewDecoder(bytes.NewReader(dl.Body))
	dec.UseNumber()
	var env map[string]any
	require.NoError(t, dec.Decode(&env))
	require.Equal(t, json.Number("12345678901234567890"), env["payload"].(map[string]any)["a"])

	h := dl.Header
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.Equal(t, coreHMAC("whsec_core_file", dl.Body), h.Get("X-Simpleq-Signature"))
	require.NotEqual(t, coreHMAC("whsec_core_from_env", dl.Body), h.Get("X-Simpleq-Signature"))
	require.Equal(t, id, h.Get("X-Simpleq-Job-Id"))
	require.Equal(t, "1", h.Get("X-Simpleq-Attempt"))
	require.Equal(t, "core.env-1", h.Get("X-Simpleq-Queue"))
	require.True(t, strings.HasPrefix(h.Get("User-Agent"), "simpleqd/"), "user-agent %q", h.Get("User-Agent"))
	require.Greater(t, len(h.Get("User-Agent")), len("simpleqd/"))

	job := d.WaitStatus(id, "completed", 10*time.Second)
	// GET returns the payload with key order and the big integer intact.
	r := d.Do("GET", "/v1/jobs/"+id, nil)
	require.Contains(t, string(r.Body), `"payload":{"b":1,"a":12345678901234567890,`)
	require.Equal(t, createdAt, job["createdAt"])

	// A queue whose secret comes from the environment signs with that secret.
	pub2 := corePublishRaw(t, d, "core_env2", `{"payload":{"z":true}}`, 201)
	require.Eventually(t, func() bool { return envHook.Count() == 1 }, 10*time.Second, 10*time.Millisecond)
	dl2 := envHook.Deliveries()[0]
	require.Equal(t, `{"id":"`+pub2["id"].(string)+`","queue":"core_env2","payload":{"z":true},"attempt":1,"maxAttempts":7,"deferCount":0,"createdAt":"`+pub2["createdAt"].(string)+`"}`,
		string(dl2.Body))
	require.Equal(t, coreHMAC("whsec_core_from_env", dl2.Body), dl2.Header.Get("X-Simpleq-Signature"))
	require.Equal(t, "core_env2", dl2.Header.Get("X-Simpleq-Queue"))
}

// TestCoreStandardSuccess: any 2xx completes the job after one attempt, with
// a success history entry carrying the webhook's status code.
func TestCoreStandardSuccess(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 204} })
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("ok", hook.URL, "maxAttempts: 4")})
	id := d.Publish("ok", map[string]any{"x": 1})
	job := d.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 1, job["attempts"])
	require.EqualValues(t, 4, job["maxAttempts"])
	require.EqualValues(t, 0, job["deferCount"])
	require.Nil(t, job["lastError"])
	require.Nil(t, job["deadReason"])
	require.Nil(t, job["idempotencyKey"])
	require.Equal(t, "ok", job["queue"])
	completedAt := coreTime(t, job["completedAt"])
	createdAt := coreTime(t, job["createdAt"])
	require.False(t, completedAt.Before(createdAt))
	hist := coreHistory(t, job)
	require.Len(t, hist, 1)
	require.EqualValues(t, 1, hist[0]["attempt"])
	require.Equal(t, "success", hist[0]["status"])
	require.EqualValues(t, 204, hist[0]["webhookStatusCode"])
	require.Nil(t, hist[0]["error"])
	require.Equal(t, completedAt, coreTime(t, hist[0]["timestamp"]))
	require.Equal(t, 1, hook.Count())

	q := d.Queue("ok")
	counts := q["counts"].(map[string]any)
	for _, k := range []string{"pending", "processing", "awaitingAck", "dead"} {
		require.EqualValues(t, 0, counts[k], k)
	}
}

// TestCoreStandardRetriesUntilDead: a 500 is a failure; the job is retried
// with attempt 1..N (header and envelope) until maxAttempts, then dead /
// max_attempts_exhausted with the status in lastError, and never delivered again.
func TestCoreStandardRetriesUntilDead(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500, Body: "boom"} })
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("fails", hook.URL,
		"maxAttempts: 4", "backoff: {type: fixed, base: 30ms}")})
	id := d.Publish("fails", map[string]any{"x": 1})
	job := d.WaitStatus(id, "dead", 10*time.Second)
	require.Equal(t, "max_attempts_exhausted", job["deadReason"])
	require.EqualValues(t, 4, job["attempts"])
	require.Contains(t, job["lastError"], "500")
	require.Contains(t, job["lastError"], "boom")
	require.NotNil(t, job["completedAt"])
	hist := coreHistory(t, job)
	require.Len(t, hist, 4)
	for i, e := range hist {
		require.EqualValues(t, i+1, e["attempt"])
		require.Equal(t, "failed", e["status"])
		require.EqualValues(t, 500, e["webhookStatusCode"])
		require.Contains(t, e["error"], "500")
	}

	ds := coreByAttempt(hook.Deliveries(), id)
	require.Len(t, ds, 4)
	for i, dl := range ds {
		require.Equal(t, i+1, dl.Attempt)
		require.Equal(t, strconv.Itoa(i+1), dl.Header.Get("X-Simpleq-Attempt"))
		env := dl.Envelope()
		require.EqualValues(t, i+1, env["attempt"])
		require.EqualValues(t, 4, env["maxAttempts"])
		require.Equal(t, coreHMAC("whsec_test", dl.Body), dl.Header.Get("X-Simpleq-Signature"))
		if i > 0 {
			// A retry never starts before the previous attempt answered.
			require.False(t, dl.Start.Before(ds[i-1].End))
		}
	}
	require.EqualValues(t, 1, d.Queue("fails")["counts"].(map[string]any)["dead"])
	// Dead means no further delivery: several backoff periods later, still 4.
	require.Never(t, func() bool { return hook.Count() != 4 }, 200*time.Millisecond, 10*time.Millisecond,
		"a dead job is delivered again")
	require.Equal(t, 4, hook.Count())
}

// TestCoreFailureKinds: a timeout, a connection error and a redirect are each
// a failure (retried, then dead), recorded with a telling lastError; the
// redirect target is never requested.
func TestCoreFailureKinds(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	slow := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200, Delay: time.Second} })
	target := NewWebhook(t, nil)
	var redirects atomic.Int32
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		redirects.Add(1)
		code := http.StatusFound
		if r.Header.Get("X-Simpleq-Attempt") == "2" {
			code = http.StatusTemporaryRedirect
		}
		w.Header().Set("Location", target.URL)
		w.WriteHeader(code)
	}))
	t.Cleanup(redir.Close)
	closedPort := redistest.FreePort(t) // nothing listens there any more

	yaml := fmt.Sprintf(`defaults:
  maxAttempts: 2
  backoff: {type: fixed, base: 20ms}
queues:
  slow:
    webhookUrl: %s
    signingSecret: s1
    timeout: 200ms
  refused:
    webhookUrl: http://127.0.0.1:%d/hook
    signingSecret: s2
  redirect:
    webhookUrl: %s/hook
    signingSecret: s3
`, slow.URL, closedPort, redir.URL)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml})
	slowID := d.Publish("slow", map[string]any{"k": "slow"})
	refusedID := d.Publish("refused", map[string]any{"k": "refused"})
	redirID := d.Publish("redirect", map[string]any{"k": "redirect"})

	check := func(id string, wantCodes []any, errPart string) map[string]any {
		t.Helper()
		job := d.WaitStatus(id, "dead", 10*time.Second)
		require.Equal(t, "max_attempts_exhausted", job["deadReason"])
		require.EqualValues(t, 2, job["attempts"])
		require.Contains(t, strings.ToLower(job["lastError"].(string)), errPart)
		hist := coreHistory(t, job)
		require.Len(t, hist, 2)
		for i, e := range hist {
			require.EqualValues(t, i+1, e["attempt"])
			require.Equal(t, "failed", e["status"])
			if wantCodes[i] == nil {
				require.Nil(t, e["webhookStatusCode"])
			} else {
				require.EqualValues(t, wantCodes[i], e["webhookStatusCode"])
			}
			require.Contains(t, strings.ToLower(e["error"].(string)), errPart)
		}
		return job
	}

	start := time.Now()
	check(slowID, []any{nil, nil}, "timeout")
	// Each attempt was cut at the 200ms timeout, not after the webhook's 1s.
	require.Less(t, time.Since(start), 1900*time.Millisecond)
	// The webhook records a cut request only once it notices the disconnect.
	require.Eventually(t, func() bool { return slow.Count() == 2 }, 5*time.Second, 10*time.Millisecond)
	ds := coreByAttempt(slow.Deliveries(), slowID)
	require.Len(t, ds, 2)
	require.Less(t, ds[1].Start.Sub(ds[0].Start), 900*time.Millisecond,
		"the retry must follow the 200ms timeout, not wait for the webhook's answer")

	check(refusedID, []any{nil, nil}, "connection")

	check(redirID, []any{302, 307}, "30")
	require.EqualValues(t, 2, redirects.Load())
	require.Equal(t, 0, target.Count(), "a redirect must never be followed")
}

// TestCoreBackoffSpacing: with exponential backoff the wait between attempts
// doubles; with fixed backoff it stays at base; max caps the exponential one.
// Gaps are measured from one answer to the next delivery's start.
func TestCoreBackoffSpacing(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	fail := func(Delivery) Reply { return Reply{Status: 500} }
	expo := NewWebhook(t, fail)
	fixed := NewWebhook(t, fail)
	capped := NewWebhook(t, fail)
	yaml := fmt.Sprintf(`defaults:
  maxAttempts: 5
queues:
  expo:
    webhookUrl: %s
    signingSecret: s
    backoff: {type: exponential, base: 80ms, max: 10s, jitter: false}
  fixed:
    webhookUrl: %s
    signingSecret: s
    backoff: {type: fixed, base: 80ms, jitter: false}
  capped:
    webhookUrl: %s
    signingSecret: s
    backoff: {type: exponential, base: 80ms, max: 120ms, jitter: false}
`, expo.URL, fixed.URL, capped.URL)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml})
	ids := map[string]string{
		"expo":   d.Publish("expo", map[string]any{}),
		"fixed":  d.Publish("fixed", map[string]any{}),
		"capped": d.Publish("capped", map[string]any{}),
	}
	hooks := map[string]*Webhook{"expo": expo, "fixed": fixed, "capped": capped}
	gaps := map[string][]time.Duration{}
	for name, id := range ids {
		d.WaitStatus(id, "dead", 15*time.Second)
		ds := coreByAttempt(hooks[name].Deliveries(), id)
		require.Len(t, ds, 5, name)
		for i := 1; i < len(ds); i++ {
			gaps[name] = append(gaps[name], ds[i].Start.Sub(ds[i-1].End))
		}
		t.Logf("%s gaps: %v", name, gaps[name])
	}
	ms := time.Millisecond
	const early = 5 * time.Millisecond // clock granularity (Redis TIME in whole ms)
	for i, want := range []time.Duration{80 * ms, 160 * ms, 320 * ms, 640 * ms} {
		require.GreaterOrEqual(t, gaps["expo"][i], want-early, "expo gap %d", i)
	}
	for i := range 4 {
		require.GreaterOrEqual(t, gaps["fixed"][i], 80*ms-early, "fixed gap %d", i)
		require.Less(t, gaps["fixed"][i], 450*ms, "fixed gap %d must not grow", i)
		want := min(80*ms<<i, 120*ms)
		require.GreaterOrEqual(t, gaps["capped"][i], want-early, "capped gap %d", i)
		require.Less(t, gaps["capped"][i], 450*ms, "capped gap %d must stay at max", i)
	}
	// Growth: the last exponential wait is far longer than the first.
	require.Greater(t, gaps["expo"][3]-gaps["expo"][0], 400*ms)
}

// TestCoreLifetimeExceededOnRetry: a failure whose retry would fall after the
// job's lifetime makes it dead / lifetime_exceeded at once, after one attempt.
func TestCoreLifetimeExceededOnRetry(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500, Body: "nope"} })
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("life", hook.URL,
		"maxAttempts: 5", "jobLifetime: 300ms", "backoff: {type: fixed, base: 1s}")})
	id := d.Publish("life", map[string]any{})
	job := d.WaitStatus(id, "dead", 10*time.Second)
	require.Equal(t, "lifetime_exceeded", job["deadReason"])
	require.EqualValues(t, 1, job["attempts"])
	require.Contains(t, job["lastError"], "500")
	hist := coreHistory(t, job)
	require.Len(t, hist, 1)
	require.Equal(t, "failed", hist[0]["status"])
	// Dead at the moment of the failure, not when the retry would have been due.
	require.Equal(t, coreTime(t, hist[0]["timestamp"]), coreTime(t, job["completedAt"]))
	created, expires := coreTime(t, job["createdAt"]), coreTime(t, job["expiresAt"])
	require.Equal(t, 300*time.Millisecond, expires.Sub(created))
	require.Equal(t, 1, hook.Count())
}

// TestCoreDelay: delay postpones the first delivery: scheduledFor is
// createdAt+delay, nothing is delivered before it, and the lifetime starts at
// scheduledFor (a lifetime shorter than the delay does not kill the job).
func TestCoreDelay(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("later", hook.URL,
		"jobLifetime: 500ms")})
	pub := corePublishRaw(t, d, "later", `{"payload":{"p":1},"delay":0.7}`, 201)
	id := pub["id"].(string)
	require.Equal(t, "pending", pub["status"])
	job := d.Job(id)
	created := coreTime(t, job["createdAt"])
	scheduled := coreTime(t, job["scheduledFor"])
	require.Equal(t, 700*time.Millisecond, scheduled.Sub(created))
	require.Equal(t, 500*time.Millisecond, coreTime(t, job["expiresAt"]).Sub(scheduled))
	require.Equal(t, "pending", job["status"])

	job = d.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 1, job["attempts"])
	ds := hook.Deliveries()
	require.Len(t, ds, 1)
	require.False(t, ds[0].Start.Before(scheduled.Add(-2*time.Millisecond)),
		"delivered at %s, before scheduledFor %s", ds[0].Start.UTC().Format(time.RFC3339Nano), scheduled.Format(time.RFC3339Nano))
}

// TestCoreRetention: terminal jobs (completed and dead) are purged after
// retention without any new traffic: GET answers 404 and the idempotency key
// is free again. Until then a repeat publish returns the retained job.
func TestCoreRetention(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	ok := NewWebhook(t, nil)
	bad := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500} })
	yaml := fmt.Sprintf(`defaults:
  retention: 1500ms
  maxAttempts: 1
queues:
  keep:
    webhookUrl: %s
    signingSecret: s
  dies:
    webhookUrl: %s
    signingSecret: s
`, ok.URL, bad.URL)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml})
	pub := corePublishRaw(t, d, "keep", `{"payload":{"n":1},"idempotencyKey":"ret-1"}`, 201)
	id := pub["id"].(string)
	created := coreTime(t, pub["createdAt"])
	deadID := d.Publish("dies", map[string]any{"n": 2})

	d.WaitStatus(id, "completed", 10*time.Second)
	d.WaitStatus(deadID, "dead", 10*time.Second)
	require.EqualValues(t, 1, d.Queue("dies")["counts"].(map[string]any)["dead"])
	// Still retained: the key answers with the existing, completed job.
	if time.Since(created) < 1200*time.Millisecond {
		dup := corePublishRaw(t, d, "keep", `{"payload":{"n":"other"},"idempotencyKey":"ret-1"}`, 200)
		require.Equal(t, id, dup["id"])
		require.Equal(t, "completed", dup["status"])
		require.Equal(t, pub["createdAt"], dup["createdAt"])
	} else {
		t.Log("too slow to check the repeat within retention")
	}

	var gone time.Time
	require.Eventually(t, func() bool {
		r := d.Do("GET", "/v1/jobs/"+id, nil)
		if r.Status == 404 {
			gone = time.Now()
			require.JSONEq(t, `{"error":"Job not found"}`, string(r.Body))
			return true
		}
		require.Equal(t, 200, r.Status, string(r.Body))
		return false
	}, 6*time.Second, 20*time.Millisecond, "completed job never purged")
	require.False(t, gone.Before(created.Add(1500*time.Millisecond)), "purged before retention ended")

	require.Eventually(t, func() bool {
		return d.Do("GET", "/v1/jobs/"+deadID, nil).Status == 404
	}, 6*time.Second, 20*time.Millisecond, "dead job never purged")
	require.EqualValues(t, 0, d.Queue("dies")["counts"].(map[string]any)["dead"])

	// The key is free again: a new job.
	again := corePublishRaw(t, d, "keep", `{"payload":{"n":3},"idempotencyKey":"ret-1"}`, 201)
	require.NotEqual(t, id, again["id"])
	d.WaitStatus(again["id"].(string), "completed", 10*time.Second)
	require.Equal(t, 2, ok.Count())
}

// TestCoreIdempotency: the same key on one queue returns the existing job
// (200, same id and createdAt) and stores nothing; on another queue it is a
// new job.
func TestCoreIdempotency(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hookA := NewWebhook(t, nil)
	hookB := NewWebhook(t, nil)
	yaml := fmt.Sprintf("queues:\n  qa:\n    webhookUrl: %s\n    signingSecret: s\n  qb:\n    webhookUrl: %s\n    signingSecret: s\n",
		hookA.URL, hookB.URL)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml})

	first := corePublishRaw(t, d, "qa", `{"payload":{"v":1},"idempotencyKey":"order-42"}`, 201)
	second := corePublishRaw(t, d, "qa", `{"payload":{"v":2},"idempotencyKey":"order-42","delay":5}`, 200)
	require.Equal(t, first["id"], second["id"])
	require.Equal(t, first["createdAt"], second["createdAt"])
	require.Contains(t, []any{"pending", "processing", "completed"}, second["status"])

	other := corePublishRaw(t, d, "qb", `{"payload":{"v":3},"idempotencyKey":"order-42"}`, 201)
	require.NotEqual(t, first["id"], other["id"])
	unkeyed := corePublishRaw(t, d, "qa", `{"payload":{"v":4}}`, 201)
	require.NotEqual(t, first["id"], unkeyed["id"])

	idA := first["id"].(string)
	job := d.WaitStatus(idA, "completed", 10*time.Second)
	require.Equal(t, "order-42", job["idempotencyKey"])
	d.WaitStatus(other["id"].(string), "completed", 10*time.Second)
	d.WaitStatus(unkeyed["id"].(string), "completed", 10*time.Second)
	third := corePublishRaw(t, d, "qa", `{"payload":{"v":5},"idempotencyKey":"order-42"}`, 200)
	require.Equal(t, idA, third["id"])
	require.Equal(t, "completed", third["status"])

	// The repeat stored nothing: qa delivered exactly its two jobs, the keyed
	// one with the first payload.
	require.Equal(t, 2, hookA.Count())
	for _, dl := range hookA.Deliveries() {
		if dl.JobID == idA {
			require.Equal(t, map[string]any{"v": float64(1)}, dl.Envelope()["payload"])
		}
	}
	require.Equal(t, 1, hookB.Count())
	require.Equal(t, other["id"], hookB.Deliveries()[0].JobID)
}

// TestCoreBadInput: every bad-input case of api.md against a running daemon
// with API keys: the documented status and error body, never a 500.
func TestCoreBadInput(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr,
		YAML: "auth:\n  apiKeys: [k1, k2]\n" + QueueYAML("std", hook.URL),
		Env:  []string{"SIMPLEQ_HTTP_MAXPAYLOADBYTES=2048"}})
	auth := []string{"Authorization", "Bearer k1"}
	pubPath := "/v1/queues/std/jobs"

	type errBody struct {
		Error json.RawMessage `json:"error"`
	}
	decode := func(r Response) errBody {
		t.Helper()
		require.Equal(t, "application/json", r.Header.Get("Content-Type"), string(r.Body))
		var b errBody
		require.NoError(t, json.Unmarshal(r.Body, &b), string(r.Body))
		require.NotEmpty(t, b.Error, string(r.Body))
		return b
	}
	expectMsg := func(r Response, status int, msg string) {
		t.Helper()
		require.Equal(t, status, r.Status, string(r.Body))
		var s string
		require.NoError(t, json.Unmarshal(decode(r).Error, &s), string(r.Body))
		require.Equal(t, msg, s)
	}
	type validation struct {
		FormErrors  []string            `json:"formErrors"`
		FieldErrors map[string][]string `json:"fieldErrors"`
	}
	expect400 := func(r Response) validation {
		t.Helper()
		require.Equal(t, 400, r.Status, string(r.Body))
		var v validation
		require.NoError(t, json.Unmarshal(decode(r).Error, &v), string(r.Body))
		require.NotNil(t, v.FormErrors, string(r.Body))
		require.NotNil(t, v.FieldErrors, string(r.Body))
		return v
	}
	fieldErr := func(body, field, msgPart string) {
		t.Helper()
		v := expect400(d.Do("POST", pubPath, body, auth...))
		require.Contains(t, v.FieldErrors, field, "body %s", body)
		require.NotEmpty(t, v.FieldErrors[field])
		require.Contains(t, strings.Join(v.FieldErrors[field], "; "), msgPart, "body %s", body)
	}

	// 401: missing key, wrong key, wrong scheme; also on reads and unknown paths.
	expectMsg(d.Do("POST", pubPath, `{"payload":{}}`), 401, "unauthorized")
	expectMsg(d.Do("POST", pubPath, `{"payload":{}}`, "Authorization", "Bearer nope"), 401, "unauthorized")
	expectMsg(d.Do("POST", pubPath, `{"payload":{}}`, "Authorization", "Basic k1"), 401, "unauthorized")
	expectMsg(d.Do("POST", pubPath, `{"payload":{}}`, "Authorization", "Bearer k1x"), 401, "unauthorized")
	expectMsg(d.Do("GET", "/v1/queues/std", nil), 401, "unauthorized")
	expectMsg(d.Do("GET", "/v1/jobs/job_x_std", nil), 401, "unauthorized")
	expectMsg(d.Do("GET", "/v1/nothing-here", nil), 401, "unauthorized")
	require.Equal(t, 0, int(coreQueue(t, d, "std", auth)["counts"].(map[string]any)["pending"].(float64)), "a refused publish stored nothing")

	// Both configured keys work.
	require.Equal(t, 201, d.Do("POST", pubPath, `{"payload":{}}`, "Authorization", "Bearer k2").Status)
	pub := corePublishRaw(t, d, "std", `{"payload":{"ok":true}}`, 201, auth...)
	id := pub["id"].(string)

	// 400 field errors.
	fieldErr(`{}`, "payload", "Required")
	fieldErr(`{"idempotencyKey":"k"}`, "payload", "Required")
	fieldErr(`{"payload":[1,2]}`, "payload", "object")
	fieldErr(`{"payload":"str"}`, "payload", "object")
	fieldErr(`{"payload":null}`, "payload", "object")
	fieldErr(`{"payload":42}`, "payload", "object")
	fieldErr(`{"payload":{},"idempotencyKey":"`+strings.Repeat("k", 256)+`"}`, "idempotencyKey", "255")
	fieldErr(`{"payload":{},"idempotencyKey":12}`, "idempotencyKey", "string")
	fieldErr(`{"payload":{},"idempotencyKey":{"a":1}}`, "idempotencyKey", "string")
	fieldErr(`{"payload":{},"delay":-1}`, "delay", "greater than or equal to 0")
	fieldErr(`{"payload":{},"delay":-0.001}`, "delay", "0")
	fieldErr(`{"payload":{},"delay":86400.5}`, "delay", "86400")
	fieldErr(`{"payload":{},"delay":1e9}`, "delay", "86400")
	fieldErr(`{"payload":{},"delay":"10"}`, "delay", "number")
	fieldErr(`{"payload":{},"delay":true}`, "delay", "number")
	// Several problems are reported at once.
	v := expect400(d.Do("POST", pubPath, `{"payload":[],"idempotencyKey":1,"delay":"x"}`, auth...))
	require.Len(t, v.FieldErrors, 3, "%v", v.FieldErrors)
	// The boundaries themselves are valid.
	corePublishRaw(t, d, "std", `{"payload":{},"idempotencyKey":"`+strings.Repeat("k", 255)+`","delay":86400}`, 201, auth...)
	corePublishRaw(t, d, "std", `{"payload":{},"delay":0}`, 201, auth...)

	// 400 form errors: malformed JSON, not an object.
	for _, body := range []string{`{"payload":`, `{"payload":{}}}`, `not json`, `{'payload':{}}`} {
		v := expect400(d.Do("POST", pubPath, body, auth...))
		require.NotEmpty(t, v.FormErrors, "body %q", body)
	}
	for _, body := range []string{`[]`, `"x"`, `null`, `7`} {
		v := expect400(d.Do("POST", pubPath, body, auth...))
		require.NotEmpty(t, v.FormErrors, "body %q", body)
	}
	v = expect400(d.Do("POST", pubPath, "", auth...))
	require.NotEmpty(t, v.FormErrors)

	// 404s.
	expectMsg(d.Do("POST", "/v1/queues/nope/jobs", `{"payload":{}}`, auth...), 404, "Queue 'nope' not found")
	expectMsg(d.Do("GET", "/v1/queues/nope", nil, auth...), 404, "Queue 'nope' not found")
	unknownID := id[:len(id)-len("_std")-3] + "zzz_std" // well-formed, never issued
	expectMsg(d.Do("GET", "/v1/jobs/"+unknownID, nil, auth...), 404, "Job not found")
	expectMsg(d.Do("GET", "/v1/jobs/job_"+strings.Repeat("z", 26)+"_nope", nil, auth...), 404, "Job not found")
	expectMsg(d.Do("GET", "/v1/jobs/garbage", nil, auth...), 404, "Job not found")

	// 413: a body over http.maxPayloadBytes, with and without Content-Length.
	big := `{"payload":{"x":"` + strings.Repeat("a", 2100) + `"}}`
	r := d.Do("POST", pubPath, big, auth...)
	require.Equal(t, 413, r.Status, string(r.Body))
	decode(r)
	req, err := http.NewRequest("POST", d.URL+pubPath, io.MultiReader(strings.NewReader(big)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k1")
	req.ContentLength = -1 // unknown length: sent chunked, the limit is enforced while reading
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 413, resp.StatusCode, string(body))
	// Just under the limit is fine.
	under := `{"payload":{"x":"` + strings.Repeat("a", 2048-len(`{"payload":{"x":""}}`)) + `"}}`
	require.Len(t, under, 2048)
	corePublishRaw(t, d, "std", under, 201, auth...)

	// 415: not JSON.
	r = d.Do("POST", pubPath, `{"payload":{}}`, append([]string{"Content-Type", "text/plain"}, auth...)...)
	require.Equal(t, 415, r.Status, string(r.Body))
	decode(r)
	r = d.Do("POST", pubPath, `{"payload":{}}`, append([]string{"Content-Type", ""}, auth...)...)
	require.Equal(t, 415, r.Status, string(r.Body))

	// 409: a callback on a standard-mode queue.
	r = d.Do("POST", "/v1/jobs/"+id+"/ack", `{}`, auth...)
	require.Equal(t, 409, r.Status, string(r.Body))
	decode(r)
	r = d.Do("POST", "/v1/jobs/"+id+"/nack", `{}`, auth...)
	require.Equal(t, 409, r.Status, string(r.Body))

	// Health needs no key.
	for _, p := range []string{"/healthz", "/readyz"} {
		r := d.Do("GET", p, nil)
		require.Equal(t, 200, r.Status, p)
	}

	// None of the refused requests created a job: only the accepted ones ran.
	require.Eventually(t, func() bool { return hook.Count() == 4 }, 10*time.Second, 10*time.Millisecond)
	r = d.Do("GET", "/v1/jobs/"+id, nil, auth...)
	require.Equal(t, 200, r.Status, string(r.Body))
	require.Equal(t, "completed", r.JSON(t)["status"])
	// The delayed-by-a-day job is the only one left.
	counts := coreQueue(t, d, "std", auth)["counts"].(map[string]any)
	require.EqualValues(t, 1, counts["pending"])
	require.NotContains(t, d.Log(), `"level":"error"`)
}

// coreQueue reads a queue's status with extra headers (for daemons with API keys).
func coreQueue(t *testing.T, d *Daemon, name string, headers []string) map[string]any {
	t.Helper()
	r := d.Do("GET", "/v1/queues/"+name, nil, headers...)
	require.Equal(t, 200, r.Status, string(r.Body))
	return r.JSON(t)
}

// TestCoreEmbeddedStore: with redis.addr empty the daemon runs on its
// embedded in-memory store, says so, and delivers, retries and completes.
func TestCoreEmbeddedStore(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	hook := NewWebhook(t, func(Delivery) Reply {
		if n.Add(1) == 1 {
			return Reply{Status: 500} // one failure first
		}
		return Reply{Status: 200}
	})
	d := StartDaemon(t, DaemonConfig{RedisAddr: "", YAML: QueueYAML("mem", hook.URL,
		"backoff: {type: fixed, base: 30ms}")})
	require.Contains(t, d.Log(), "embedded in-memory store")
	pub := corePublishRaw(t, d, "mem", `{"payload":{"big":98765432109876543210},"idempotencyKey":"m1"}`, 201)
	id := pub["id"].(string)
	job := d.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 2, job["attempts"])
	require.Len(t, coreHistory(t, job), 2)
	ds := coreByAttempt(hook.Deliveries(), id)
	require.Len(t, ds, 2)
	require.Contains(t, string(ds[1].Body), `"payload":{"big":98765432109876543210},"attempt":2,`)
	require.Equal(t, coreHMAC("whsec_test", ds[1].Body), ds[1].Header.Get("X-Simpleq-Signature"))
	dup := corePublishRaw(t, d, "mem", `{"payload":{},"idempotencyKey":"m1"}`, 200)
	require.Equal(t, id, dup["id"])
	require.Equal(t, 0, d.Stop(10*time.Second))
}

// TestCoreGracefulStopFinishesInFlight: SIGTERM while a delivery is in
// flight: the daemon takes no new work, lets the delivery finish, records it
// and exits 0; after a restart the job is completed (one attempt, one
// delivery) and the job that was waiting is delivered then.
func TestCoreGracefulStopFinishesInFlight(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	script, started := coreStartSignal(func(Delivery) Reply { return Reply{Status: 200, Delay: time.Second} })
	hook := NewWebhook(t, script)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: "shutdownGrace: 10s\n" + QueueYAML("grace", hook.URL,
		"concurrency: 1", "timeout: 5s")})
	first := d.Publish("grace", map[string]any{"n": 1})
	coreWait(t, started, 10*time.Second, "the first delivery")
	second := d.Publish("grace", map[string]any{"n": 2}) // waits: concurrency 1

	code := d.Stop(10 * time.Second)
	stopped := time.Now()
	require.Equal(t, 0, code, d.Log())
	ds := hook.Deliveries()
	require.Len(t, ds, 1, "exactly the in-flight delivery, no new work after SIGTERM")
	require.Equal(t, first, ds[0].JobID)
	require.False(t, ds[0].End.After(stopped), "the daemon exited before its delivery finished")
	require.GreaterOrEqual(t, ds[0].End.Sub(ds[0].Start), time.Second)

	hook.SetScript(func(Delivery) Reply { return Reply{Status: 200} })
	d.Restart()
	job := d.Job(first)
	require.Equal(t, "completed", job["status"], "the finished delivery was recorded before exit")
	require.EqualValues(t, 1, job["attempts"])
	require.Len(t, coreHistory(t, job), 1)
	d.WaitStatus(second, "completed", 10*time.Second)
	require.Equal(t, 2, hook.Count())
	require.Len(t, coreByAttempt(hook.Deliveries(), first), 1, "the completed job is never redelivered")
}

// TestCoreGracefulStopHandsBack: with a tiny shutdownGrace the daemon does not
// wait for a slow webhook: it exits quickly (0) and hands the job back
// without spending an attempt; after a restart it is delivered again as
// attempt 1.
func TestCoreGracefulStopHandsBack(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	script, started := coreStartSignal(func(Delivery) Reply { return Reply{Status: 200, Delay: 3 * time.Second} })
	hook := NewWebhook(t, script)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: "shutdownGrace: 100ms\n" + QueueYAML("handback", hook.URL,
		"timeout: 10s", "maxAttempts: 3")})
	id := d.Publish("handback", map[string]any{"n": 1})
	coreWait(t, started, 10*time.Second, "the first delivery")

	begin := time.Now()
	require.Equal(t, 0, d.Stop(5*time.Second), d.Log())
	require.Less(t, time.Since(begin), 2*time.Second, "shutdown must not wait for the 3s webhook")
	require.Contains(t, d.Log(), "delivery handed back at shutdown")

	hook.SetScript(func(Delivery) Reply { return Reply{Status: 200} })
	d.Restart()
	job := d.WaitStatus(id, "completed", 10*time.Second)
	require.EqualValues(t, 1, job["attempts"], "the handed-back delivery must not spend an attempt")
	hist := coreHistory(t, job)
	require.Len(t, hist, 1)
	require.EqualValues(t, 1, hist[0]["attempt"])
	require.Equal(t, "success", hist[0]["status"])
	require.Eventually(t, func() bool { return hook.Count() == 2 }, 5*time.Second, 10*time.Millisecond)
	ds := hook.Deliveries()
	for _, dl := range ds {
		require.Equal(t, id, dl.JobID)
		require.Equal(t, "1", dl.Header.Get("X-Simpleq-Attempt"))
		require.EqualValues(t, 1, dl.Envelope()["attempt"])
	}
}

// TestCoreLifetimeWhileWaiting: a job that waits (here behind concurrency 1
// and a slow delivery) becomes dead / lifetime_exceeded when its lifetime
// ends, without ever being delivered and without waiting for a free slot.
func TestCoreLifetimeWhileWaiting(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	script, started := coreStartSignal(func(Delivery) Reply { return Reply{Status: 200, Delay: 3 * time.Second} })
	hook := NewWebhook(t, script)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("wait", hook.URL,
		"concurrency: 1", "timeout: 10s", "jobLifetime: 400ms")})
	slow := d.Publish("wait", map[string]any{"n": 1})
	coreWait(t, started, 10*time.Second, "the slow delivery")
	waiting := d.Publish("wait", map[string]any{"n": 2})
	job := d.WaitStatus(waiting, "dead", 2*time.Second)
	require.Equal(t, "lifetime_exceeded", job["deadReason"])
	require.EqualValues(t, 0, job["attempts"])
	require.Empty(t, coreHistory(t, job))
	require.Equal(t, 0, hook.Count(), "the slow delivery is still in flight")
	require.EqualValues(t, 1, d.Queue("wait")["counts"].(map[string]any)["dead"])
	d.WaitStatus(slow, "completed", 10*time.Second)
	require.Equal(t, 1, hook.Count())
}
