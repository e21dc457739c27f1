package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// maxResponse bounds what the CLI reads of one answer: a page of 1,000 dead
// jobs with 1 MiB payloads is the largest legitimate one.
const maxResponse = 2 << 30

// apiClient is the CLI's small HTTP helper. The SDK in package client is
// not used on purpose: it decodes answers into structs and retries, while
// --json must print the API's bytes as they came and an operator command
// should report a failure at once rather than retry behind the operator's
// back.
type apiClient struct {
	base *url.URL
	key  string
	http *http.Client
}

// APIError is a non-2xx answer, with the message of its {"error": ...} body.
type APIError struct {
	Status int
	// Message is the error string, or for a validation failure "invalid
	// request".
	Message string
	// FormErrors and FieldErrors come from a 400's validation body; each
	// field error is "field: message".
	FormErrors  []string
	FieldErrors []string
}

func (e *APIError) Error() string { return e.Describe() }

// Describe renders the error for an operator: the message and status, then
// one indented line per validation problem.
func (e *APIError) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (HTTP %d)", e.Message, e.Status)
	switch e.Status {
	case http.StatusUnauthorized:
		fmt.Fprintf(&b, "; set %s to one of the daemon's auth.apiKeys", EnvAPIKey)
	}
	for _, f := range e.FormErrors {
		b.WriteString("\n  " + f)
	}
	for _, f := range e.FieldErrors {
		b.WriteString("\n  " + f)
	}
	return b.String()
}

// do sends one request. body, when not nil, is sent as JSON. A non-2xx
// answer is returned as *APIError; the raw body is returned either way.
func (a *apiClient) do(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, int, error) {
	// path is escaped already (url.PathEscape of each name): a flow key's
	// "/" must reach the API as %2F, inside its one path segment.
	u := *a.base
	u.RawPath = strings.TrimRight(a.base.EscapedPath(), "/") + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, 0, fmt.Errorf("build request: %w", err)
	}
	u.Path = p
	if query != nil {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, 0, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, 0, fmt.Errorf("cannot reach simpleqd at %s: %w", a.base.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("read answer from %s: %w", a.base.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return raw, resp.StatusCode, decodeError(resp.StatusCode, raw)
	}
	return raw, resp.StatusCode, nil
}

// get and post decode a 2xx answer into out (when not nil) and return the
// raw body for --json.
func (a *apiClient) get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	raw, _, err := a.do(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	return raw, decodeInto(raw, out)
}

func (a *apiClient) post(ctx context.Context, path string, body []byte, out any) ([]byte, int, error) {
	raw, status, err := a.do(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return nil, status, err
	}
	return raw, status, decodeInto(raw, out)
}

func decodeInto(raw []byte, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("unexpected answer from the API (is --url a simpleqd daemon?): %w", err)
	}
	return nil
}

// decodeError reads the contract's error body: {"error": "message"} or
// {"error": {"formErrors": [...], "fieldErrors": {"field": [...]}}}. Anything
// else (a proxy's HTML page) is summarised by its status.
func decodeError(status int, raw []byte) *APIError {
	e := &APIError{Status: status, Message: http.StatusText(status)}
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &body) != nil || len(body.Error) == 0 {
		return e
	}
	var msg string
	if json.Unmarshal(body.Error, &msg) == nil {
		e.Message = msg
		return e
	}
	var ve struct {
		FormErrors  []string            `json:"formErrors"`
		FieldErrors map[string][]string `json:"fieldErrors"`
	}
	if json.Unmarshal(body.Error, &ve) == nil {
		e.Message = "invalid request"
		e.FormErrors = ve.FormErrors
		fields := make([]string, 0, len(ve.FieldErrors))
		for f := range ve.FieldErrors {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			for _, m := range ve.FieldErrors[f] {
				e.FieldErrors = append(e.FieldErrors, f+": "+m)
			}
		}
	}
	return e
}
