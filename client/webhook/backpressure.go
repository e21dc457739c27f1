package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StatusOverloaded is the non-standard 529 some providers (Anthropic) send
// when over capacity; simpleqd treats it as backpressure like 429 and 503.
const StatusOverloaded = 529

// IsBackpressure reports whether a status means "rate limited, try later"
// rather than "failed": 429, 503 or 529, the statuses simpleqd holds a
// queue on without spending an attempt.
func IsBackpressure(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == StatusOverloaded
}

// Backpressure is the error a HandlerFunc returns to relay a downstream's
// rate limit: the Handler answers with Status and Retry-After, which holds
// the whole queue for RetryAfter and spends no attempt. Returning a plain
// error instead would answer 500 and burn one of the job's maxAttempts on
// what was not a failure.
type Backpressure struct {
	// Status is 429, 503 or 529.
	Status int
	// RetryAfter is how long the queue should wait; 0 means "now".
	RetryAfter time.Duration
	// Cause is the provider error this relays, if any, for errors.Is/As and logs.
	Cause error
}

// NewBackpressure returns a Backpressure answering status with retryAfter.
// A status that is not 429, 503 or 529 becomes 429, because any other status
// would be read as a failure and spend an attempt; a negative retryAfter
// becomes 0.
func NewBackpressure(status int, retryAfter time.Duration) *Backpressure {
	if !IsBackpressure(status) {
		status = http.StatusTooManyRequests
	}
	return &Backpressure{Status: status, RetryAfter: max(retryAfter, 0)}
}

// BackpressureFrom relays a provider's response: its status and its wait
// (from RetryAfter over the headers and the start of the body), or fallback
// when it gives none (a 529 usually gives none). It returns nil when resp is
// nil or its status is not 429/503/529, so it can guard its own branch:
//
//	if bp := webhook.BackpressureFrom(resp, 10*time.Second); bp != nil {
//		return bp
//	}
//
// It reads at most 64 KiB of the body to look for a retry delay and puts
// those bytes back, so the caller can still read the whole body.
func BackpressureFrom(resp *http.Response, fallback time.Duration) *Backpressure {
	if resp == nil || !IsBackpressure(resp.StatusCode) {
		return nil
	}
	var head []byte
	if resp.Body != nil {
		head, _ = io.ReadAll(io.LimitReader(resp.Body, maxBodyScan))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	}
	d, ok := RetryAfter(resp.Header, head)
	if !ok {
		d = fallback
	}
	bp := NewBackpressure(resp.StatusCode, d)
	bp.Cause = fmt.Errorf("provider answered %s", resp.Status)
	return bp
}

// maxBodyScan is how much of a provider's body RetryAfter callers inspect:
// error bodies carrying a retry delay are small.
const maxBodyScan = 64 << 10

// Error says what is relayed; it names the status and wait, never a body.
func (b *Backpressure) Error() string {
	msg := fmt.Sprintf("backpressure: %d, retry after %s", b.status(), b.RetryAfter)
	if b.Cause != nil {
		msg += ": " + b.Cause.Error()
	}
	return msg
}

// Unwrap returns Cause so errors.Is/As see the provider's error.
func (b *Backpressure) Unwrap() error { return b.Cause }

func (b *Backpressure) status() int {
	if IsBackpressure(b.Status) {
		return b.Status
	}
	return http.StatusTooManyRequests
}

// FormatRetryAfter renders d as a Retry-After value: whole seconds as an
// integer (what RFC 9110 and every client expects), a sub-second remainder
// as a decimal with millisecond precision ("0.25"), which simpleqd honours
// exactly rather than rounding a short provider wait up to a second.
func FormatRetryAfter(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	secs, rem := int64(d/time.Second), d%time.Second
	ms := int64((rem + time.Millisecond - 1) / time.Millisecond) // round up: never ask for less
	if ms == 1000 {
		secs, ms = secs+1, 0
	}
	if ms == 0 {
		return strconv.FormatInt(secs, 10)
	}
	return strconv.FormatInt(secs, 10) + "." + strings.TrimRight(fmt.Sprintf("%03d", ms), "0")
}

// maxWait caps parsed waits so a huge value cannot overflow a Duration;
// anything that large is honoured as "practically forever".
const maxWait = time.Duration(math.MaxInt64)

// RetryAfter extracts a provider's requested wait from its response headers
// and (error) body, trying in order:
//
//   - retry-after-ms: milliseconds (OpenAI), the most precise;
//   - Retry-After: delta-seconds (integer or decimal) or an HTTP-date (a date
//     in the past means 0);
//   - a JSON body with a google.rpc.RetryInfo retryDelay such as "7s" or
//     "0.250s" (Gemini), searched for anywhere in the document because
//     Gemini nests it in error.details[] and sometimes wraps the error in an
//     array.
//
// ok is false when none gives a usable value; the caller then applies its
// own fallback. h and body may be nil.
func RetryAfter(h http.Header, body []byte) (time.Duration, bool) {
	now := time.Now()
	if h != nil {
		if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
				return fromSeconds(f / 1000), true
			}
		}
		if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				if f >= 0 && !math.IsInf(f, 0) {
					return fromSeconds(f), true
				}
			} else if t, err := http.ParseTime(v); err == nil {
				return max(t.Sub(now), 0), true
			}
		}
	}
	if d, ok := retryDelay(body); ok {
		return d, true
	}
	return 0, false
}

// fromSeconds converts non-negative seconds to a Duration without overflow.
func fromSeconds(f float64) time.Duration {
	if f >= float64(maxWait)/float64(time.Second) {
		return maxWait
	}
	return time.Duration(math.Round(f * float64(time.Second)))
}

// retryDelay finds a "retryDelay" string member anywhere in a JSON
// body and parses it as a protobuf Duration ("<seconds>s").
func retryDelay(body []byte) (time.Duration, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || (body[0] != '{' && body[0] != '[') || !bytes.Contains(body, []byte("retryDelay")) {
		return 0, false
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, false
	}
	return findRetryDelay(doc, 0)
}

func findRetryDelay(v any, depth int) (time.Duration, bool) {
	if depth > 16 {
		return 0, false
	}
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["retryDelay"].(string); ok {
			if d, ok := parseProtoDuration(s); ok {
				return d, true
			}
		}
		for _, child := range x {
			if d, ok := findRetryDelay(child, depth+1); ok {
				return d, true
			}
		}
	case []any:
		for _, child := range x {
			if d, ok := findRetryDelay(child, depth+1); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// parseProtoDuration reads a google.protobuf.Duration in its JSON form:
// decimal seconds followed by "s" ("7s", "1.5s", "0.300s").
func parseProtoDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	num, ok := strings.CutSuffix(s, "s")
	if !ok || num == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return fromSeconds(f), true
}
