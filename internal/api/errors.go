package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/store"
)

// Fixed error messages of the wire contract.
const (
	msgJobNotFound  = "Job not found"
	msgInternal     = "internal error"
	msgUnavailable  = "Service unavailable"
	msgTooLarge     = "Payload too large"
	msgNotJSON      = "Content-Type must be application/json"
	msgInvalidJSON  = "Invalid JSON body"
	msgNotAnObject  = "Request body must be a JSON object"
	msgRetryAfter   = "1" // seconds a client should wait after a 503
	contentTypeJSON = "application/json"
)

// msgNotReplicated is the 503 of redis.durability: replicated when no
// replica confirmed the write in time. The master may hold it, so a client
// that retries (with its idempotencyKey) gets the same job.
const msgNotReplicated = "Service unavailable: no Redis replica confirmed the write in time"

// errorBody is every error response: {"error": <string or validationErrors>}.
type errorBody struct {
	Error any `json:"error"`
}

// writeJSON encodes v as the response body with the given status. HTML
// escaping is off so strings (and stored payloads) are emitted as they are.
// It reports whether v could be encoded; if not, nothing was written.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := encodeJSON(v)
	if err != nil {
		return err
	}
	writeEncoded(w, status, body)
	return nil
}

// encodeJSON is the API's one JSON encoding: HTML escaping off, a trailing
// newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Header values shared by every JSON answer (never modified once set).
var (
	jsonContentType = []string{contentTypeJSON}
	noSniff         = []string{"nosniff"}
)

// writeEncoded writes body, JSON already encoded (ending in a newline, as
// json.Encoder leaves it), with the headers of every JSON answer. The header
// keys are canonical already, so they are set without Header.Set's work.
func writeEncoded(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["X-Content-Type-Options"] = noSniff
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// respond writes a success body; an encoding failure (e.g. a corrupt stored
// payload) is a server fault and becomes a logged 500.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, status int, v any) {
	if err := writeJSON(w, status, v); err != nil {
		s.internalError(w, r, err)
	}
}

// writeError writes {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	_ = writeJSON(w, status, errorBody{Error: msg})
}

// writeValidation writes the 400 {"error":{"formErrors":[...],"fieldErrors":{...}}}.
func writeValidation(w http.ResponseWriter, ve *validationErrors) {
	_ = writeJSON(w, http.StatusBadRequest, errorBody{Error: ve})
}

// writeFormError writes a 400 validation body with a single form-level error.
func writeFormError(w http.ResponseWriter, msg string) {
	ve := newValidationErrors()
	ve.FormErrors = append(ve.FormErrors, msg)
	writeValidation(w, ve)
}

// writeUnavailable writes the 503 a client should retry after a second.
func writeUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", msgRetryAfter)
	writeError(w, http.StatusServiceUnavailable, msgUnavailable)
}

// backendError answers a Backend failure that the handler has no specific
// meaning for: 503 (with Retry-After) when Redis is unreachable or the call
// timed out, nothing useful when the client has gone, otherwise a logged 500.
// Handlers map ErrNotFound/ErrConflict/ErrStaleAttempt themselves first,
// because their messages depend on the resource.
func (s *Server) backendError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotReplicated):
		// Before ErrUnavailable, which it wraps: the body says what
		// happened, so an operator reading a client's log does not go
		// looking for a Redis that is down when it is its replica.
		s.log.Warn("write not confirmed by a replica",
			zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set("Retry-After", msgRetryAfter)
		writeError(w, http.StatusServiceUnavailable, msgNotReplicated)
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("backend unavailable",
			zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		writeUnavailable(w)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; the answer will not be read.
		s.log.Debug("request canceled by client",
			zap.String("method", r.Method), zap.String("path", r.URL.Path))
		writeUnavailable(w)
	default:
		s.internalError(w, r, err)
	}
}

// internalError logs err and answers 500 {"error":"internal error"}; the
// details stay in the log.
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("internal error serving request",
		zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	writeError(w, http.StatusInternalServerError, msgInternal)
}
