package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/cronspec"
	"github.com/simpleq/simpleqd/internal/store"
)

// Schedules (runtime.md §4): a cron expression in a time zone that
// publishes one job per tick to a queue. Schedules are the admin's; a
// scoped key reaches only the schedules of queues it reaches, and a
// schedule it cannot reach answers the same 403 as one that does not exist.

// Schedules is what the schedule routes need (schedule.Service in the
// daemon). Put mints an id for a schedule given none. Nil: no schedule
// exists and none can be created (404).
type Schedules interface {
	Put(ctx context.Context, q config.Queue, sc store.Schedule) (bool, *store.Schedule, error)
	Get(ctx context.Context, q config.Queue, id string) (*store.Schedule, error)
	Queue(ctx context.Context, id string) (string, bool, error)
	List(ctx context.Context, q config.Queue) ([]*store.Schedule, error)
	Queues(ctx context.Context) ([]string, error)
	Delete(ctx context.Context, q config.Queue, id string) error
	Pause(ctx context.Context, q config.Queue, id string) (*store.Schedule, error)
	Resume(ctx context.Context, q config.Queue, id string) (*store.Schedule, error)
}

// Limits of schedule members.
const (
	maxFlowKeyLen = 255
	// A job's priority range (control.md §2: 0–9, higher first).
	minSchedulePriority = 0
	maxSchedulePriority = 9
)

// scheduleIDPattern is a schedule id: the characters of a queue name.
var scheduleIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

const msgScheduleNotFound = "Schedule not found"

func (s *Server) registerScheduleRoutes() {
	s.mux.HandleFunc("POST /v1/schedules", s.handleCreateSchedule)
	s.mux.HandleFunc("GET /v1/schedules", s.handleListSchedules)
	s.mux.HandleFunc("GET /v1/schedules/{id}", s.handleGetSchedule)
	s.mux.HandleFunc("DELETE /v1/schedules/{id}", s.handleDeleteSchedule)
	s.mux.HandleFunc("POST /v1/schedules/{id}/pause", s.handlePauseSchedule)
	s.mux.HandleFunc("POST /v1/schedules/{id}/resume", s.handleResumeSchedule)
}

// scheduleJSON is the contract's Schedule, member order as in runtime.md.
type scheduleJSON struct {
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Cron      string          `json:"cron"`
	Timezone  string          `json:"timezone"`
	Payload   json.RawMessage `json:"payload"`
	FlowKey   *string         `json:"flowKey"`
	Priority  int             `json:"priority"`
	Paused    bool            `json:"paused"`
	NextRunAt string          `json:"nextRunAt"`
	LastRunAt *string         `json:"lastRunAt"`
	LastJobID *string         `json:"lastJobId"`
	Source    string          `json:"source"`
}

func scheduleView(sc *store.Schedule) scheduleJSON {
	payload := sc.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	return scheduleJSON{ID: sc.ID, Queue: sc.Queue, Cron: sc.Cron, Timezone: sc.Timezone, Payload: payload,
		FlowKey: sc.FlowKey, Priority: sc.Priority, Paused: sc.Paused, NextRunAt: formatTime(sc.NextRunAt),
		LastRunAt: formatTimePtr(sc.LastRunAt), LastJobID: sc.LastJobID, Source: sc.Source}
}

