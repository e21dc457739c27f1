package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Job lists and statistics (control.md §4; docs/control.md): what an
// operator or a tenant needs to see a queue's jobs by status and its
// deliveries over time. Both read Redis only, so every daemon answers alike.

// JobLister lists a queue's jobs by status. It is separate from Backend so
// that test backends without it keep compiling; without it the route
// answers 501.
type JobLister interface {
	// ListJobs returns one page of q's jobs in status st and the cursor of
	// the next page ("" after the last); a cursor it did not issue for q
	// and st is a *store.InvalidCursorError.
	ListJobs(ctx context.Context, q config.Queue, st store.Status, limit int, cursor string) ([]*store.Job, string, error)
}

// KeyedJobLister lists one lane's jobs (keys.md §5: a lane's jobs), the
// jobs published with one flow key.
type KeyedJobLister interface {
	ListJobsByKey(ctx context.Context, q config.Queue, st store.Status, flowKey string, limit int, cursor string) ([]*store.Job, string, error)
}

// StatsReader reads a queue's per-minute statistics on Redis' clock.
type StatsReader interface {
	// Stats covers [since, until); zero times mean the last hour.
	Stats(ctx context.Context, q config.Queue, since, until time.Time) (store.Stats, error)
}

func (s *Server) registerListRoutes() {
	s.mux.HandleFunc("GET /v1/queues/{queue}/jobs", s.handleListJobs)
	s.mux.HandleFunc("GET /v1/queues/{queue}/stats", s.handleStats)
}

// handleListJobs is GET /v1/queues/{queue}/jobs?status=&flowKey=&limit=&cursor=:
// one page of the queue's jobs in one status (required), in the order
// store.ListJobs documents; limit 1..1000 (default 100). A page may hold
// fewer than limit jobs while nextCursor says more may follow. flowKey is
// validated as keys.md defines it; until flow keys exist (issue 23) no job
// has one, so a list filtered by a flow key is empty.
func (s *Server) handleListJobs(w http.ResponseWriter, r *http.Request) {
	_, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeFormError(w, "Invalid query string")
		return
	}
	v := newValidator()
	status, given := single(v, query, "status")
	st := store.Status(status)
	switch {
	case !given && len(query["status"]) <= 1:
		v.fieldError("status", "Required: one of pending, processing, awaiting_ack, completed, dead")
	case given && !store.ListableStatus(st):
		v.fieldError("status", "Invalid enum value. Expected 'pending' | 'processing' | 'awaiting_ack' | 'completed' | 'dead', received '"+truncate(status, 32)+"'")
	}
	flowKey, hasFlowKey := single(v, query, "flowKey")
	if hasFlowKey && !validFlowKey(flowKey) {
		v.fieldError("flowKey", msgFlowKey)
	}
	limit := v.queryLimit(query, store.DefaultJobsPage, store.MaxJobsPage)
	cursor, _ := single(v, query, "cursor")
	if utf8.RuneCountInString(cursor) > maxCursorLen {
		v.fieldError("cursor", "Invalid cursor")
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	lister, ok := s.backend.(JobLister)
	if !ok {
		writeError(w, http.StatusNotImplemented, "Job lists are not available on this backend")
		return
	}
	out := jobPageJSON{Jobs: []jobJSON{}}
	var jobs []*store.Job
	var next string
	if keyed, ok := lister.(KeyedJobLister); ok && hasFlowKey {
		jobs, next, err = keyed.ListJobsByKey(r.Context(), q, st, flowKey, limit, cursor)
	} else if hasFlowKey {
		writeError(w, http.StatusNotImplemented, "Job lists by flow key are not available on this backend")
		return
	} else {
		jobs, next, err = lister.ListJobs(r.Context(), q, st, limit, cursor)
	}
	if err != nil {
		var ce *store.InvalidCursorError
		if errors.As(err, &ce) {
			v.fieldError("cursor", "Invalid cursor: "+ce.Reason)
			writeValidation(w, v.errs)
			return
		}
		s.backendError(w, r, err)
		return
	}
	for _, j := range jobs {
		if j != nil {
			out.Jobs = append(out.Jobs, jobView(j))
		}
	}
	if next != "" {
		out.NextCursor = &next
	}
	s.respond(w, r, http.StatusOK, out)
}

