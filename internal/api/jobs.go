package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
	"github.com/simpleq/simpleqd/internal/tracing"
	"github.com/simpleq/simpleqd/internal/wiretime"
)

// registerJobRoutes: publishing and reading jobs.
func (s *Server) registerJobRoutes() {
	s.mux.HandleFunc("POST /v1/queues/{queue}/jobs", s.handlePublish)
	s.mux.HandleFunc("POST /v1/queues/{queue}/jobs/batch", s.handlePublishBatch)
	s.mux.HandleFunc("GET /v1/jobs/{id}", s.handleGetJob)
}

// publishedJSON answers a publish: the job's id, status and creation time.
type publishedJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
	// Replaced: a replace key's job took this payload (control.md §3).
	Replaced bool `json:"replaced,omitempty"`
}

// batchItemJSON is one entry of the batch publish answer; Duplicate tells an
// idempotent repeat from a new job, as the single endpoint's 200/201 does.
type batchItemJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
	Duplicate bool   `json:"duplicate"`
	// Replaced (control.md §3): the item's payload went to the job of its
	// replace key that was never delivered; present only then.
	Replaced bool `json:"replaced,omitempty"`
}

// handlePublish is POST /v1/queues/{queue}/jobs: 201 for a new job, 200 with
// the existing job for an idempotent repeat.
func (s *Server) handlePublish(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return
	}
	v := newValidator()
	job := v.newJob(fields)
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	// A W3C traceparent is kept with the job; a malformed one is ignored
	// (package tracing says why), never a 400.
	job.TraceParent, job.TraceState = tracing.FromHeader(r.Header)
	res, err := s.backend.Publish(r.Context(), q, []store.NewJob{job})
	if err != nil {
		s.wakeIfStored(name, err)
		s.backendError(w, r, err)
		return
	}
	if len(res) != 1 {
		s.internalError(w, r, fmt.Errorf("backend published %d jobs for 1", len(res)))
		return
	}
	p := res[0]
	status := http.StatusOK
	if !p.Duplicate && !p.Replaced {
		status = http.StatusCreated
		s.wake(name)
	}
	// The answer of the busiest endpoint is formatted, not reflected: ids
	// ([A-Za-z0-9._-]), statuses and times need no JSON escaping. It is
	// byte for byte what encoding publishedJSON gives (a test checks).
	b := make([]byte, 0, 96+len(p.ID))
	b = append(b, `{"id":"`...)
	b = append(b, p.ID...)
	b = append(b, `","status":"`...)
	b = append(b, p.Status...)
	b = append(b, `","createdAt":"`...)
	b = append(b, formatTime(p.CreatedAt)...)
	if p.Replaced {
		// A replace (control.md §3): 200 with the job that now carries
		// this payload.
		b = append(b, `","replaced":true}`+"\n"...)
	} else {
		b = append(b, "\"}\n"...)
	}
	writeEncoded(w, status, b)
}

// handlePublishBatch is POST /v1/queues/{queue}/jobs/batch (simpleqd): up to
// maxBatchJobs jobs validated as the single endpoint does, all-or-nothing on
// validation, stored with one Backend call.
func (s *Server) handlePublishBatch(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "jobs")
	var jobs []store.NewJob
	raw, present := fields["jobs"]
	switch {
	case !present:
		v.fieldError("jobs", "Required")
	case kindOf(raw) != kindArray:
		v.fieldError("jobs", typeMessage(kindArray, raw))
	default:
		items, err := splitArray(raw) // each element's exact bytes
		if err != nil {
			v.fieldError("jobs", typeMessage(kindArray, raw))
			break
		}
		switch {
		case len(items) < 1:
			v.fieldError("jobs", "Array must contain at least 1 element(s)")
		case len(items) > maxBatchJobs:
			v.fieldError("jobs", fmt.Sprintf("Array must contain at most %d element(s)", maxBatchJobs))
		default:
			jobs = make([]store.NewJob, len(items))
			for i, item := range items {
				at := "jobs." + strconv.Itoa(i)
				if kindOf(item) != kindObject {
					v.fieldError(at, typeMessage(kindObject, item))
					continue
				}
				itemFields, dups, err := parseObject(item)
				if err != nil {
					v.fieldError(at, typeMessage(kindObject, item))
					continue
				}
				iv := v.nested(at)
				for _, k := range dups {
					iv.fieldError(k, "Duplicate field")
				}
				jobs[i] = iv.newJob(itemFields)
			}
		}
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	// The request's trace context is every job's: one publish, one parent.
	if tp, ts := tracing.FromHeader(r.Header); tp != "" {
		for i := range jobs {
			jobs[i].TraceParent, jobs[i].TraceState = tp, ts
		}
	}
	res, err := s.backend.Publish(r.Context(), q, jobs)
	if err != nil {
		s.wakeIfStored(name, err)
		s.backendError(w, r, err)
		return
	}
	if len(res) != len(jobs) {
		s.internalError(w, r, fmt.Errorf("backend published %d jobs for %d", len(res), len(jobs)))
		return
	}
	anyNew := false
	for _, p := range res {
		anyNew = anyNew || !p.Duplicate
	}
	if anyNew {
		s.wake(name)
	}
	// ~110 bytes per item: {"id":"job_<26>_<queue>","status":…,"createdAt":…,"duplicate":false}
	writeEncoded(w, http.StatusOK, appendBatchAnswer(make([]byte, 0, 16+len(res)*(96+len(name))), res))
}

