package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
	"github.com/simpleq/simpleqd/internal/wiretime"
)

// Canceller is what the cancel endpoints need from the backend (control.md
// §1). It is separate from Backend so that test backends without it keep
// compiling; a backend without it answers the cancel routes with 501.
type Canceller interface {
	// Cancel makes one job dead / cancelled and returns it as it is now.
	// It returns store.ErrNotFound, or store.ErrConflict for a job that is
	// completed or dead already. A delivery under way is aborted by the
	// daemon holding it, whichever daemon this is.
	Cancel(ctx context.Context, q config.Queue, id, reason string) (*store.Job, error)
	// CancelBulk cancels the queue's jobs f matches in bounded batches
	// until the scan is done (done true) or until has passed.
	CancelBulk(ctx context.Context, q config.Queue, f store.CancelFilter, reason string, until time.Time) (cancelled int, done bool, err error)
}

// Limits of the cancel endpoints.
const (
	// maxCancelReason is control.md's bound on a cancel's reason.
	maxCancelReason = 500
	// bulkCancelFor is how long one bulk cancel request works before it
	// answers done: false (control.md: an answer within 10 s).
	bulkCancelFor = 9 * time.Second
)

// registerCancelRoutes: cancelling one job and a queue's jobs in bulk.
func (s *Server) registerCancelRoutes() {
	s.mux.HandleFunc("POST /v1/jobs/{id}/cancel", s.handleCancel)
	s.mux.HandleFunc("POST /v1/queues/{queue}/cancel", s.handleCancelBulk)
}

func (s *Server) canceller(w http.ResponseWriter) (Canceller, bool) {
	c, ok := s.backend.(Canceller)
	if !ok {
		writeError(w, http.StatusNotImplemented, "Cancel is not available on this backend")
	}
	return c, ok
}

// handleCancel is POST /v1/jobs/{id}/cancel {reason?}: 200 with the job,
// now dead / cancelled; 409 for a completed or dead job; 404 for an unknown
// one.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id, q, ok := s.lookupJobQueue(w, r)
	if !ok {
		return
	}
	c, ok := s.canceller(w)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, true)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "reason")
	reason, _ := v.optionalString(fields, "reason", 0, maxCancelReason)
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	job, err := c.Cancel(r.Context(), q, id, reason)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, msgJobNotFound)
		return
	case errors.Is(err, store.ErrConflict):
		st := "completed or dead"
		if cur, gerr := s.backend.GetJob(r.Context(), q, id); gerr == nil && cur != nil {
			st = string(cur.Status)
		}
		writeError(w, http.StatusConflict, "Job is "+st+": nothing to cancel")
		return
	case err != nil:
		s.backendError(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, jobView(job))
}

// cancelledJSON answers a bulk cancel.
type cancelledJSON struct {
	Cancelled int  `json:"cancelled"`
	Done      bool `json:"done"`
}

// handleCancelBulk is POST /v1/queues/{queue}/cancel {status?, flowKey?,
// createdBefore?, all?, reason?}: at least one filter, or all: true. It
// works in bounded batches for up to bulkCancelFor and answers {cancelled,
// done}; done false means more may match and the same call goes on.
func (s *Server) handleCancelBulk(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	c, ok := s.canceller(w)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "status", "flowKey", "createdBefore", "all", "reason")
	f, any := v.cancelFilter(fields)
	all, hasAll := v.optionalBool(fields, "all")
	if hasAll && !all {
		v.fieldError("all", "Invalid literal value, expected true")
	}
	reason, _ := v.optionalString(fields, "reason", 0, maxCancelReason)
	if !v.failed() && !any && !all {
		v.errs.FormErrors = append(v.errs.FormErrors, "Give at least one filter (status, flowKey, createdBefore) or all: true")
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	n, done, err := c.CancelBulk(r.Context(), q, f, reason, time.Now().Add(bulkCancelFor))
	if n > 0 {
		s.wakeState(name) // a probe may have been handed on, slots freed
	}
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, cancelledJSON{Cancelled: n, Done: done})
}

// cancelFilter validates a bulk cancel's filters; any says whether one was
// given.
func (v *validator) cancelFilter(fields map[string]json.RawMessage) (f store.CancelFilter, any bool) {
	if raw, ok := given(fields, "status"); ok {
		any = true
		var list []json.RawMessage
		if kindOf(raw) != kindArray || json.Unmarshal(raw, &list) != nil {
			v.fieldError("status", typeMessage(kindArray, raw))
		} else if len(list) == 0 {
			v.fieldError("status", "Array must contain at least 1 element(s)")
		} else {
			for _, item := range list {
				var st string
				if kindOf(item) != kindString || json.Unmarshal(item, &st) != nil {
					v.fieldError("status", typeMessage(kindString, item))
					continue
				}
				switch store.Status(st) {
				case store.StatusPending, store.StatusProcessing, store.StatusAwaitingAck:
					f.Statuses = append(f.Statuses, store.Status(st))
				default:
					v.fieldError("status", "Invalid enum value. Expected 'pending' | 'processing' | 'awaiting_ack', received '"+truncate(st, 64)+"'")
				}
			}
		}
	}
	if _, ok := given(fields, "flowKey"); ok {
		any = true
		if k, ok := v.flowKeyField(fields); ok {
			f.FlowKey = &k
		}
	}
	if raw, ok := given(fields, "createdBefore"); ok {
		any = true
		var ts string
		if kindOf(raw) != kindString || json.Unmarshal(raw, &ts) != nil {
			v.fieldError("createdBefore", typeMessage(kindString, raw))
		} else if t, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			v.fieldError("createdBefore", "Invalid datetime (ISO-8601, e.g. "+wiretime.Format(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))+")")
		} else {
			f.CreatedBefore = t
		}
	}
	return f, any
}
