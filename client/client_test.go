package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seen is one request a fake API received.
type seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

// reply is what the fake answers; drop closes the connection unanswered.
type reply struct {
	status int
	header map[string]string
	body   string
	drop   bool
}

// fakeAPI is an httptest server answering per script and recording requests.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newFake(t *testing.T, script func(n int, s seen) reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s := seen{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(b)}
		f.mu.Lock()
		f.reqs = append(f.reqs, s)
		n := len(f.reqs)
		f.mu.Unlock()
		rep := script(n, s)
		if rep.drop {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		if rep.body != "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// newTestClient returns a client for f whose waits are recorded, not slept.
func newTestClient(t *testing.T, f *fakeAPI, opts ...Option) (*Client, *[]time.Duration) {
	t.Helper()
	c, err := New(f.URL, "sk_test", opts...)
	require.NoError(t, err)
	var mu sync.Mutex
	waits := &[]time.Duration{}
	c.wait = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return c, waits
}

const createdJSON = `{"id":"job_01j0000000000000000000000a_emails","status":"pending","createdAt":"2026-01-01T00:00:00.000Z"}`

func TestPublishSendsExactPayloadAndGeneratedKey(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int, seen) reply { return reply{status: 201, body: createdJSON} })
	c, _ := newTestClient(t, f)
	payload := json.RawMessage(`{"b":1, "a":12345678901234567890,"html":"<a&b>"}`)
	res, err := c.Publish(context.Background(), "emails", payload, &PublishOptions{Delay: 1500 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, "job_01j0000000000000000000000a_emails", res.ID)
	require.Equal(t, StatusPending, res.Status)
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), res.CreatedAt)
	require.True(t, res.Created)
	require.Regexp(t, `^sqgo_[0-9a-f]{32}$`, res.IdempotencyKey)

	reqs := f.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	require.Equal(t, "POST", r.Method)
	require.Equal(t, "/v1/queues/emails/jobs", r.Path)
	require.Equal(t, "Bearer sk_test", r.Header.Get("Authorization"))
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.True(t, strings.HasPrefix(r.Header.Get("User-Agent"), "simpleq-go/"))
	require.Equal(t, `{"payload":{"b":1, "a":12345678901234567890,"html":"<a&b>"},"idempotencyKey":"`+res.IdempotencyKey+`","delay":1.5}`, r.Body,
		"a RawMessage payload travels byte for byte")

	// Any other value is encoded without HTML escaping; keys differ per call.
	res2, err := c.Publish(context.Background(), "emails", map[string]any{"html": "<p>"}, nil)
	require.NoError(t, err)
	require.NotEqual(t, res.IdempotencyKey, res2.IdempotencyKey)
	require.Equal(t, `{"payload":{"html":"<p>"},"idempotencyKey":"`+res2.IdempotencyKey+`"}`, f.requests()[1].Body)

	res3, err := c.Publish(context.Background(), "emails", []byte(` {"raw":1} `), nil)
	require.NoError(t, err)
	require.Equal(t, `{"payload":{"raw":1},"idempotencyKey":"`+res3.IdempotencyKey+`"}`, f.requests()[2].Body, "[]byte is JSON, not base64")

	_, err = c.Publish(context.Background(), "emails", nil, nil)
	require.Error(t, err)
	_, err = c.Publish(context.Background(), "emails", json.RawMessage(`{"a":`), nil)
	require.Error(t, err)
	require.Len(t, f.requests(), 3, "invalid payloads are refused before sending")
}

func TestPublishRetriesReuseTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int, _ seen) reply {
		switch n {
		case 1:
			return reply{status: 503, header: map[string]string{"Retry-After": "1"}, body: `{"error":"Service unavailable"}`}
		case 2:
			return reply{drop: true} // the answer is lost
		case 3:
			return reply{status: 429, header: map[string]string{"Retry-After": "0.25"}, body: `{"error":"slow down"}`}
		}
		// The first tries did store the job: the key is known.
		return reply{status: 200, body: createdJSON}
	})
	c, waits := newTestClient(t, f, WithBackoff(100*time.Millisecond, time.Second))
	res, err := c.Publish(context.Background(), "emails", map[string]int{"n": 1}, nil)
	require.NoError(t, err)
	require.True(t, res.Created, "a generated key can only have been used by this call")
	reqs := f.requests()
	require.Len(t, reqs, 4)
	for _, r := range reqs {
		require.Equal(t, reqs[0].Body, r.Body, "every retry sends the same body and key")
	}
	require.Contains(t, reqs[0].Body, res.IdempotencyKey)
	require.Len(t, *waits, 3)
	require.Equal(t, time.Second, (*waits)[0], "Retry-After honoured")
	require.GreaterOrEqual(t, (*waits)[1], 100*time.Millisecond, "backoff after a network error")
	require.LessOrEqual(t, (*waits)[1], 200*time.Millisecond)
	require.Equal(t, 250*time.Millisecond, (*waits)[2])

	// A caller's own key that the daemon already knew: Created is false.
	f2 := newFake(t, func(int, seen) reply { return reply{status: 200, body: createdJSON} })
	c2, _ := newTestClient(t, f2)
	res, err = c2.Publish(context.Background(), "emails", map[string]int{}, &PublishOptions{IdempotencyKey: "order-42"})
	require.NoError(t, err)
	require.False(t, res.Created)
	require.Equal(t, "order-42", res.IdempotencyKey)
	require.Equal(t, `{"payload":{},"idempotencyKey":"order-42"}`, f2.requests()[0].Body)
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	always := func(status int) *fakeAPI {
		return newFake(t, func(int, seen) reply { return reply{status: status, body: `{"error":"x"}`} })
	}

	// 5xx: retried MaxRetries times with growing, jittered waits.
	f := always(500)
	c, waits := newTestClient(t, f, WithBackoff(100*time.Millisecond, 300*time.Millisecond))
	_, err := c.GetJob(context.Background(), "job_x_q")
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 500, ae.Status)
	require.Len(t, f.requests(), 1+DefaultMaxRetries)
	require.Len(t, *waits, DefaultMaxRetries)
	bounds := [][2]time.Duration{{50, 100}, {100, 200}, {150, 300}} // ms: half..all of min(base·2ⁿ, max)
	for i, w := range *waits {
		require.GreaterOrEqual(t, w, bounds[i][0]*time.Millisecond, "wait %d", i)
		require.LessOrEqual(t, w, bounds[i][1]*time.Millisecond, "wait %d", i)
	}

	// WithMaxRetries bounds it; 0 disables retries.
	f = always(502)
	c, _ = newTestClient(t, f, WithMaxRetries(1))
	_, err = c.Queues(context.Background())
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Len(t, f.requests(), 2)
	f = always(503)
	c, waits = newTestClient(t, f, WithMaxRetries(0))
	_, err = c.Queues(context.Background())
	require.ErrorAs(t, err, &ue)
	require.Len(t, f.requests(), 1)
	require.Empty(t, *waits)

	// 4xx is never retried.
	for _, status := range []int{400, 401, 404, 409, 413, 415} {
		f = always(status)
		c, waits = newTestClient(t, f)
		_, err = c.Publish(context.Background(), "q", map[string]int{}, nil)
		require.Error(t, err)
		require.Len(t, f.requests(), 1, "status %d", status)
		require.Empty(t, *waits)
	}

	// Network errors are retried.
	f = newFake(t, func(n int, _ seen) reply {
		if n < 3 {
			return reply{drop: true}
		}
		return reply{status: 200, body: `{"queues":[]}`}
	})
	c, _ = newTestClient(t, f, WithBackoff(time.Millisecond, time.Millisecond))
	qs, err := c.Queues(context.Background())
	require.NoError(t, err)
	require.Empty(t, qs)
	require.Len(t, f.requests(), 3)
}