// appendBatchAnswer formats the batch publish answer, {"jobs":[...]}, byte
// for byte as encoding batchItemJSON items gives (a test checks): encoding
// 1,000 items by reflection was 10% of the daemon's CPU per batch-published
// job. Job ids ([A-Za-z0-9._-], made by this daemon) and statuses need no
// escaping; an id that would is encoded properly.
func appendBatchAnswer(b []byte, res []store.Published) []byte {
	b = append(b, `{"jobs":[`...)
	for i, p := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, p.ID)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, string(p.Status))
		b = append(b, `,"createdAt":"`...)
		b = wiretime.Append(b, p.CreatedAt)
		b = append(b, `","duplicate":`...)
		b = strconv.AppendBool(b, p.Duplicate)
		if p.Replaced {
			b = append(b, `,"replaced":true`...)
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// appendJSONString appends s as a JSON string: as it is when it holds only
// characters that need no escaping (the common case here), else through
// encodeJSON, as writeJSON does.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			enc, _ := encodeJSON(s) // a string always encodes
			return append(b, bytes.TrimSuffix(enc, []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// newJob validates one job's members (payload, idempotencyKey, delay and
// simpleqd's priority). The payload is kept as the exact bytes sent.
func (v *validator) newJob(fields map[string]json.RawMessage) store.NewJob {
	v.onlyFields(fields, "payload", "idempotencyKey", "delay", "priority", "replaceKey", "flowKey")
	var job store.NewJob
	raw, present := fields["payload"]
	switch {
	case !present:
		v.fieldError("payload", "Required")
	case kindOf(raw) != kindObject:
		v.fieldError("payload", typeMessage(kindObject, raw))
	default:
		job.Payload = raw
	}
	if key, ok := v.optionalString(fields, "idempotencyKey", 1, maxIdempotencyKeyLen); ok {
		job.IdempotencyKey = key
	}
	// control.md §3: collapses onto the key's never-delivered job.
	if key, ok := v.optionalString(fields, "replaceKey", 1, maxReplaceKeyLen); ok {
		job.ReplaceKey = key
	}
	if d, ok := v.number(fields, "delay", false, 0, maxDelaySeconds); ok {
		job.Delay = seconds(d)
	}
	if p, ok := v.optionalInt(fields, "priority", 0, maxPriority); ok {
		job.Priority = p
	}
	// keys.md §1: the job's lane inside the queue.
	if k, ok := v.flowKeyField(fields); ok {
		job.FlowKey = k
	}
	return job
}

// maxReplaceKeyLen bounds a replace key (control.md §3), as
// maxIdempotencyKeyLen bounds an idempotency key.
const maxReplaceKeyLen = 255

// maxPriority is the highest job priority (control.md §2: 0–9, higher
// first).
const maxPriority = 9

// handleGetJob is GET /v1/jobs/{id}.
func (s *Server) handleGetJob(w http.ResponseWriter, r *http.Request) {
	id, q, ok := s.lookupJobQueue(w, r)
	if !ok {
		return
	}
	job, err := s.backend.GetJob(r.Context(), q, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, msgJobNotFound)
			return
		}
		s.backendError(w, r, err)
		return
	}
	if job == nil {
		writeError(w, http.StatusNotFound, msgJobNotFound)
		return
	}
	s.respond(w, r, http.StatusOK, jobView(job))
}

// lookupJobQueue resolves the {id} path value to the configured queue the id
// was minted for. A malformed id, or one naming a queue that is not
// configured, is "Job not found": no such job can be reached here. On
// failure the 404 has been written.
func (s *Server) lookupJobQueue(w http.ResponseWriter, r *http.Request) (string, config.Queue, bool) {
	id := r.PathValue("id")
	name, ok := QueueOfJob(id)
	if !ok {
		writeError(w, http.StatusNotFound, msgJobNotFound)
		return "", config.Queue{}, false
	}
	q, ok := s.queue(name)
	if !ok {
		writeError(w, http.StatusNotFound, msgJobNotFound)
		return "", config.Queue{}, false
	}
	return id, q, true
}

// wake tells the dispatchers about new work on queue.
func (s *Server) wake(queue string) {
	if s.waker != nil {
		s.waker.Wake(queue)
	}
}

// wakeIfStored wakes the dispatchers after a publish that failed with
// store.ErrNotReplicated: the master stored the jobs, only no replica
// confirmed them in time, so they are delivered like any others. A client
// that retries gets an idempotent repeat, which wakes nobody; without this
// the jobs would wait for the next wake-up of the queue, or the dispatcher's
// safety re-check.
func (s *Server) wakeIfStored(queue string, err error) {
	if errors.Is(err, store.ErrNotReplicated) {
		s.wake(queue)
	}
}

// wakeState tells the dispatchers that queue may deliver again.
func (s *Server) wakeState(queue string) {
	if s.waker != nil {
		s.waker.WakeState(queue)
	}
}

// jobJSON is the contract's Job, field order as in api.md.
type jobJSON struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	DeferCount     int             `json:"deferCount"`
	IdempotencyKey *string         `json:"idempotencyKey"`
	Payload        json.RawMessage `json:"payload"`
	ScheduledFor   string          `json:"scheduledFor"`
	ExpiresAt      string          `json:"expiresAt"`
	LastError      *string         `json:"lastError"`
	DeadReason     *string         `json:"deadReason"`
	History        []attemptJSON   `json:"history"`
	CreatedAt      string          `json:"createdAt"`
	CompletedAt    *string         `json:"completedAt"`
	// ScheduleID names the schedule that published the job (a simpleqd
	// addition, present only then: runtime.md §4).
	ScheduleID *string `json:"scheduleId,omitempty"`
	// Priority is simpleqd's (control.md §2), always present: 0 when the
	// publish gave none.
	Priority int `json:"priority"`
	// ReplaceKey is simpleqd's (control.md §3), always present: null when
	// the publish gave none.
	ReplaceKey *string `json:"replaceKey"`
	// FlowKey is simpleqd's (keys.md §1), always present: null for the
	// default lane.
	FlowKey *string `json:"flowKey"`
}