// statsCountsJSON is one bucket's (or the totals') counts.
type statsCountsJSON struct {
	Deliveries  statsDeliveriesJSON `json:"deliveries"`
	HTTP429     int64               `json:"http429"`
	Started     int64               `json:"started"`
	Probes      int64               `json:"probes"`
	Holds       int64               `json:"holds"`
	Dead        int64               `json:"dead"`
	HeldSeconds float64             `json:"heldSeconds"`
	// LaneHolds and LaneProbes count the queue's lanes' holds and probes
	// (flow keys, keys.md §3); holds and probes are the queue's own.
	LaneHolds  int64 `json:"laneHolds"`
	LaneProbes int64 `json:"laneProbes"`
}

// statsDeliveriesJSON counts deliveries by outcome.
type statsDeliveriesJSON struct {
	Success  int64 `json:"success"`
	Failed   int64 `json:"failed"`
	Lost     int64 `json:"lost"`
	Deferred int64 `json:"deferred"`
}

type statsBucketJSON struct {
	Start string `json:"start"`
	statsCountsJSON
}

type holdWindowJSON struct {
	From  string `json:"from"`
	Until string `json:"until"`
}

// statsJSON answers GET .../stats.
type statsJSON struct {
	Queue string `json:"queue"`
	// Resolution and Retention are in seconds: a bucket's width and how
	// far back buckets are kept.
	Resolution float64           `json:"resolution"`
	Retention  float64           `json:"retention"`
	Now        string            `json:"now"`
	Since      string            `json:"since"`
	Until      string            `json:"until"`
	Totals     statsCountsJSON   `json:"totals"`
	Buckets    []statsBucketJSON `json:"buckets"`
	Holds      []holdWindowJSON  `json:"holds"`
}

func countsView(c store.StatsCounters, heldMS int64) statsCountsJSON {
	return statsCountsJSON{
		Deliveries: statsDeliveriesJSON{Success: c.Success, Failed: c.Failed, Lost: c.Lost, Deferred: c.Deferred},
		HTTP429:    c.HTTP429, Started: c.Started, Probes: c.Probes, Holds: c.Holds, Dead: c.Dead,
		HeldSeconds: float64(heldMS) / 1000,
		LaneHolds:   c.LaneHolds, LaneProbes: c.LaneProbes,
	}
}

// handleStats is GET /v1/queues/{queue}/stats?since=&until=: the queue's
// deliveries by outcome, 429s, holds, probes and dead jobs per minute,
// fleet-wide, on Redis' clock. since and until are wire times (ISO-8601
// UTC); by default the last hour. The range is clamped to the retention
// (24 h) and to now, and rounded out to whole minutes.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeFormError(w, "Invalid query string")
		return
	}
	v := newValidator()
	since := queryTime(v, query, "since")
	until := queryTime(v, query, "until")
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		v.fieldError("since", "since must be before until")
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	reader, ok := s.backend.(StatsReader)
	if !ok {
		writeError(w, http.StatusNotImplemented, "Statistics are not available on this backend")
		return
	}
	st, err := reader.Stats(r.Context(), q, since, until)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	out := statsJSON{
		Queue: name, Resolution: store.StatsResolution.Seconds(), Retention: store.StatsRetention.Seconds(),
		Now: formatTime(st.Now), Since: formatTime(st.Since), Until: formatTime(st.Until),
		Totals:  countsView(st.Totals, st.HeldMS),
		Buckets: make([]statsBucketJSON, 0, len(st.Buckets)),
		Holds:   make([]holdWindowJSON, 0, len(st.Holds)),
	}
	for _, b := range st.Buckets {
		out.Buckets = append(out.Buckets, statsBucketJSON{Start: formatTime(b.Start), statsCountsJSON: countsView(b.StatsCounters, b.HeldMS)})
	}
	for _, h := range st.Holds {
		out.Holds = append(out.Holds, holdWindowJSON{From: formatTime(h.From), Until: formatTime(h.Until)})
	}
	s.respond(w, r, http.StatusOK, out)
}

// queryTime reads an optional ISO-8601 time parameter (RFC 3339; the wire's
// own format among others). Absent is the zero time.
func queryTime(v *validator, query url.Values, name string) time.Time {
	raw, ok := single(v, query, name)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		v.fieldError(name, "Invalid datetime: expected ISO-8601 like 2026-01-01T00:00:00.000Z, received '"+truncate(raw, 40)+"'")
		return time.Time{}
	}
	return t
}
