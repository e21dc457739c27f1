// Package webhook is the receiving side of simpleqd (and SimpleQ): an
// http.Handler that verifies a delivery's signature, decodes the envelope
// into a typed Job, and turns the handler's outcome into the answer the
// dispatcher understands.
//
// It exists because every worker needs the same four things and each is easy
// to get subtly wrong by hand:
//
//   - Verify before parsing. The x-simpleq-signature header is an HMAC-SHA256
//     of the raw body bytes; Verify compares in constant time (hmac.Equal) and
//     accepts any of several secrets, so a queue's signingSecret can be rotated
//     without dropping deliveries (deploy the worker with old and new secret,
//     then change the daemon's config, then drop the old secret).
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
