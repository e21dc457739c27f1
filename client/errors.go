package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// APIError is an HTTP error answer of the API. Every typed error below
// unwraps to it, so errors.As(err, &apiErr) catches all of them and a caller
// that only cares about the status needs one branch.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the body's "error" string, a summary of a validation
	// error, or (for a non-JSON answer, e.g. from a proxy) the start of the
	// body.
	Message string
}

// Error reads "simpleq: <status>: <message>".
func (e *APIError) Error() string {
	return fmt.Sprintf("simpleq: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// ValidationError is a 400: the request was refused as invalid. It carries
// the API's {formErrors, fieldErrors} so a caller can show or log exactly
// what was wrong; retrying the same request cannot succeed.
type ValidationError struct {
	APIError
	// FormErrors are problems with the request as a whole (e.g. not JSON).
	FormErrors []string
	// FieldErrors maps a field path ("payload", "jobs.3.delay") to its problems.
	FieldErrors map[string][]string
}

// Unwrap returns the embedded *APIError.
func (e *ValidationError) Unwrap() error { return &e.APIError }

// AuthError is a 401: the API key is missing or not accepted.
type AuthError struct{ APIError }

// Unwrap returns the embedded *APIError.
func (e *AuthError) Unwrap() error { return &e.APIError }

// NotFoundError is a 404: an unknown queue ("Queue '<name>' not found") or
// job ("Job not found"; also after retention purged it).
type NotFoundError struct{ APIError }

// Unwrap returns the embedded *APIError.
func (e *NotFoundError) Unwrap() error { return &e.APIError }

// ConflictError is a 409: the job is not in a state that accepts the
// request (a callback for a job that is not awaiting an outcome, a callback
// on a standard-mode queue, or a stale attempt).
type ConflictError struct {
	APIError
	// AfterRetry is true when an earlier try of this call may have taken
	// effect (its answer was lost, or was a 5xx). The conflict can then be
	// that try's own doing: a nack or defer that was applied makes its retry
	// conflict. A retry after a 429 does not set it: a 429 was not applied.
	AfterRetry bool
}

// Unwrap returns the embedded *APIError.
func (e *ConflictError) Unwrap() error { return &e.APIError }

// RateLimitedError is a 429 from the API itself, after the client's retries.
type RateLimitedError struct {
	APIError
	// RetryAfter is the server's Retry-After (0 when absent).
	RetryAfter time.Duration
}

// Unwrap returns the embedded *APIError.
func (e *RateLimitedError) Unwrap() error { return &e.APIError }

// UnavailableError is a 502, 503 or 504 after the client's retries: the
// daemon cannot reach Redis, or a proxy cannot reach the daemon. The request
// may be repeated later.
type UnavailableError struct {
	APIError
	// RetryAfter is the server's Retry-After (0 when absent).
	RetryAfter time.Duration
}

// Unwrap returns the embedded *APIError.
func (e *UnavailableError) Unwrap() error { return &e.APIError }

// newAPIError builds the typed error for an error answer.
func newAPIError(status int, h http.Header, body []byte) error {
	base := APIError{Status: status}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	var validation struct {
		FormErrors  []string            `json:"formErrors"`
		FieldErrors map[string][]string `json:"fieldErrors"`
	}
	isValidation := false
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var s string
		switch {
		case json.Unmarshal(env.Error, &s) == nil:
			base.Message = s
		case json.Unmarshal(env.Error, &validation) == nil:
			isValidation = true
			base.Message = summarize(validation.FormErrors, validation.FieldErrors)
		default:
			base.Message = string(env.Error)
		}
	} else {
		base.Message = snippet(body)
	}
	if base.Message == "" {
		base.Message = http.StatusText(status)
	}
	retryAfter, _ := parseRetryAfter(h.Get("Retry-After"), time.Now())
	switch {
	case status == http.StatusBadRequest:
		ve := &ValidationError{APIError: base, FormErrors: validation.FormErrors, FieldErrors: validation.FieldErrors}
		if !isValidation {
			ve.FormErrors = []string{base.Message}
		}
		if ve.FormErrors == nil {
			ve.FormErrors = []string{}
		}
		if ve.FieldErrors == nil {
			ve.FieldErrors = map[string][]string{}
		}
		return ve
	case status == http.StatusUnauthorized:
		return &AuthError{base}
	case status == http.StatusNotFound:
		return &NotFoundError{base}
	case status == http.StatusConflict:
		return &ConflictError{APIError: base}
	case status == http.StatusTooManyRequests:
		return &RateLimitedError{APIError: base, RetryAfter: retryAfter}
	case status == http.StatusBadGateway, status == http.StatusServiceUnavailable, status == http.StatusGatewayTimeout:
		return &UnavailableError{APIError: base, RetryAfter: retryAfter}
	}
	return &base
}

// summarize renders validation errors in one line, fields sorted.
func summarize(form []string, fields map[string][]string) string {
	parts := append([]string(nil), form...)
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		parts = append(parts, k+": "+strings.Join(fields[k], ", "))
	}
	if len(parts) == 0 {
		return "invalid request"
	}
	return strings.Join(parts, "; ")
}

// snippet is the start of a non-JSON body, valid UTF-8, for error messages.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}
