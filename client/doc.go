// Package client is the Go SDK for simpleqd's HTTP API, which is SimpleQ's
// public wire format: the same code talks to SimpleQ or to a self-hosted
// simpleqd by changing only the base URL.
//
// It exists so Go publishers and ack-mode workers do not each re-implement
// the parts that are easy to get wrong:
//
//   - Safe retries. Network errors, 429 and 5xx answers are retried with
//     exponential backoff and jitter, honouring Retry-After, at most
//     MaxRetries times (default 3) and never past the context's deadline.
//     4xx answers are never retried: the request itself is wrong.
//   - No duplicate jobs from retries. A retry of a publish whose answer was
//     lost could create the job twice. Publish therefore sends an
//     idempotency key on every call, generating one when the caller gives
//     none, and reuses it for its own retries, so the daemon answers the
//     retry with the job the first try created.
//   - Typed answers. Jobs, history entries and queues are structs with
//     time.Time and time.Duration fields (the wire uses ISO-8601 strings and
//     float seconds); errors are typed (*ValidationError, *AuthError,
//     *NotFoundError, *ConflictError, *RateLimitedError, *UnavailableError,
//     all unwrapping to *APIError) so callers branch with errors.As instead
//     of parsing bodies.
//   - Context everywhere: every call takes a context.Context that bounds it
//     and its retries.
//
// The receiving side (signature verification, envelope decoding, relaying a
// provider's backpressure) is package webhook, next to this one. Both depend
// on the standard library only, so they can move to their own module without
// pulling in the daemon.
//
// Minimal publisher:
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("SIMPLEQ_API_KEY"))
//	if err != nil { ... }
//	res, err := c.Publish(ctx, "emails", map[string]any{"to": "a@b.com"}, nil)
//
// Ack-mode worker, after the work: c.Ack(ctx, job.ID, &client.AckOptions{Attempt: job.Attempt}),
// or on a provider's 429: c.Defer(ctx, job.ID, client.DeferOptions{RetryAfter: wait, Attempt: job.Attempt}).
package client