// handleCreateSchedule is POST /v1/schedules: 201 for a new schedule, 200
// when an API schedule of that id (and queue) was replaced.
func (s *Server) handleCreateSchedule(w http.ResponseWriter, r *http.Request) {
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "queue", "cron", "timezone", "payload", "flowKey", "priority", "id")
	var sc store.Schedule
	sc.Source = store.ScheduleSourceAPI
	queueName, _ := v.optionalString(fields, "queue", 1, 128)
	if _, present := given(fields, "queue"); !present {
		v.fieldError("queue", "Required")
	}
	cron, hasCron := v.optionalString(fields, "cron", 1, 256)
	if _, present := given(fields, "cron"); !present {
		v.fieldError("cron", "Required")
	}
	sc.Timezone = "UTC"
	tzOK := true
	if _, present := given(fields, "timezone"); present {
		tz, ok := v.optionalString(fields, "timezone", 1, 64)
		tzOK = ok
		if ok {
			if _, err := cronspec.LoadZone(tz); err != nil {
				v.fieldError("timezone", "Invalid time zone: it "+err.Error())
				tzOK = false
			}
			sc.Timezone = tz
		}
	}
	if hasCron && tzOK {
		if _, err := cronspec.Parse(cron, sc.Timezone); err != nil {
			v.fieldError("cron", "Invalid cron: it "+err.Error())
		}
	}
	sc.Cron = cron
	raw, present := fields["payload"]
	switch {
	case !present:
		v.fieldError("payload", "Required")
	case kindOf(raw) != kindObject:
		v.fieldError("payload", typeMessage(kindObject, raw))
	default:
		sc.Payload = raw
	}
	if fk, ok := v.optionalString(fields, "flowKey", 1, maxFlowKeyLen); ok {
		sc.FlowKey = &fk
	}
	if p, ok := v.optionalInt(fields, "priority", minSchedulePriority, maxSchedulePriority); ok {
		sc.Priority = p
	}
	if id, ok := v.optionalString(fields, "id", 1, 128); ok {
		if !scheduleIDPattern.MatchString(id) {
			v.fieldError("id", "Invalid id: use 1 to 128 of A-Z a-z 0-9 . _ -")
		}
		sc.ID = id
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	if !reaches(r, queueName) {
		writeError(w, http.StatusForbidden, msgForbidden)
		return
	}
	q, ok := s.queue(queueName)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Queue '%s' not found", queueName))
		return
	}
	if s.schedules == nil {
		writeError(w, http.StatusNotFound, msgScheduleNotFound)
		return
	}
	sc.Queue = q.Name
	created, out, err := s.schedules.Put(r.Context(), q, sc)
	if err != nil {
		s.scheduleError(w, r, sc.ID, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.respond(w, r, status, scheduleView(out))
}

// scheduleError maps a schedule write's failure.
func (s *Server) scheduleError(w http.ResponseWriter, r *http.Request, id string, err error) {
	var elsewhere *store.ScheduleIDElsewhereError
	switch {
	case errors.Is(err, store.ErrFileSchedule):
		writeError(w, http.StatusConflict, fmt.Sprintf("Schedule '%s' is managed by the config file", id))
	case errors.As(err, &elsewhere):
		writeError(w, http.StatusConflict, fmt.Sprintf("Schedule '%s' already exists on another queue", id))
	case errors.Is(err, store.ErrScheduleNotFound):
		writeError(w, http.StatusNotFound, msgScheduleNotFound)
	default:
		s.backendError(w, r, err)
	}
}

// scheduleListJSON answers GET /v1/schedules.
type scheduleListJSON struct {
	Schedules []scheduleJSON `json:"schedules"`
}

// handleListSchedules is GET /v1/schedules?queue=: one queue's schedules,
// or (no queue) those of every queue the key reaches, by queue then id.
func (s *Server) handleListSchedules(w http.ResponseWriter, r *http.Request) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeFormError(w, "Invalid query string")
		return
	}
	v := newValidator()
	name, hasQueue := single(v, query, "queue")
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	if s.schedules == nil {
		s.respond(w, r, http.StatusOK, scheduleListJSON{Schedules: []scheduleJSON{}})
		return
	}
	var names []string
	if hasQueue {
		if !reaches(r, name) {
			writeError(w, http.StatusForbidden, msgForbidden)
			return
		}
		if _, ok := s.queue(name); !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("Queue '%s' not found", name))
			return
		}
		names = []string{name}
	} else {
		all, err := s.schedules.Queues(r.Context())
		if err != nil {
			s.backendError(w, r, err)
			return
		}
		for _, n := range all {
			if reaches(r, n) {
				names = append(names, n)
			}
		}
		sort.Strings(names)
	}
	out := scheduleListJSON{Schedules: []scheduleJSON{}}
	for _, n := range names {
		q, ok := s.queue(n)
		if !ok {
			q = config.Queue{Name: n} // a queue gone from the config: its schedules still show
		}
		list, err := s.schedules.List(r.Context(), q)
		if err != nil {
			s.backendError(w, r, err)
			return
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		for _, sc := range list {
			out.Schedules = append(out.Schedules, scheduleView(sc))
		}
	}
	s.respond(w, r, http.StatusOK, out)
}

// lookupSchedule resolves the {id} path value to its queue. A key outside
// the reach gets 403 whether the schedule exists or not; on failure the
// answer has been written.
func (s *Server) lookupSchedule(w http.ResponseWriter, r *http.Request) (string, config.Queue, bool) {
	id := r.PathValue("id")
	var name string
	found := false
	if s.schedules != nil && scheduleIDPattern.MatchString(id) {
		var err error
		name, found, err = s.schedules.Queue(r.Context(), id)
		if err != nil {
			s.backendError(w, r, err)
			return "", config.Queue{}, false
		}
	}
	if !found {
		if scopedKey(r) != nil {
			writeError(w, http.StatusForbidden, msgForbidden)
		} else {
			writeError(w, http.StatusNotFound, msgScheduleNotFound)
		}
		return "", config.Queue{}, false
	}
	if !reaches(r, name) {
		writeError(w, http.StatusForbidden, msgForbidden)
		return "", config.Queue{}, false
	}
	q, ok := s.queue(name)
	if !ok {
		q = config.Queue{Name: name}
	}
	return id, q, true
}

func (s *Server) handleGetSchedule(w http.ResponseWriter, r *http.Request) {
	id, q, ok := s.lookupSchedule(w, r)
	if !ok {
		return
	}
	sc, err := s.schedules.Get(r.Context(), q, id)
	if err != nil {
		s.scheduleError(w, r, id, err)
		return
	}
	s.respond(w, r, http.StatusOK, scheduleView(sc))
}

// handleDeleteSchedule is DELETE /v1/schedules/{id}; a body, if any, must
// be {} (and is size-limited like every body).
func (s *Server) handleDeleteSchedule(w http.ResponseWriter, r *http.Request) {
	fields, ok := s.readObject(w, r, true)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields)
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	id, q, ok := s.lookupSchedule(w, r)
	if !ok {
		return
	}
	if err := s.schedules.Delete(r.Context(), q, id); err != nil {
		s.scheduleError(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.pauseResumeSchedule(w, r, false)
}

func (s *Server) handleResumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.pauseResumeSchedule(w, r, true)
}

// pauseResumeSchedule: the body is empty or {}. A file schedule may be
// paused too: pausing is operating it, not changing its definition.
func (s *Server) pauseResumeSchedule(w http.ResponseWriter, r *http.Request, resume bool) {
	fields, ok := s.readObject(w, r, true)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields)
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	id, q, ok := s.lookupSchedule(w, r)
	if !ok {
		return
	}
	var sc *store.Schedule
	var err error
	if resume {
		sc, err = s.schedules.Resume(r.Context(), q, id)
	} else {
		sc, err = s.schedules.Pause(r.Context(), q, id)
	}
	if err != nil {
		s.scheduleError(w, r, id, err)
		return
	}
	s.respond(w, r, http.StatusOK, scheduleView(sc))
}