func TestRetryRespectsContext(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int, seen) reply {
		return reply{status: 503, header: map[string]string{"Retry-After": "30"}, body: `{"error":"Service unavailable"}`}
	})
	c, err := New(f.URL, "")
	require.NoError(t, err)
	// A deadline before the Retry-After: give up at once with the last error.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Queue(ctx, "q")
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 30*time.Second, ue.RetryAfter)
	require.Less(t, time.Since(start), time.Second)
	require.Len(t, f.requests(), 1)
	require.Empty(t, f.requests()[0].Header.Get("Authorization"), "no key, no header")

	// Cancelled while waiting: returns promptly.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel) // cancels while Queue waits out the Retry-After
	start = time.Now()
	_, err = c.Queue(ctx, "q")
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestTypedErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		header map[string]string
		body   string
		check  func(t *testing.T, err error)
	}{
		{400, nil, `{"error":{"formErrors":[],"fieldErrors":{"payload":["Required"],"delay":["Number must be less than or equal to 86400"]}}}`,
			func(t *testing.T, err error) {
				var ve *ValidationError
				require.ErrorAs(t, err, &ve)
				require.Empty(t, ve.FormErrors)
				require.Equal(t, []string{"Required"}, ve.FieldErrors["payload"])
				require.Equal(t, "delay: Number must be less than or equal to 86400; payload: Required", ve.Message)
			}},
		{400, nil, `{"error":{"formErrors":["Invalid JSON body"],"fieldErrors":{}}}`,
			func(t *testing.T, err error) {
				var ve *ValidationError
				require.ErrorAs(t, err, &ve)
				require.Equal(t, []string{"Invalid JSON body"}, ve.FormErrors)
				require.NotNil(t, ve.FieldErrors)
			}},
		{401, nil, `{"error":"unauthorized"}`, func(t *testing.T, err error) {
			var e *AuthError
			require.ErrorAs(t, err, &e)
			require.Equal(t, "unauthorized", e.Message)
		}},
		{404, nil, `{"error":"Queue 'nope' not found"}`, func(t *testing.T, err error) {
			var e *NotFoundError
			require.ErrorAs(t, err, &e)
			require.Equal(t, "Queue 'nope' not found", e.Message)
		}},
		{409, nil, `{"error":"Job is not awaiting an outcome (status: completed)"}`, func(t *testing.T, err error) {
			var e *ConflictError
			require.ErrorAs(t, err, &e)
			require.False(t, e.AfterRetry)
		}},
		{429, map[string]string{"Retry-After": "2"}, `{"error":"slow down"}`, func(t *testing.T, err error) {
			var e *RateLimitedError
			require.ErrorAs(t, err, &e)
			require.Equal(t, 2*time.Second, e.RetryAfter)
		}},
		{503, map[string]string{"Retry-After": "1"}, `{"error":"Service unavailable"}`, func(t *testing.T, err error) {
			var e *UnavailableError
			require.ErrorAs(t, err, &e)
			require.Equal(t, time.Second, e.RetryAfter)
		}},
		{413, nil, `{"error":"Payload too large"}`, func(t *testing.T, err error) {
			var e *APIError
			require.ErrorAs(t, err, &e)
			require.Equal(t, "Payload too large", e.Message)
			var ve *ValidationError
			require.False(t, errors.As(err, &ve))
		}},
		{502, nil, `<html>bad gateway</html>`, func(t *testing.T, err error) {
			var e *UnavailableError
			require.ErrorAs(t, err, &e)
			require.Equal(t, "<html>bad gateway</html>", e.Message)
		}},
	}
	for _, tc := range cases {
		f := newFake(t, func(int, seen) reply { return reply{status: tc.status, header: tc.header, body: tc.body} })
		c, _ := newTestClient(t, f, WithMaxRetries(0))
		_, err := c.Publish(context.Background(), "q", map[string]int{}, nil)
		require.Error(t, err)
		tc.check(t, err)
		var ae *APIError
		require.ErrorAs(t, err, &ae, "every API error unwraps to *APIError")
		require.Equal(t, tc.status, ae.Status)
		require.Contains(t, err.Error(), ae.Message)
	}
}

func TestConflictAfterRetry(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int, _ seen) reply {
		if n == 1 {
			return reply{drop: true} // the nack was applied, its answer lost
		}
		return reply{status: 409, body: `{"error":"Job is not awaiting an outcome (status: processing)"}`}
	})
	c, _ := newTestClient(t, f)
	err := c.Nack(context.Background(), "job_x_q", NackOptions{})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.AfterRetry)

	// After a 429 the first try is known not to have been applied.
	f = newFake(t, func(n int, _ seen) reply {
		if n == 1 {
			return reply{status: 429, header: map[string]string{"Retry-After": "0"}, body: `{"error":"slow down"}`}
		}
		return reply{status: 409, body: `{"error":"Job is not awaiting an outcome (status: completed)"}`}
	})
	c, _ = newTestClient(t, f)
	err = c.Defer(context.Background(), "job_x_q", DeferOptions{RetryAfter: time.Second})
	require.ErrorAs(t, err, &ce)
	require.False(t, ce.AfterRetry)
}

