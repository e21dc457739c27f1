package api

import (
	"net/http"
	"net/url"

	"github.com/simpleq/simpleqd/internal/events"
)

// defaultEventsPage is the page size of GET .../events without a limit.
const defaultEventsPage = 50

// registerEventRoutes: a queue's recent events as this daemon saw them (a
// simpleqd addition, read-only; the web console's timeline).
func (s *Server) registerEventRoutes() {
	s.mux.HandleFunc("GET /v1/queues/{queue}/events", s.handleListEvents)
}

// eventJSON is one events.Event on the wire; fields that do not apply to the
// event's kind are null.
type eventJSON struct {
	Seq               uint64   `json:"seq"`
	Time              string   `json:"time"`
	Kind              string   `json:"kind"`
	JobID             *string  `json:"jobId"`
	Attempt           *int     `json:"attempt"`
	Probe             bool     `json:"probe"`
	Result            *string  `json:"result"`
	Outcome           *string  `json:"outcome"`
	WebhookStatusCode *int     `json:"webhookStatusCode"`
	Error             *string  `json:"error"`
	RetryAfter        *float64 `json:"retryAfter"` // seconds
	Until             *string  `json:"until"`
	Reason            *string  `json:"reason"`
	Count             *int     `json:"count"`
}

// eventsPageJSON answers GET .../events. Scope is always "daemon": the events
// are this process's memory, not the fleet's (see package events).
type eventsPageJSON struct {
	Queue    string      `json:"queue"`
	Scope    string      `json:"scope"`
	Capacity int         `json:"capacity"`
	Events   []eventJSON `json:"events"`
}

// handleListEvents is GET /v1/queues/{queue}/events?limit=N: up to N (1 up to
// the ring's capacity, default 50) of the queue's most recent events, newest
// first: deliveries, holds, probes, reopenings, dead letters, callbacks and
// operator actions. They are held in memory by the daemon that answers, so a
// fleet has one partial timeline per daemon, and a restart empties them;
// durable state is in GET /v1/jobs/{id} and GET .../dead. Other query
// parameters are ignored, as for the dead list.
func (s *Server) handleListEvents(w http.ResponseWriter, r *http.Request) {
	name, _, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeFormError(w, "Invalid query string")
		return
	}
	capacity := s.events.Capacity()
	v := newValidator()
	limit := v.queryLimit(query, min(defaultEventsPage, capacity), max(capacity, 1))
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	evs := s.events.Recent(name, limit)
	out := eventsPageJSON{Queue: name, Scope: "daemon", Capacity: capacity, Events: make([]eventJSON, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, eventView(e))
	}
	s.respond(w, r, http.StatusOK, out)
}

func eventView(e events.Event) eventJSON {
	out := eventJSON{
		Seq:     e.Seq,
		Time:    formatTime(e.Time),
		Kind:    e.Kind,
		JobID:   nonEmpty(e.JobID),
		Probe:   e.Probe,
		Result:  nonEmpty(e.Result),
		Outcome: nonEmpty(e.Outcome),
		Error:   nonEmpty(e.Error),
		Reason:  nonEmpty(e.Reason),
	}
	if e.Attempt > 0 {
		out.Attempt = &e.Attempt
	}
	if e.StatusCode > 0 {
		out.WebhookStatusCode = &e.StatusCode
	}
	if e.RetryAfter > 0 || e.Kind == events.KindHold {
		ra := e.RetryAfter.Seconds()
		out.RetryAfter = &ra
	}
	if !e.Until.IsZero() {
		out.Until = formatTimePtr(&e.Until)
	}
	if e.Kind == events.KindReplay {
		out.Count = &e.Count
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
