package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Queues over the API (runtime.md §1): PUT creates or replaces a queue,
// PATCH changes the settings it is given, DELETE removes the queue (and,
// with ?purge=true, its jobs). Settings are named and validated as in the
// file; a queue the file defines is the file's and is refused here.

// QueueAdmin creates, changes and deletes queues over the API. The daemon's
// Backend implements it; a Backend that does not leaves the write routes
// answering 405 for every queue (there is nothing to write to).
type QueueAdmin interface {
	// PutQueue validates spec (every setting given; the rest from the
	// file's defaults) and stores it as the whole definition of name.
	// created is false when it replaced one. Problems are the validation
	// failures, nothing stored.
	PutQueue(ctx context.Context, name string, spec config.QueueSpec) (q config.Queue, created bool, problems []config.FieldProblem, err error)
	// PatchQueue merges patch into name's stored definition (a JSON merge
	// patch: null removes a setting) and stores the result if it is
	// valid. store.ErrNotFound when name has no definition.
	PatchQueue(ctx context.Context, name string, patch config.QueueSpec) (config.Queue, []config.FieldProblem, error)
	// DeleteQueue removes name and, with purge, every job of it; without
	// purge a *store.BusyError refuses a queue with jobs not terminal.
	DeleteQueue(ctx context.Context, name string, purge bool) error
}

// Messages of the queue write routes.
const (
	msgFileQueue = "Queue '%s' is managed by the config file"
	msgDeleting  = "Queue '%s' is being deleted"
	msgQueueBusy = "Queue '%s' has %d jobs that are not terminal (waiting, in flight or awaiting ack); delete with ?purge=true to remove them"
)

func (s *Server) registerQueueWriteRoutes() {
	s.mux.HandleFunc("PUT /v1/queues/{queue}", s.handlePutQueue)
	s.mux.HandleFunc("PATCH /v1/queues/{queue}", s.handlePatchQueue)
	s.mux.HandleFunc("DELETE /v1/queues/{queue}", s.handleDeleteQueue)
}

// queueAdmin returns the backend's QueueAdmin; on false a 405 is written.
func (s *Server) queueAdmin(w http.ResponseWriter) (QueueAdmin, bool) {
	qa, ok := s.backend.(QueueAdmin)
	if !ok {
		writeError(w, http.StatusMethodNotAllowed, "Method not allowed")
	}
	return qa, ok
}

// writableQueue refuses a file queue (409) and a bad name (400). exists
// reports whether an API queue of that name is configured now.
func (s *Server) writableQueue(w http.ResponseWriter, name string) (exists, ok bool) {
	if q, found := s.queue(name); found {
		if !q.Checked {
			writeError(w, http.StatusConflict, fmt.Sprintf(msgFileQueue, name))
			return true, false
		}
		return true, true
	}
	if !config.ValidQueueName(name) {
		ve := newValidationErrors()
		ve.FormErrors = append(ve.FormErrors, fmt.Sprintf("Queue name must match %s", config.QueueNamePattern()))
		writeValidation(w, ve)
		return false, false
	}
	return false, true
}

// existingAPIQueue is writableQueue for PATCH and DELETE, which need the
// queue to exist: 404 otherwise.
func (s *Server) existingAPIQueue(w http.ResponseWriter, name string) bool {
	exists, ok := s.writableQueue(w, name)
	if ok && !exists {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Queue '%s' not found", name))
		return false
	}
	return ok
}

// readSpec reads a request body that is a JSON object of settings.
func (s *Server) readSpec(w http.ResponseWriter, r *http.Request) (config.QueueSpec, bool) {
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return nil, false
	}
	spec := config.QueueSpec{}
	for k, raw := range fields {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil { // validJSON passed: unreachable
			writeFormError(w, msgInvalidJSON)
			return nil, false
		}
		spec[k] = v
	}
	return spec, true
}