func TestCallbackBodies(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, s seen) reply {
		return reply{status: 200, body: `{"id":"job_x_q","accepted":true}`}
	})
	c, _ := newTestClient(t, f)
	ctx := context.Background()
	require.NoError(t, c.Ack(ctx, "job_x_q", nil))
	require.NoError(t, c.Ack(ctx, "job_x_q", &AckOptions{Attempt: 2}))
	require.NoError(t, c.Nack(ctx, "job_x_q", NackOptions{}))
	require.NoError(t, c.Nack(ctx, "job_x_q", NackOptions{Retryable: Bool(false), Reason: "bad input", Attempt: 1}))
	require.NoError(t, c.Defer(ctx, "job_x_q", DeferOptions{RetryAfter: 30 * time.Second}))
	require.NoError(t, c.Defer(ctx, "job_x_q", DeferOptions{RetryAfter: 300 * time.Millisecond, Scope: ScopeJob, Reason: "anthropic 429", Attempt: 3}))
	want := []seen{
		{Method: "POST", Path: "/v1/jobs/job_x_q/ack", Body: `{}`},
		{Method: "POST", Path: "/v1/jobs/job_x_q/ack", Body: `{"attempt":2}`},
		{Method: "POST", Path: "/v1/jobs/job_x_q/nack", Body: `{}`},
		{Method: "POST", Path: "/v1/jobs/job_x_q/nack", Body: `{"attempt":1,"reason":"bad input","retryable":false}`},
		{Method: "POST", Path: "/v1/jobs/job_x_q/defer", Body: `{"retryAfter":30}`},
		{Method: "POST", Path: "/v1/jobs/job_x_q/defer", Body: `{"attempt":3,"reason":"anthropic 429","retryAfter":0.3,"scope":"job"}`},
	}
	got := f.requests()
	require.Len(t, got, len(want))
	for i, w := range want {
		require.Equal(t, w.Method, got[i].Method, i)
		require.Equal(t, w.Path, got[i].Path, i)
		require.JSONEq(t, w.Body, got[i].Body, i)
		require.Equal(t, "application/json", got[i].Header.Get("Content-Type"))
	}
}

const jobJSON = `{"id":"job_01j0000000000000000000000a_emails","queue":"emails","status":"completed","attempts":1,
"maxAttempts":5,"deferCount":1,"idempotencyKey":null,"payload":{"n":12345678901234567890},
"scheduledFor":"2026-01-01T00:00:00.000Z","expiresAt":"2026-01-02T00:00:00.000Z","lastError":null,"deadReason":null,
"history":[
 {"attempt":1,"status":"deferred","error":"HTTP 429","webhookStatusCode":429,"timestamp":"2026-01-01T00:00:00.010Z","retryAfter":0.3,"scope":"queue"},
 {"attempt":1,"status":"success","error":null,"webhookStatusCode":200,"timestamp":"2026-01-01T00:00:00.400Z","probe":true}],
"createdAt":"2026-01-01T00:00:00.000Z","completedAt":"2026-01-01T00:00:00.400Z"}`

func TestGetJobDecodesTypes(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int, seen) reply { return reply{status: 200, body: jobJSON} })
	c, _ := newTestClient(t, f)
	j, err := c.GetJob(context.Background(), "job_01j0000000000000000000000a_emails")
	require.NoError(t, err)
	require.Equal(t, "/v1/jobs/job_01j0000000000000000000000a_emails", f.requests()[0].Path)
	require.Equal(t, StatusCompleted, j.Status)
	require.True(t, j.Status.Terminal())
	require.Equal(t, 1, j.Attempts)
	require.Equal(t, 1, j.DeferCount)
	require.Empty(t, j.IdempotencyKey)
	require.Equal(t, `{"n":12345678901234567890}`, string(j.Payload))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, base, j.ScheduledFor)
	require.Equal(t, base.Add(24*time.Hour), j.ExpiresAt)
	require.NotNil(t, j.CompletedAt)
	require.Equal(t, base.Add(400*time.Millisecond), *j.CompletedAt)
	require.Len(t, j.History, 2)
	d := j.History[0]
	require.Equal(t, AttemptDeferred, d.Status)
	require.Equal(t, 429, d.WebhookStatusCode)
	require.Equal(t, 300*time.Millisecond, d.RetryAfter)
	require.Equal(t, ScopeQueue, d.Scope)
	require.Equal(t, "HTTP 429", d.Error)
	s := j.History[1]
	require.True(t, s.Probe)
	require.Equal(t, AttemptSuccess, s.Status)
	require.Zero(t, s.RetryAfter)
	require.Empty(t, s.Error)
}

