package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Version is this SDK's version, sent in the User-Agent so operators can tell
// SDK traffic (and its retries) apart in logs.
const Version = "0.1.0"

// Defaults of the retry policy; see WithMaxRetries and WithBackoff.
const (
	// DefaultMaxRetries is how many times a retryable failure is retried
	// after the first try: enough to ride out a daemon restart or a Redis
	// failover, few enough that a caller without a deadline still gets an
	// answer in seconds.
	DefaultMaxRetries = 3
	// DefaultBackoffBase is the wait before the first retry when the server
	// gave no Retry-After; it doubles per retry.
	DefaultBackoffBase = 200 * time.Millisecond
	// DefaultBackoffMax caps the computed wait (not a server's Retry-After).
	DefaultBackoffMax = 5 * time.Second
	// DefaultTimeout bounds one HTTP exchange of the default http.Client, so
	// a hung connection becomes a retryable error instead of a stuck call.
	DefaultTimeout = 30 * time.Second
)

// maxErrorBody bounds how much of an error answer is read: error bodies are
// small, and a misbehaving proxy must not make the client buffer megabytes.
const maxErrorBody = 1 << 20

// Client calls one simpleqd (or SimpleQ) API. It is safe for concurrent use;
// build one per base URL and share it.
type Client struct {
	root       string // scheme://host[/prefix], no trailing slash
	apiKey     string
	http       *http.Client
	maxRetries int
	backoff    time.Duration
	backoffMax time.Duration
	userAgent  string

	// wait sleeps between tries; tests replace it to observe waits.
	wait func(ctx context.Context, d time.Duration) error
	// newKey generates idempotency keys; tests replace it for determinism.
	newKey func() string
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient replaces the http.Client, e.g. to add a proxy, TLS settings
// or instrumentation. Its Timeout bounds each try, not the whole call (use
// the context for that).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithMaxRetries sets how many times a retryable failure (network error, 429,
// 5xx) is retried after the first try; 0 disables retries. Negative values
// mean 0.
func WithMaxRetries(n int) Option {
	return func(c *Client) { c.maxRetries = max(n, 0) }
}

// WithBackoff sets the exponential backoff used when the server gives no
// Retry-After: the n-th retry waits between half and all of base·2ⁿ⁻¹,
// capped at maxWait. The randomness spreads the retries of many clients
// that failed together, so they do not hit a recovering daemon in lockstep.
func WithBackoff(base, maxWait time.Duration) Option {
	return func(c *Client) {
		if base > 0 {
			c.backoff = base
		}
		if maxWait > 0 {
			c.backoffMax = maxWait
		}
	}
}

// WithUserAgent replaces the User-Agent, e.g. to name the calling service.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// New returns a Client for the API at baseURL (e.g. "http://127.0.0.1:8080";
// a path prefix such as "https://gw.example.com/simpleq" is kept) that sends
// apiKey as a Bearer token. An empty apiKey sends no Authorization header,
// for a daemon without auth.apiKeys on loopback.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("simpleq: invalid base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("simpleq: base URL %q must be http(s)://host[:port][/prefix]", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		root:       u.String(),
		apiKey:     apiKey,
		http:       &http.Client{Timeout: DefaultTimeout},
		maxRetries: DefaultMaxRetries,
		backoff:    DefaultBackoffBase,
		backoffMax: DefaultBackoffMax,
		userAgent:  "simpleq-go/" + Version,
		wait:       sleep,
		newKey:     newIdempotencyKey,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c, nil
}

// request is one API call, replayable across retries: body is kept as bytes.
type request struct {
	method string
	path   string // already escaped, starting with /v1/
	query  url.Values
	body   []byte // nil: no body
}

// answer is a successful (2xx) response.
type answer struct {
	status int
	body   []byte
}

// do sends req, retrying network errors, 429 and 5xx, and returns the first
// 2xx answer or the last error (typed for HTTP errors).
func (c *Client) do(ctx context.Context, req request) (answer, error) {
	var lastErr error
	uncertain := false // an earlier try may have been applied
	for try := 0; ; try++ {
		ans, retryAfter, err := c.once(ctx, req)
		if err == nil {
			return ans, nil
		}
		var ce *ConflictError
		if uncertain && errors.As(err, &ce) {
			ce.AfterRetry = true
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status >= 500 {
			uncertain = true // lost answer or server fault: the request may have taken effect
		}
		lastErr = err
		if !retryable(ctx, err) || try >= c.maxRetries {
			return answer{}, lastErr
		}
		wait := retryAfter
		if wait < 0 {
			wait = c.backoffFor(try)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return answer{}, lastErr // waiting would only end in the deadline
		}
		if werr := c.wait(ctx, wait); werr != nil {
			return answer{}, lastErr
		}
	}
}

// once sends one try. retryAfter is the server's Retry-After, or -1.
func (c *Client) once(ctx context.Context, req request) (answer, time.Duration, error) {
	target := c.root + req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		return answer{}, -1, &permanentError{fmt.Errorf("simpleq: %s %s: %w", req.method, req.path, err)}
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return answer{}, -1, fmt.Errorf("simpleq: %s %s: %w", req.method, req.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return answer{}, -1, fmt.Errorf("simpleq: %s %s: reading answer: %w", req.method, req.path, err)
		}
		return answer{status: resp.StatusCode, body: b}, -1, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ra, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if !ok {
		ra = -1
	}
	return answer{}, ra, newAPIError(resp.StatusCode, resp.Header, b)
}

// permanentError marks a failure that no retry can fix (a request that
// cannot even be built).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// retryable: network errors while ctx is live, 429, and 5xx.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
	}
	return true // transport error: connection refused/reset, timeout, EOF
}

// backoffFor is the wait before retry try+1: equal jitter over base·2^try.
func (c *Client) backoffFor(try int) time.Duration {
	d := c.backoffMax
	if try < 30 {
		d = min(c.backoff<<try, c.backoffMax)
	}
	half := d / 2
	return half + rand.N(half+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parseRetryAfter reads delta-seconds (integer or decimal) or an HTTP-date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false
		}
		return secondsToDuration(f), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// secondsToDuration converts wire seconds without overflowing.
func secondsToDuration(f float64) time.Duration {
	if f >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(f * float64(time.Second)))
}

// durationToSeconds renders d as wire seconds (fractions allowed).
func durationToSeconds(d time.Duration) json.Number {
	return json.Number(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
}

// decode unmarshals a 2xx answer, naming the call on failure.
func decode(req request, ans answer, out any) error {
	if err := json.Unmarshal(ans.body, out); err != nil {
		return fmt.Errorf("simpleq: %s %s: unexpected answer: %w", req.method, req.path, err)
	}
	return nil
}

// marshal encodes v without HTML escaping, so strings travel as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// seg escapes one path segment (queue names and job ids).
func seg(s string) string { return url.PathEscape(s) }