// attemptJSON is one history entry; probe, acked, retryAfter, scope and
// reason are simpleqd additions emitted only when set. Status is one of
// SimpleQ's (success, failed, nacked, deferred): an ack is a success with
// acked true.
type attemptJSON struct {
	Attempt           int      `json:"attempt"`
	Status            string   `json:"status"`
	Error             *string  `json:"error"`
	WebhookStatusCode *int     `json:"webhookStatusCode"`
	Timestamp         string   `json:"timestamp"`
	Probe             bool     `json:"probe,omitempty"`
	Acked             bool     `json:"acked,omitempty"`
	RetryAfter        *float64 `json:"retryAfter,omitempty"`
	Scope             string   `json:"scope,omitempty"`
	Reason            *string  `json:"reason,omitempty"`
}

// jobView renders a store job in the wire shape. The payload is emitted as
// stored (encoding/json compacts it; HTML escaping is off in writeJSON).
func jobView(j *store.Job) jobJSON {
	history := make([]attemptJSON, len(j.History))
	for i, a := range j.History {
		history[i] = attemptJSON{
			Attempt:           a.Attempt,
			Status:            a.Status,
			Error:             a.Error,
			WebhookStatusCode: a.WebhookStatusCode,
			Timestamp:         formatTime(a.Timestamp),
			Probe:             a.Probe,
			Acked:             a.Acked,
			RetryAfter:        a.RetryAfter,
			Scope:             a.Scope,
			Reason:            a.Reason,
		}
	}
	payload := j.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	return jobJSON{
		ID:             j.ID,
		Queue:          j.Queue,
		Status:         string(j.Status),
		Attempts:       j.Attempts,
		MaxAttempts:    j.MaxAttempts,
		DeferCount:     j.DeferCount,
		IdempotencyKey: j.IdempotencyKey,
		Payload:        payload,
		ScheduledFor:   formatTime(j.ScheduledFor),
		ExpiresAt:      formatTime(j.ExpiresAt),
		LastError:      j.LastError,
		DeadReason:     j.DeadReason,
		History:        history,
		CreatedAt:      formatTime(j.CreatedAt),
		CompletedAt:    formatTimePtr(j.CompletedAt),
		ScheduleID:     j.ScheduleID,
		Priority:       j.Priority,
		ReplaceKey:     j.ReplaceKey,
		FlowKey:        j.FlowKey,
	}
}