const queueJSON = `{"name":"emails","mode":"ack","webhookUrl":"http://w/hook","concurrency":5,"rateLimitMax":50,
"rateLimitWindow":60,"maxAttempts":5,"maxDefers":50,"counts":{"pending":3,"processing":1,"awaitingAck":2,"dead":4},
"hold":{"state":"held","until":"2026-01-01T00:01:00.000Z","probeJobId":null,"reason":"HTTP 429"}}`

func TestAdminCalls(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, s seen) reply {
		switch {
		case s.Path == "/v1/queues":
			return reply{status: 200, body: `{"queues":[` + queueJSON + `]}`}
		case strings.HasSuffix(s.Path, "/dead"):
			return reply{status: 200, body: `{"jobs":[` + jobJSON + `],"nextCursor":"abc"}`}
		case strings.HasSuffix(s.Path, "/replay"):
			return reply{status: 200, body: `{"replayed":2}`}
		}
		return reply{status: 200, body: queueJSON}
	})
	c, _ := newTestClient(t, f)
	ctx := context.Background()

	q, err := c.Queue(ctx, "emails")
	require.NoError(t, err)
	require.Equal(t, ModeAck, q.Mode)
	require.Equal(t, time.Minute, q.RateLimitWindow)
	require.Equal(t, QueueCounts{Pending: 3, Processing: 1, AwaitingAck: 2, Dead: 4}, q.Counts)
	require.Equal(t, HoldHeld, q.Hold.State)
	require.Equal(t, time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC), *q.Hold.Until)
	require.Equal(t, "HTTP 429", q.Hold.Reason)
	require.Empty(t, q.Hold.ProbeJobID)

	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	_, err = c.Pause(ctx, "emails", "maintenance")
	require.NoError(t, err)
	_, err = c.Pause(ctx, "emails", "")
	require.NoError(t, err)
	_, err = c.Resume(ctx, "emails")
	require.NoError(t, err)
	page, err := c.DeadJobs(ctx, "emails", &DeadJobsOptions{Limit: 10, Cursor: "c/1"})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, "abc", page.NextCursor)
	_, err = c.DeadJobs(ctx, "emails", nil)
	require.NoError(t, err)
	n, err := c.Replay(ctx, "emails", []string{"job_a_emails", "job_b_emails"})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = c.Replay(ctx, "emails", nil)
	require.Error(t, err)
	_, err = c.ReplayAll(ctx, "emails")
	require.NoError(t, err)

	want := []seen{
		{Method: "GET", Path: "/v1/queues/emails"},
		{Method: "GET", Path: "/v1/queues"},
		{Method: "POST", Path: "/v1/queues/emails/pause", Body: `{"reason":"maintenance"}`},
		{Method: "POST", Path: "/v1/queues/emails/pause", Body: `{}`},
		{Method: "POST", Path: "/v1/queues/emails/resume", Body: `{}`},
		{Method: "GET", Path: "/v1/queues/emails/dead", RawQuery: "cursor=c%2F1&limit=10"},
		{Method: "GET", Path: "/v1/queues/emails/dead"},
		{Method: "POST", Path: "/v1/queues/emails/dead/replay", Body: `{"ids":["job_a_emails","job_b_emails"]}`},
		{Method: "POST", Path: "/v1/queues/emails/dead/replay", Body: `{"all":true}`},
	}
	got := f.requests()
	require.Len(t, got, len(want))
	for i, w := range want {
		require.Equal(t, w.Method, got[i].Method, i)
		require.Equal(t, w.Path, got[i].Path, i)
		require.Equal(t, w.RawQuery, got[i].RawQuery, i)
		require.Equal(t, w.Body, got[i].Body, i)
	}
}

