package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/events"
	"github.com/simpleq/simpleqd/internal/store"
)

// Limits of the administration endpoints.
const (
	// maxDeadPage is the largest page of GET .../dead (api.md: limit ≤ 1000).
	maxDeadPage = store.MaxDeadPage
	// maxReplayIDs bounds one replay request, as maxBatchJobs bounds a
	// publish: one script call with a bounded argument list.
	maxReplayIDs = 1000
	// maxCursorLen refuses absurd cursors before decoding them; real ones
	// are a base64 timestamp and job id, well under this.
	maxCursorLen = 1024
)

// Validation messages shared by the admin endpoints.
const (
	msgDuplicate   = "Duplicate field"
	msgReplayWhich = "Specify either ids or all: true"
	msgReplayBoth  = "Specify either ids or all: true, not both"
)

// registerAdminRoutes: the operator's dead-letter and pause/resume controls
// (simpleqd additions; SimpleQ documents no equivalent).
func (s *Server) registerAdminRoutes() {
	s.mux.HandleFunc("GET /v1/queues/{queue}/dead", s.handleListDead)
	s.mux.HandleFunc("POST /v1/queues/{queue}/dead/replay", s.handleReplay)
	s.mux.HandleFunc("POST /v1/queues/{queue}/pause", s.handlePause)
	s.mux.HandleFunc("POST /v1/queues/{queue}/resume", s.handleResume)
}

// jobPageJSON answers GET .../dead and GET .../jobs: one page of jobs.
// NextCursor is null on the last page.
type jobPageJSON struct {
	Jobs       []jobJSON `json:"jobs"`
	NextCursor *string   `json:"nextCursor"`
}

