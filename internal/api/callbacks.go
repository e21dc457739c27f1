package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// modeAck is the config mode whose deliveries wait for a callback.
const modeAck = "ack"

// registerCallbackRoutes: the ack-mode outcome callbacks (semantics.md §2).
func (s *Server) registerCallbackRoutes() {
	s.mux.HandleFunc("POST /v1/jobs/{id}/ack", s.callbackHandler(store.CallbackAck))
	s.mux.HandleFunc("POST /v1/jobs/{id}/nack", s.callbackHandler(store.CallbackNack))
	s.mux.HandleFunc("POST /v1/jobs/{id}/defer", s.callbackHandler(store.CallbackDefer))
}

// acceptedJSON answers a callback the store applied.
type acceptedJSON struct {
	ID       string `json:"id"`
	Accepted bool   `json:"accepted"`
}

// callbackHandler serves one callback kind. Order of checks: job id and its
// queue (404), queue mode (409: no callback, whatever its body, means anything
// on a standard-mode queue — but an id that names no job is still 404, as
// semantics.md §2 asks), body (413/415/400), then the store's verdict
// (404/409). An empty body is accepted as {} whatever its content type.
func (s *Server) callbackHandler(kind store.CallbackKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, q, ok := s.lookupJobQueue(w, r)
		if !ok {
			return
		}
		if q.Mode != modeAck {
			if _, err := s.backend.GetJob(r.Context(), q, id); errors.Is(err, store.ErrNotFound) {
				writeError(w, http.StatusNotFound, msgJobNotFound)
				return
			}
			writeError(w, http.StatusConflict, fmt.Sprintf("Queue '%s' is not in ack mode", q.Name))
			return
		}
		fields, ok := s.readObject(w, r, true)
		if !ok {
			return
		}
		v := newValidator()
		cb := v.callback(kind, fields)
		if v.failed() {
			writeValidation(w, v.errs)
			return
		}
		cb.JobID = id
		err := s.backend.Callback(r.Context(), q, cb)
		switch {
		case err == nil:
			s.respond(w, r, http.StatusOK, acceptedJSON{ID: id, Accepted: true})
		case errors.Is(err, store.ErrNotFound):
			writeError(w, http.StatusNotFound, msgJobNotFound)
		case errors.Is(err, store.ErrStaleAttempt):
			msg := "Attempt is no longer current"
			if cb.Attempt > 0 {
				msg = fmt.Sprintf("Attempt %d is no longer current", cb.Attempt)
			}
			writeError(w, http.StatusConflict, msg)
		case errors.Is(err, store.ErrConflict):
			writeError(w, http.StatusConflict, s.conflictMessage(r, q, id))
		default:
			s.backendError(w, r, err)
		}
	}
}

// conflictMessage names the job's current status in the 409, reading it back
// (best effort: the store's conflict error carries no status).
func (s *Server) conflictMessage(r *http.Request, q config.Queue, id string) string {
	const base = "Job is not awaiting an outcome"
	job, err := s.backend.GetJob(r.Context(), q, id)
	if err != nil || job == nil {
		return base
	}
	return fmt.Sprintf("%s (status: %s)", base, job.Status)
}

// callback validates a callback body:
//
//	ack   {attempt?}
//	nack  {retryable? (default true), reason? (≤ 500), attempt?}
//	defer {retryAfter (seconds ≥ 0, required), scope? ("queue" default | "job"), reason? (≤ 500), attempt?}
//
// attempt, when given, is an integer ≥ 1.
func (v *validator) callback(kind store.CallbackKind, fields map[string]json.RawMessage) store.Callback {
	cb := store.Callback{Kind: kind}
	switch kind {
	case store.CallbackAck:
		v.onlyFields(fields, "attempt")
	case store.CallbackNack:
		v.onlyFields(fields, "retryable", "reason", "attempt")
		cb.Retryable = true
		if b, ok := v.optionalBool(fields, "retryable"); ok {
			cb.Retryable = b
		}
		cb.Reason, _ = v.optionalString(fields, "reason", 0, maxReasonLen)
	case store.CallbackDefer:
		v.onlyFields(fields, "retryAfter", "scope", "reason", "attempt")
		if f, ok := v.number(fields, "retryAfter", true, 0, maxRetryAfterSeconds); ok {
			cb.RetryAfter = seconds(f)
		}
		// No scope: the script decides (keys.md §3): the job's lane when it
		// has a flow key and the queue holds lanes, else the queue.
		cb.Scope = store.ScopeDefault
		if raw, ok := given(fields, "scope"); ok {
			var sc string
			if kindOf(raw) != kindString || json.Unmarshal(raw, &sc) != nil {
				v.fieldError("scope", typeMessage(kindString, raw))
			} else if sc := store.Scope(sc); sc == store.ScopeQueue || sc == store.ScopeJob || sc == store.ScopeKey {
				cb.Scope = sc
			} else {
				v.fieldError("scope", fmt.Sprintf("Invalid enum value. Expected 'queue' | 'job', received '%s'", sc))
			}
		}
		cb.Reason, _ = v.optionalString(fields, "reason", 0, maxReasonLen)
	}
	if n, ok := v.optionalInt(fields, "attempt", 1, maxAttemptNumber); ok {
		cb.Attempt = n
	}
	return cb
}
