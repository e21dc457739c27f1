package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// PublishOptions are the optional members of a publish.
type PublishOptions struct {
	// IdempotencyKey makes a repeat publish on the same queue return the
	// first job instead of creating another (for as long as the daemon
	// retains it, 72 h by default). Give your own (an order id) to make
	// publishes idempotent across processes and restarts; when empty the
	// client generates one per Publish call, which protects only that call's
	// own retries.
	IdempotencyKey string
	// Delay postpones the first delivery (0 to 24 h, millisecond precision
	// on the daemon).
	Delay time.Duration
	// Priority, 0 (default) to 9, is simpleqd's: due jobs are delivered
	// highest priority first, and retries and defers keep it. SimpleQ's
	// hosted service does not know it.
	Priority int
	// FlowKey puts the job in that key's lane (simpleqd's flow keys,
	// docs/flow-keys.md): its own limits, its own hold on a 429, a fair
	// share of the queue. 1 to 128 printable characters; "" for none.
	FlowKey string
	// ReplaceKey makes a publish replace the payload of the queue's job
	// with that key while it was never delivered, instead of adding a job
	// (simpleqd, docs/control.md); "" for none.
	ReplaceKey string
}

// PublishResult is the answer to a publish.
type PublishResult struct {
	// ID is the job's id, for GetJob and callbacks.
	ID string
	// Status is the job's status when answered: pending for a new job.
	Status JobStatus
	// CreatedAt is the job's publish time (the first publish's, for a repeat).
	CreatedAt time.Time
	// Created is true when this call created the job, false when the
	// idempotency key was already known and the existing job is returned.
	// A retry whose first try's answer was lost still reports true for a
	// generated key: nobody else can have used it.
	Created bool
	// IdempotencyKey is the key sent, the caller's or the generated one.
	IdempotencyKey string
	// Replaced is true when a ReplaceKey publish replaced the payload of
	// a job that was waiting, whose id ID is.
	Replaced bool
}

// BatchJob is one job of PublishBatch.
type BatchJob struct {
	// Payload is the job's JSON object: a json.RawMessage or []byte (sent
	// byte for byte) or any value encoding/json turns into an object.
	Payload any
	// IdempotencyKey is as in PublishOptions; "" generates one.
	IdempotencyKey string
	// Delay is as in PublishOptions.
	Delay time.Duration
	// Priority is as in PublishOptions.
	Priority int
	// FlowKey is as in PublishOptions.
	FlowKey string
	// ReplaceKey is as in PublishOptions.
	ReplaceKey string
}

// Publish adds one job to queue. payload must encode to a JSON object; a
// json.RawMessage (or []byte holding JSON) is sent byte for byte, so key
// order and big integers survive to the webhook; anything else is encoded
// with encoding/json. It retries
// like every call, reusing one idempotency key, so a retried publish never
// creates a second job.
func (c *Client) Publish(ctx context.Context, queue string, payload any, opts *PublishOptions) (*PublishResult, error) {
	var o PublishOptions
	if opts != nil {
		o = *opts
	}
	raw, err := encodePayload(payload)
	if err != nil {
		return nil, err
	}
	key, generated := o.IdempotencyKey, false
	if key == "" {
		key, generated = c.newKey(), true
	}
	body := jobBody(raw, key, o.Delay, o.Priority, o.FlowKey, o.ReplaceKey)
	req := request{method: http.MethodPost, path: "/v1/queues/" + seg(queue) + "/jobs", body: body}
	ans, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var out publishedWire
	if err := decode(req, ans, &out); err != nil {
		return nil, err
	}
	return &PublishResult{ID: out.ID, Status: out.Status, CreatedAt: out.CreatedAt,
		Created: ans.status == http.StatusCreated || generated, IdempotencyKey: key, Replaced: out.Replaced}, nil
}

