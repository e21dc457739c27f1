// Package webhook is the receiving side of simpleqd (and SimpleQ): an
// http.Handler that verifies a delivery's signature, decodes the envelope
// into a typed Job, and turns the handler's outcome into the answer the
// dispatcher understands.
//
// It exists because every worker needs the same four things and each is easy
// to get subtly wrong by hand:
//
//   - Verify before parsing, and refuse replays. simpleqd signs every
//     delivery twice: x-simpleq-signature (SimpleQ's, an HMAC-SHA256 of the
//     raw body under the queue's current secret) and the Standard Webhooks
//     headers (webhook-id, webhook-timestamp, webhook-signature: an HMAC of
//     id.timestamp.body under every active secret). Verifier checks the
//     latter, timestamp within a tolerance (DefaultTolerance, five minutes)
//     included, so a captured delivery cannot be sent again later; it
//     compares in constant time and accepts any of several secrets, so a
//     queue's secret rotates without dropping deliveries (docs/operations.md:
//     give the worker the new secret beside the old, then list it on the
//     queue, then promote it, then drop the old). x-simpleq-signature alone
//     is accepted only with Verifier.AllowUntimestamped; Verify checks it
//     on its own for callers that need it.
//   - Keep the payload's bytes. Job.Payload is a json.RawMessage holding the
//     publisher's exact JSON, so big integers and key order survive.
//   - Relay backpressure instead of failing. A handler that hit a provider's
//     rate limit returns a *Backpressure (BackpressureFrom, NewBackpressure);
//     the Handler answers with 429/503/529 and Retry-After, which holds the
//     whole queue without spending an attempt. Any other error is a 500 and
//     spends one.
//   - Read provider wait times in all the shapes providers send them:
//     RetryAfter understands Retry-After (seconds or HTTP-date), OpenAI's
//     retry-after-ms and Gemini's RetryInfo retryDelay in the JSON body.
//
// Standard mode: do the work inside fn and return nil (200), a *Backpressure
// or an error. Ack mode: start the work in a goroutine with a context that
// outlives the request (context.WithoutCancel(ctx)), return nil at once so
// the 200 goes out, and report the outcome with the client package's Ack,
// Nack or Defer.
//
// The package depends on the standard library only, so it can be vendored or
// split into its own module without pulling in the daemon.
package webhook