// writeProblems answers 400 with one fieldErrors entry per bad setting.
func writeProblems(w http.ResponseWriter, problems []config.FieldProblem) {
	ve := newValidationErrors()
	for _, p := range problems {
		ve.FieldErrors[p.Field] = append(ve.FieldErrors[p.Field], p.Message)
	}
	writeValidation(w, ve)
}

// handlePutQueue is PUT /v1/queues/{queue}: 201 Queue when created, 200
// when it replaced the definition.
func (s *Server) handlePutQueue(w http.ResponseWriter, r *http.Request) {
	qa, ok := s.queueAdmin(w)
	if !ok {
		return
	}
	name := r.PathValue("queue")
	// The body first: an oversized one is a 413 whatever the queue.
	spec, ok := s.readSpec(w, r)
	if !ok {
		return
	}
	if _, ok := s.writableQueue(w, name); !ok {
		return
	}
	q, created, problems, err := qa.PutQueue(r.Context(), name, spec)
	if len(problems) > 0 {
		writeProblems(w, problems)
		return
	}
	if err != nil {
		s.queueWriteError(w, r, name, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	view, err := s.queueView(r.Context(), name, q)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	s.respond(w, r, status, view)
}

// handlePatchQueue is PATCH /v1/queues/{queue}: only the settings given
// change (null puts one back to the file's default) → 200 Queue.
func (s *Server) handlePatchQueue(w http.ResponseWriter, r *http.Request) {
	qa, ok := s.queueAdmin(w)
	if !ok {
		return
	}
	name := r.PathValue("queue")
	patch, ok := s.readSpec(w, r)
	if !ok {
		return
	}
	if !s.existingAPIQueue(w, name) {
		return
	}
	q, problems, err := qa.PatchQueue(r.Context(), name, patch)
	if len(problems) > 0 {
		writeProblems(w, problems)
		return
	}
	if err != nil {
		s.queueWriteError(w, r, name, err)
		return
	}
	s.respondQueue(w, r, name, q)
}

// handleDeleteQueue is DELETE /v1/queues/{queue}[?purge=true] → 204.
func (s *Server) handleDeleteQueue(w http.ResponseWriter, r *http.Request) {
	qa, ok := s.queueAdmin(w)
	if !ok {
		return
	}
	name := r.PathValue("queue")
	// No body, or {}: read all the same, so that an oversized one is a 413
	// like on every route, never read past the limit.
	fields, ok := s.readObject(w, r, true)
	if !ok {
		return
	}
	if !s.existingAPIQueue(w, name) {
		return
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeFormError(w, "Invalid query string")
		return
	}
	v := newValidator()
	v.onlyFields(fields)
	purge := false
	if raw, given := single(v, query, "purge"); given {
		switch raw {
		case "true", "1":
			purge = true
		case "false", "0":
		default:
			v.fieldError("purge", "Expected true or false, received '"+truncate(raw, 32)+"'")
		}
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	if err := qa.DeleteQueue(r.Context(), name, purge); err != nil {
		s.queueWriteError(w, r, name, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// queueWriteError maps the queue write errors to their answers.
func (s *Server) queueWriteError(w http.ResponseWriter, r *http.Request, name string, err error) {
	var busy *store.BusyError
	switch {
	case errors.As(err, &busy):
		writeError(w, http.StatusConflict, fmt.Sprintf(msgQueueBusy, name, busy.Jobs))
	case errors.Is(err, store.ErrDefDeleting):
		writeError(w, http.StatusConflict, fmt.Sprintf(msgDeleting, name))
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("Queue '%s' not found", name))
	case errors.Is(err, ErrFileQueue):
		writeError(w, http.StatusConflict, fmt.Sprintf(msgFileQueue, name))
	default:
		s.backendError(w, r, err)
	}
}

// ErrFileQueue is returned by a QueueAdmin asked to write a queue the
// file defines (the API's own check may have seen a configuration a
// moment old).
var ErrFileQueue = errors.New("queue is managed by the config file")