func TestPublishBatch(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int, seen) reply {
		return reply{status: 200, body: `{"jobs":[
 {"id":"job_a_q","status":"pending","createdAt":"2026-01-01T00:00:00.000Z","duplicate":false},
 {"id":"job_b_q","status":"completed","createdAt":"2025-12-31T00:00:00.000Z","duplicate":true}]}`}
	})
	c, _ := newTestClient(t, f)
	c.newKey = func() string { return "gen" }
	res, err := c.PublishBatch(context.Background(), "q", []BatchJob{
		{Payload: json.RawMessage(`{"n": 1}`), Delay: 2 * time.Second},
		{Payload: map[string]int{"n": 2}, IdempotencyKey: "mine"},
	})
	require.NoError(t, err)
	require.Equal(t, `{"jobs":[{"payload":{"n": 1},"idempotencyKey":"gen","delay":2},{"payload":{"n":2},"idempotencyKey":"mine"}]}`, f.requests()[0].Body)
	require.Equal(t, "/v1/queues/q/jobs/batch", f.requests()[0].Path)
	require.Len(t, res, 2)
	require.True(t, res[0].Created)
	require.Equal(t, "gen", res[0].IdempotencyKey)
	require.False(t, res[1].Created)
	require.Equal(t, StatusCompleted, res[1].Status)

	_, err = c.PublishBatch(context.Background(), "q", nil)
	require.Error(t, err)
	_, err = c.PublishBatch(context.Background(), "q", []BatchJob{{Payload: nil}})
	require.Error(t, err)
}

func TestNewValidatesBaseURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "::"} {
		_, err := New(bad, "k")
		require.Error(t, err, bad)
	}
	f := newFake(t, func(int, seen) reply { return reply{status: 200, body: `{"queues":[]}`} })
	c, err := New(f.URL+"/prefix/", "k")
	require.NoError(t, err)
	_, err = c.Queues(context.Background())
	require.NoError(t, err)
	require.Equal(t, "/prefix/v1/queues", f.requests()[0].Path, "a path prefix is kept")

	// Queue names and ids are escaped as path segments.
	f = newFake(t, func(int, seen) reply { return reply{status: 200, body: queueJSON} })
	c, err = New(f.URL, "k", WithUserAgent("billing/1.0"), WithHTTPClient(&http.Client{Timeout: time.Second}))
	require.NoError(t, err)
	_, err = c.Queue(context.Background(), "a/b c")
	require.NoError(t, err)
	require.Equal(t, "/v1/queues/a%2Fb%20c", f.requests()[0].Path)
	require.Equal(t, "billing/1.0", f.requests()[0].Header.Get("User-Agent"))
}

// simpleqd's publish additions travel only when set, and come back on the Job.
func TestPublishFlowKeyAndReplaceKey(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int, _ seen) reply {
		if n == 1 {
			return reply{status: 201, body: createdJSON}
		}
		if n == 2 {
			return reply{status: 200, body: `{"id":"job_01j0000000000000000000000a_emails","status":"pending",` +
				`"createdAt":"2026-01-01T00:00:00.000Z","replaced":true}`}
		}
		return reply{status: 200, body: `{"id":"job_x_emails","queue":"emails","status":"pending","attempts":0,` +
			`"maxAttempts":3,"deferCount":0,"idempotencyKey":null,"payload":{},"scheduledFor":"2026-01-01T00:00:00.000Z",` +
			`"expiresAt":"2026-01-02T00:00:00.000Z","lastError":null,"deadReason":null,"history":[],` +
			`"createdAt":"2026-01-01T00:00:00.000Z","completedAt":null,"priority":2,"flowKey":"tenant-7",` +
			`"replaceKey":"device-7","scheduleId":"nightly"}`}
	})
	c, _ := newTestClient(t, f)
	res, err := c.Publish(context.Background(), "emails", json.RawMessage(`{}`),
		&PublishOptions{IdempotencyKey: "k", FlowKey: "tenant-7", ReplaceKey: "device-7"})
	require.NoError(t, err)
	require.False(t, res.Replaced)
	require.Equal(t, `{"payload":{},"idempotencyKey":"k","flowKey":"tenant-7","replaceKey":"device-7"}`, f.requests()[0].Body)
	res, err = c.Publish(context.Background(), "emails", json.RawMessage(`{}`), &PublishOptions{IdempotencyKey: "k2", ReplaceKey: "device-7"})
	require.NoError(t, err)
	require.True(t, res.Replaced, "the waiting job's payload was replaced")
	j, err := c.GetJob(context.Background(), "job_x_emails")
	require.NoError(t, err)
	require.Equal(t, "tenant-7", j.FlowKey)
	require.Equal(t, "device-7", j.ReplaceKey)
	require.Equal(t, "nightly", j.ScheduleID)
	require.Equal(t, 2, j.Priority)
}