// PublishBatch adds up to 1,000 jobs to queue in one request (a simpleqd
// addition; SimpleQ has no batch endpoint). Validation is all-or-nothing:
// one invalid job refuses the whole batch with a *ValidationError naming it
// ("jobs.3.payload"). Results are in input order. Jobs without an
// idempotency key get a generated one, reused on retries.
func (c *Client) PublishBatch(ctx context.Context, queue string, jobs []BatchJob) ([]PublishResult, error) {
	if len(jobs) == 0 {
		return nil, errors.New("simpleq: PublishBatch needs at least one job")
	}
	keys := make([]string, len(jobs))
	generated := make([]bool, len(jobs))
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	for i, j := range jobs {
		raw, err := encodePayload(j.Payload)
		if err != nil {
			return nil, fmt.Errorf("simpleq: job %d: %w", i, err)
		}
		keys[i] = j.IdempotencyKey
		if keys[i] == "" {
			keys[i], generated[i] = c.newKey(), true
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(jobBody(raw, keys[i], j.Delay, j.Priority, j.FlowKey, j.ReplaceKey))
	}
	buf.WriteString(`]}`)
	req := request{method: http.MethodPost, path: "/v1/queues/" + seg(queue) + "/jobs/batch", body: buf.Bytes()}
	ans, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var out struct {
		Jobs []struct {
			publishedWire
			Duplicate bool `json:"duplicate"`
		} `json:"jobs"`
	}
	if err := decode(req, ans, &out); err != nil {
		return nil, err
	}
	if len(out.Jobs) != len(jobs) {
		return nil, fmt.Errorf("simpleq: batch answer has %d jobs for %d sent", len(out.Jobs), len(jobs))
	}
	res := make([]PublishResult, len(jobs))
	for i, j := range out.Jobs {
		res[i] = PublishResult{ID: j.ID, Status: j.Status, CreatedAt: j.CreatedAt,
			Created: !j.Duplicate || generated[i], IdempotencyKey: keys[i], Replaced: j.Replaced}
	}
	return res, nil
}

// publishedWire is {id, status, createdAt}.
type publishedWire struct {
	ID        string    `json:"id"`
	Status    JobStatus `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
	Replaced  bool      `json:"replaced"`
}

// GetJob reads a job with its full history. An unknown or purged id is a
// *NotFoundError.
func (c *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	req := request{method: http.MethodGet, path: "/v1/jobs/" + seg(id)}
	ans, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	var j Job
	if err := decode(req, ans, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// AckOptions are the optional members of an ack.
type AckOptions struct {
	// Attempt, when not 0, names the delivery this ack reports on; the
	// daemon refuses it (409) if the job has been redelivered since, so a
	// worker that was too slow cannot complete a newer delivery's work.
	Attempt int
}

// NackOptions are the members of a nack.
type NackOptions struct {
	// Retryable false dead-letters the job at once (deadReason "nacked");
	// nil or true makes it a failure that is retried with backoff.
	Retryable *bool
	// Reason (≤ 500 characters) is recorded as the job's lastError.
	Reason string
	// Attempt is as in AckOptions.
	Attempt int
}

// DeferOptions are the members of a defer.
type DeferOptions struct {
	// RetryAfter is how long to wait, as the provider asked; 0 means "now".
	// It is sent in seconds with millisecond precision.
	RetryAfter time.Duration
	// Scope is ScopeQueue (the default when empty: the whole queue waits,
	// right for a provider's rate limit) or ScopeJob (only this job waits).
	Scope Scope
	// Reason (≤ 500 characters) is recorded in the job's history.
	Reason string
	// Attempt is as in AckOptions.
	Attempt int
}

// Bool returns a pointer to b, for NackOptions.Retryable.
func Bool(b bool) *bool { return &b }

// Ack reports that an ack-mode job's work succeeded: the job completes (and
// a probe's ack reopens its queue). Acking a completed job succeeds again,
// so retries are harmless. A standard-mode queue, or a job not awaiting an
// outcome, answers *ConflictError.
func (c *Client) Ack(ctx context.Context, id string, opts *AckOptions) error {
	m := map[string]any{}
	if opts != nil && opts.Attempt != 0 {
		m["attempt"] = opts.Attempt
	}
	return c.callback(ctx, id, "ack", m)
}

// Nack reports that an ack-mode job's work failed: retried with backoff
// (spending an attempt) or, with Retryable false, dead at once. Use Defer,
// not Nack, for a provider's rate limit: a defer spends no attempt.
func (c *Client) Nack(ctx context.Context, id string, opts NackOptions) error {
	m := map[string]any{}
	if opts.Retryable != nil {
		m["retryable"] = *opts.Retryable
	}
	if opts.Reason != "" {
		m["reason"] = opts.Reason
	}
	if opts.Attempt != 0 {
		m["attempt"] = opts.Attempt
	}
	return c.callback(ctx, id, "nack", m)
}

// Defer reports backpressure for an ack-mode job: the queue (or, with
// ScopeJob, only the job) waits RetryAfter and the job is redelivered
// without spending an attempt. It succeeds even when the defer dead-letters
// the job (defer budget or lifetime exhausted); GetJob tells.
func (c *Client) Defer(ctx context.Context, id string, opts DeferOptions) error {
	// A negative wait is sent as is: the daemon's *ValidationError says
	// what is wrong in the same shape as every other invalid field.
	m := map[string]any{"retryAfter": durationToSeconds(opts.RetryAfter.Round(time.Millisecond))}
	if opts.Scope != "" {
		m["scope"] = opts.Scope
	}
	if opts.Reason != "" {
		m["reason"] = opts.Reason
	}
	if opts.Attempt != 0 {
		m["attempt"] = opts.Attempt
	}
	return c.callback(ctx, id, "defer", m)
}

func (c *Client) callback(ctx context.Context, id, kind string, m map[string]any) error {
	body, err := marshal(m)
	if err != nil {
		return fmt.Errorf("simpleq: %s: %w", kind, err)
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs/" + seg(id) + "/" + kind, body: body})
	return err
}

// encodePayload returns the payload's JSON: a json.RawMessage or []byte as
// it is (after checking it is valid JSON), anything else through encoding/json.
// Whether it is an object is the daemon's to judge (a *ValidationError).
func encodePayload(p any) (json.RawMessage, error) {
	switch v := p.(type) {
	case nil:
		return nil, errors.New("simpleq: payload is required")
	case json.RawMessage:
		return rawPayload(v)
	case []byte: // JSON read from somewhere; encoding/json would send it as a base64 string
		return rawPayload(v)
	}
	b, err := marshal(p)
	if err != nil {
		return nil, fmt.Errorf("simpleq: encoding payload: %w", err)
	}
	return b, nil
}

func rawPayload(b []byte) (json.RawMessage, error) {
	if !json.Valid(b) {
		return nil, errors.New("simpleq: payload is not valid JSON")
	}
	return bytes.TrimSpace(b), nil
}

// jobBody renders {"payload":…,"idempotencyKey":…,"delay":…,"priority":…,
// "flowKey":…,"replaceKey":…} with the payload spliced in as given; a zero
// priority and empty keys are left out, so a publish without simpleqd's
// additions is exactly SimpleQ's.
func jobBody(payload json.RawMessage, key string, delay time.Duration, priority int, flowKey, replaceKey string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"payload":`)
	b.Write(payload)
	if key != "" {
		k, _ := marshal(key)
		b.WriteString(`,"idempotencyKey":`)
		b.Write(k)
	}
	if delay != 0 { // a negative delay is the daemon's to refuse (*ValidationError)
		b.WriteString(`,"delay":`)
		b.WriteString(string(durationToSeconds(delay.Round(time.Millisecond))))
	}
	if priority != 0 { // out of 0..9 is the daemon's to refuse (*ValidationError)
		b.WriteString(`,"priority":`)
		b.WriteString(strconv.Itoa(priority))
	}
	if flowKey != "" {
		k, _ := marshal(flowKey)
		b.WriteString(`,"flowKey":`)
		b.Write(k)
	}
	if replaceKey != "" {
		k, _ := marshal(replaceKey)
		b.WriteString(`,"replaceKey":`)
		b.Write(k)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// newIdempotencyKey returns "sqgo_" and 128 random bits in hex: unique
// without coordination, well under the 255-character limit, and marked as
// generated by this SDK for whoever reads a job's idempotencyKey.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "sqgo_" + hex.EncodeToString(b[:])
}
