package hold

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// IsBackpressure reports whether a webhook status means "rate limited" rather
// than "failed": 429 Too Many Requests, 503 Service Unavailable, 529 Overloaded.
func IsBackpressure(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == 529
}

// maxSeconds caps parsing at ~292 years so a huge value cannot overflow a
// Duration; anything that large is honoured as "practically forever".
const maxSeconds = float64(math.MaxInt64/int64(time.Second)) - 1

// ParseRetryAfter reads a Retry-After header value: delta-seconds (an integer,
// or a decimal as some providers send), or an HTTP-date. It is honoured
// exactly: no minimum, no ceiling. ok is false when the value is missing or
// unparsable, and the caller uses the queue's defaultRetryAfter. A date in the
// past means "now" (0).
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, false
		}
		if f > maxSeconds {
			f = maxSeconds
		}
		return time.Duration(f * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// ParseRetryAfterValue reads a Retry-After header value like ParseRetryAfter
// but leaves an HTTP-date absolute: at is the date (and d is 0), so the wait
// can be computed on Redis' clock, the one clock every daemon shares, rather
// than on this daemon's. For delta-seconds, at is zero and d the wait.
func ParseRetryAfterValue(value string) (d time.Duration, at time.Time, ok bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, time.Time{}, false
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		d, ok := ParseRetryAfter(v, time.Time{})
		return d, time.Time{}, ok
	}
	if t, err := http.ParseTime(v); err == nil {
		return 0, t, true
	}
	return 0, time.Time{}, false
}
