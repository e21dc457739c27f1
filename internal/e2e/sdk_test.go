package test

// End-to-end test of the Go SDK (package client) against a real daemon on a
// real redis-server: every call, the typed errors, and the promise that a
// publish retried after a lost answer does not create a second job.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/client"
)

// sdkLossyProxy forwards to the daemon but, for the first publish, drops
// the connection after the daemon answered: the job exists, the client
// never learns it, and must retry.
func sdkLossyProxy(t *testing.T, target string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var publishes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), strings.NewReader(string(body)))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/jobs") && publishes.Add(1) == 1 {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv, &publishes
}

// sdkWait polls a job through the SDK until cond holds.
func sdkWait(t *testing.T, c *client.Client, id string, what string, cond func(*client.Job) bool) *client.Job {
	t.Helper()
	var last *client.Job
	require.Eventually(t, func() bool {
		j, err := c.GetJob(context.Background(), id)
		require.NoError(t, err)
		last = j
		return cond(j)
	}, 10*time.Second, 10*time.Millisecond, "job %s: %s", id, what)
	return last
}

func TestSDKEndToEnd(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	std := NewWebhook(t, nil)
	ack := NewWebhook(t, nil)
	dies := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 500, Body: "boom"} })
	yaml := fmt.Sprintf(`auth:
  apiKeys: [sdk_key]
defaults:
  backoff: {type: fixed, base: 20ms, jitter: false}
queues:
  std:
    webhookUrl: %s
    signingSecret: s
  ack:
    webhookUrl: %s
    signingSecret: s
    mode: ack
  dies:
    webhookUrl: %s
    signingSecret: s
    maxAttempts: 1
`, std.URL, ack.URL, dies.URL)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info",
		Env: []string{"SIMPLEQ_HTTP_MAXPAYLOADBYTES=4096"}})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	c, err := client.New(d.URL, "sdk_key", client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	require.NoError(t, err)

	// ---- a publish whose answer is lost is retried with the same key ----
	proxy, publishes := sdkLossyProxy(t, d.URL)
	pc, err := client.New(proxy.URL, "sdk_key", client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	require.NoError(t, err)
	payload := json.RawMessage(`{"to":"a@b.com","n":12345678901234567890}`)
	res, err := pc.Publish(ctx, "std", payload, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, publishes.Load(), "the first answer was lost, so the client retried once")
	require.True(t, res.Created)
	job := sdkWait(t, c, res.ID, "completed", func(j *client.Job) bool { return j.Status == client.StatusCompleted })
	require.Equal(t, res.IdempotencyKey, job.IdempotencyKey)
	require.Equal(t, string(payload), string(job.Payload), "payload bytes survive")
	require.Equal(t, 1, job.Attempts)
	require.Len(t, job.History, 1)
	require.Equal(t, client.AttemptSuccess, job.History[0].Status)
	require.Equal(t, 200, job.History[0].WebhookStatusCode)
	require.False(t, job.CreatedAt.IsZero())
	require.Equal(t, job.CreatedAt, res.CreatedAt)
	require.Equal(t, 24*time.Hour, job.ExpiresAt.Sub(job.ScheduledFor))
	require.NotNil(t, job.CompletedAt)
	require.Equal(t, 1, std.Count(), "exactly one job was created and delivered")

	// ---- a caller's own key: the repeat is not created ----
	r1, err := c.Publish(ctx, "std", map[string]any{"order": 42}, &client.PublishOptions{IdempotencyKey: "order-42", Delay: time.Hour})
	require.NoError(t, err)
	require.True(t, r1.Created)
	require.Equal(t, client.StatusPending, r1.Status)
	r2, err := c.Publish(ctx, "std", map[string]any{"order": 43}, &client.PublishOptions{IdempotencyKey: "order-42"})
	require.NoError(t, err)
	require.False(t, r2.Created)
	require.Equal(t, r1.ID, r2.ID)
	delayed, err := c.GetJob(ctx, r1.ID)
	require.NoError(t, err)
	require.Equal(t, time.Hour, delayed.ScheduledFor.Sub(delayed.CreatedAt))

	// ---- batch ----
	batch, err := c.PublishBatch(ctx, "std", []client.BatchJob{
		{Payload: map[string]int{"i": 1}},
		{Payload: json.RawMessage(`{"i":2}`), IdempotencyKey: "order-42"},
	})
	require.NoError(t, err)
	require.Len(t, batch, 2)
	require.True(t, batch[0].Created)
	require.False(t, batch[1].Created)
	require.Equal(t, r1.ID, batch[1].ID)
	sdkWait(t, c, batch[0].ID, "completed", func(j *client.Job) bool { return j.Status == client.StatusCompleted })

	// ---- typed errors ----
	var nf *client.NotFoundError
	_, err = c.GetJob(ctx, "job_"+strings.Repeat("0", 26)+"_std")
	require.ErrorAs(t, err, &nf)
	require.Equal(t, "Job not found", nf.Message)
	_, err = c.Publish(ctx, "nope", map[string]int{}, nil)
	require.ErrorAs(t, err, &nf)
	require.Equal(t, "Queue 'nope' not found", nf.Message)
	var ve *client.ValidationError
	_, err = c.Publish(ctx, "std", json.RawMessage(`[1,2]`), &client.PublishOptions{Delay: 48 * time.Hour})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []string{"Expected object, received array"}, ve.FieldErrors["payload"])
	require.Contains(t, ve.FieldErrors, "delay")
	var ae *client.AuthError
	bad, err := client.New(d.URL, "wrong")
	require.NoError(t, err)
	_, err = bad.Queues(ctx)
	require.ErrorAs(t, err, &ae)
	var ce *client.ConflictError
	err = c.Ack(ctx, res.ID, nil)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "Queue 'std' is not in ack mode", ce.Message)
	var apiErr *client.APIError
	_, err = c.Publish(ctx, "std", map[string]string{"x": strings.Repeat("a", 5000)}, nil)
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusRequestEntityTooLarge, apiErr.Status)

	// ---- ack mode: defer, nack, stale attempt, ack, idempotent ack ----
	ar, err := c.Publish(ctx, "ack", map[string]string{"work": "x"}, nil)
	require.NoError(t, err)
	sdkWait(t, c, ar.ID, "awaiting ack", func(j *client.Job) bool { return j.Status == client.StatusAwaitingAck })
	err = c.Defer(ctx, ar.ID, client.DeferOptions{RetryAfter: -time.Second})
	require.ErrorAs(t, err, &ve, "the daemon refuses a negative wait")
	require.Equal(t, []string{"Number must be greater than or equal to 0"}, ve.FieldErrors["retryAfter"])
	require.NoError(t, c.Defer(ctx, ar.ID, client.DeferOptions{RetryAfter: 50 * time.Millisecond, Scope: client.ScopeJob, Reason: "provider 429", Attempt: 1}))
	require.Eventually(t, func() bool { return ack.Count() == 2 }, 10*time.Second, 10*time.Millisecond)
	sdkWait(t, c, ar.ID, "awaiting ack again", func(j *client.Job) bool { return j.Status == client.StatusAwaitingAck })
	require.NoError(t, c.Nack(ctx, ar.ID, client.NackOptions{Reason: "flaky", Attempt: 1}))
	require.Eventually(t, func() bool { return ack.Count() == 3 }, 10*time.Second, 10*time.Millisecond)
	sdkWait(t, c, ar.ID, "attempt 2 awaiting ack", func(j *client.Job) bool { return j.Status == client.StatusAwaitingAck })
	err = c.Ack(ctx, ar.ID, &client.AckOptions{Attempt: 1})
	require.ErrorAs(t, err, &ce, "a late ack for attempt 1 is refused")
	require.False(t, ce.AfterRetry)
	require.NoError(t, c.Ack(ctx, ar.ID, &client.AckOptions{Attempt: 2}))
	require.NoError(t, c.Ack(ctx, ar.ID, nil), "ack is idempotent")
	aj, err := c.GetJob(ctx, ar.ID)
	require.NoError(t, err)
	require.Equal(t, client.StatusCompleted, aj.Status)
	require.Equal(t, 2, aj.Attempts)
	require.Equal(t, 1, aj.DeferCount)
	require.Len(t, aj.History, 3)
	require.Equal(t, client.AttemptDeferred, aj.History[0].Status)
	require.Equal(t, 50*time.Millisecond, aj.History[0].RetryAfter)
	require.Equal(t, client.ScopeJob, aj.History[0].Scope)
	require.Equal(t, "provider 429", aj.History[0].Reason)
	require.Equal(t, client.AttemptNacked, aj.History[1].Status)
	require.Equal(t, "flaky", aj.History[1].Error)
	require.Equal(t, client.AttemptSuccess, aj.History[2].Status)
	require.True(t, aj.History[2].Acked)
	require.Equal(t, 2, aj.History[2].Attempt)

	// A non-retryable nack dead-letters at once.
	nr, err := c.Publish(ctx, "ack", map[string]string{"work": "y"}, nil)
	require.NoError(t, err)
	sdkWait(t, c, nr.ID, "awaiting ack", func(j *client.Job) bool { return j.Status == client.StatusAwaitingAck })
	require.NoError(t, c.Nack(ctx, nr.ID, client.NackOptions{Retryable: client.Bool(false), Reason: "bad input"}))
	nj, err := c.GetJob(ctx, nr.ID)
	require.NoError(t, err)
	require.Equal(t, client.StatusDead, nj.Status)
	require.Equal(t, "nacked", nj.DeadReason)

	// ---- admin ----
	q, err := c.Queue(ctx, "ack")
	require.NoError(t, err)
	require.Equal(t, client.ModeAck, q.Mode)
	require.Equal(t, ack.URL, q.WebhookURL)
	require.Equal(t, time.Second, q.RateLimitWindow)
	require.EqualValues(t, 1, q.Counts.Dead)
	require.Equal(t, client.HoldOpen, q.Hold.State)
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 3)
	require.Equal(t, []string{"ack", "dies", "std"}, []string{qs[0].Name, qs[1].Name, qs[2].Name})
	q, err = c.Pause(ctx, "std", "maintenance")
	require.NoError(t, err)
	require.Equal(t, client.HoldPaused, q.Hold.State)
	require.Equal(t, "maintenance", q.Hold.Reason)
	q, err = c.Resume(ctx, "std")
	require.NoError(t, err)
	require.Equal(t, client.HoldOpen, q.Hold.State)

	d1, err := c.Publish(ctx, "dies", map[string]int{"n": 1}, nil)
	require.NoError(t, err)
	sdkWait(t, c, d1.ID, "dead", func(j *client.Job) bool { return j.Status == client.StatusDead })
	d2, err := c.Publish(ctx, "dies", map[string]int{"n": 2}, nil)
	require.NoError(t, err)
	sdkWait(t, c, d2.ID, "dead", func(j *client.Job) bool { return j.Status == client.StatusDead })
	page, err := c.DeadJobs(ctx, "dies", &client.DeadJobsOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, d2.ID, page.Jobs[0].ID, "newest first")
	require.Equal(t, "max_attempts_exhausted", page.Jobs[0].DeadReason)
	require.Equal(t, "webhook responded 500: boom", page.Jobs[0].LastError)
	require.NotEmpty(t, page.NextCursor)
	page, err = c.DeadJobs(ctx, "dies", &client.DeadJobsOptions{Limit: 1, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, d1.ID, page.Jobs[0].ID)
	require.Empty(t, page.NextCursor)

	dies.SetScript(func(Delivery) Reply { return Reply{Status: 200} })
	n, err := c.Replay(ctx, "dies", []string{d1.ID, "job_" + strings.Repeat("0", 26) + "_dies"})
	require.NoError(t, err)
	require.Equal(t, 1, n, "unknown ids are skipped")
	sdkWait(t, c, d1.ID, "completed after replay", func(j *client.Job) bool { return j.Status == client.StatusCompleted })
	n, err = c.ReplayAll(ctx, "dies")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	sdkWait(t, c, d2.ID, "completed after replay", func(j *client.Job) bool { return j.Status == client.StatusCompleted })
	n, err = c.ReplayAll(ctx, "dies")
	require.NoError(t, err)
	require.Zero(t, n)
}