// handleListDead is GET /v1/queues/{queue}/dead?limit=&cursor=: one page of
// the dead-letter list, newest death first. limit is an integer 1..1000
// (default 50); cursor is a nextCursor from an earlier page, and empty means
// the first page. A page may hold fewer than limit jobs while nextCursor says
// more follow: it also ends at store.MaxDeadPageBytes of stored jobs, since
// each carries its whole payload. Other query parameters are ignored (a cache
// buster must not break a dashboard); a repeated limit or cursor is refused,
// since which one would count is a guess.
func (s *Server) handleListDead(w http.ResponseWriter, r *http.Request) {
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
	limit := v.queryLimit(query, 0, maxDeadPage)
	cursor, _ := single(v, query, "cursor")
	if utf8.RuneCountInString(cursor) > maxCursorLen {
		v.fieldError("cursor", "Invalid cursor")
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	jobs, next, err := s.backend.ListDead(r.Context(), q, limit, cursor)
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
	out := jobPageJSON{Jobs: make([]jobJSON, 0, len(jobs))}
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

// single returns the one value of query parameter name. A repeated parameter
// is a field error; absent (or empty) is not given.
func single(v *validator, query url.Values, name string) (string, bool) {
	vals := query[name]
	switch {
	case len(vals) == 0:
		return "", false
	case len(vals) > 1:
		v.fieldError(name, msgDuplicate)
		return "", false
	}
	return vals[0], vals[0] != ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// replayedJSON answers a replay.
type replayedJSON struct {
	Replayed int `json:"replayed"`
}

// handleReplay is POST /v1/queues/{queue}/dead/replay with exactly one of
// {"ids": [...]} (1..1000 job ids) or {"all": true}. It answers how many jobs
// moved back to pending; ids that are not dead jobs of this queue (unknown,
// purged, already replayed, another queue's) are skipped, so a repeated
// request is harmless and answers 0.
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "ids", "all")
	_, hasIDs := given(fields, "ids")
	_, hasAll := given(fields, "all")
	var ids []string
	all := false
	switch {
	case hasIDs && hasAll:
		v.fieldError("ids", msgReplayBoth)
		v.fieldError("all", msgReplayBoth)
	case !hasIDs && !hasAll:
		v.fieldError("ids", msgReplayWhich)
		v.fieldError("all", msgReplayWhich)
	case hasAll:
		if b, ok := v.optionalBool(fields, "all"); ok {
			if !b {
				v.fieldError("all", "Invalid literal value, expected true")
			}
			all = b
		}
	default:
		ids = v.jobIDList(fields, "ids")
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	var n int
	var err error
	if all {
		n, err = s.backend.ReplayAll(r.Context(), q)
	} else {
		n, err = s.backend.Replay(r.Context(), q, ids)
	}
	if n > 0 {
		// Also after an error: ReplayAll works in batches, and the jobs it
		// did move before Redis failed are pending and should be delivered.
		s.wake(name)
		s.events.Record(name, events.Event{Kind: events.KindReplay, Count: n})
	}
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, replayedJSON{Replayed: n})
}

// jobIDList validates a required array of 1..maxReplayIDs non-empty strings.
func (v *validator) jobIDList(fields map[string]json.RawMessage, name string) []string {
	raw, _ := given(fields, name)
	if kindOf(raw) != kindArray {
		v.fieldError(name, typeMessage(kindArray, raw))
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		v.fieldError(name, typeMessage(kindArray, raw))
		return nil
	}
	switch {
	case len(items) < 1:
		v.fieldError(name, "Array must contain at least 1 element(s)")
		return nil
	case len(items) > maxReplayIDs:
		v.fieldError(name, fmt.Sprintf("Array must contain at most %d element(s)", maxReplayIDs))
		return nil
	}
	ids := make([]string, 0, len(items))
	for i, item := range items {
		at := name + "." + strconv.Itoa(i)
		var id string
		if kindOf(item) != kindString || json.Unmarshal(item, &id) != nil {
			v.fieldError(at, typeMessage(kindString, item))
			continue
		}
		if id == "" {
			v.fieldError(at, "String must contain at least 1 character(s)")
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// handlePause is POST /v1/queues/{queue}/pause with an optional body
// {"reason": "..."} (≤ 500 characters; an empty body is fine). Pausing a
// paused queue succeeds again and replaces the reason. It answers the Queue
// as it is now.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, true)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "reason")
	reason, _ := v.optionalString(fields, "reason", 0, maxReasonLen)
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	if err := s.backend.Pause(r.Context(), q, reason); err != nil {
		s.backendError(w, r, err)
		return
	}
	s.events.Record(name, events.Event{Kind: events.KindPause, Reason: reason})
	s.respondQueue(w, r, name, q)
}

// handleResume is POST /v1/queues/{queue}/resume (no body, or {}). It ends a
// pause and cuts a backpressure hold short: a held queue goes to probing, so
// it still reopens only through one successful delivery. Resuming a queue
// that is neither paused nor held changes nothing and succeeds. It wakes the
// dispatchers and answers the Queue as it is now.
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
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
	if err := s.backend.Resume(r.Context(), q); err != nil {
		if errors.Is(err, store.ErrNotReplicated) {
			s.wakeState(name) // the master has the resume; see wakeIfStored
		}
		s.backendError(w, r, err)
		return
	}
	s.events.Record(name, events.Event{Kind: events.KindResume})
	s.wakeState(name)
	s.respondQueue(w, r, name, q)
}

// respondQueue answers 200 with the queue's current view. If reading it back
// fails the change has still been made; the error says only that the answer
// could not be read, and repeating the request is harmless.
func (s *Server) respondQueue(w http.ResponseWriter, r *http.Request, name string, q config.Queue) {
	view, err := s.queueView(r.Context(), name, q)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, view)
}

// queryLimit validates the optional "limit" query parameter: a whole number
// from 1 to most. It returns def when the parameter is absent or invalid (the
// field error is recorded on v).
func (v *validator) queryLimit(query url.Values, def, most int) int {
	raw, ok := single(v, query, "limit")
	if !ok {
		return def
	}
	n, err := strconv.Atoi(raw)
	switch {
	case err != nil && isDigits(raw):
		v.fieldError("limit", fmt.Sprintf("Number must be less than or equal to %d", most))
	case err != nil:
		v.fieldError("limit", "Expected integer, received '"+truncate(raw, 32)+"'")
	case n < 1:
		v.fieldError("limit", "Number must be greater than or equal to 1")
	case n > most:
		v.fieldError("limit", fmt.Sprintf("Number must be less than or equal to %d", most))
	default:
		return n
	}
	return def
}
