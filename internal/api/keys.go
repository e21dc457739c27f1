package api

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// The keys endpoints (keys.md §2, §3, §5): a queue's lanes, one per flow
// key, as the fleet shares them in Redis. Reading them is like reading the
// queue (a publisher may, inside its reach); overrides and resume change
// how the queue delivers and are the admin's, like pause and resume.

// Limits of the keys endpoints.
const (
	// defaultKeysPage and maxKeysPage bound GET .../keys?limit=.
	defaultKeysPage = 100
	maxKeysPage     = store.MaxKeysPage
	// maxLaneLimit bounds an override's concurrency and rateLimitMax: far
	// above any real downstream, small enough to stay exact everywhere.
	maxLaneLimit = 1_000_000_000
	// maxLaneWeight is keys.md §2's bound on a lane's weight (1-100).
	maxLaneWeight = 100
	// maxKeysCursor bounds a cursor: a rank or an HSCAN cursor, both
	// unsigned 64-bit decimals.
	maxKeysCursor = 20
)

// msgKeyNotFound is keys.md §5's 404 for a lane with no jobs, no override
// and no hold.
const msgKeyNotFound = "Key not found"

// msgFlowKey is the field error of a flow key keys.md §1 refuses.
const msgFlowKey = "A flow key is 1-255 bytes of UTF-8 without control characters"

func (s *Server) registerKeyRoutes() {
	s.mux.HandleFunc("GET /v1/queues/{queue}/keys", s.handleListKeys)
	s.mux.HandleFunc("GET /v1/queues/{queue}/keys/{flowKey}", s.handleGetKey)
	s.mux.HandleFunc("PUT /v1/queues/{queue}/keys/{flowKey}", s.handlePutKey)
	s.mux.HandleFunc("DELETE /v1/queues/{queue}/keys/{flowKey}", s.handleDeleteKey)
	s.mux.HandleFunc("POST /v1/queues/{queue}/keys/{flowKey}/resume", s.handleResumeKey)
}

// keyJSON is keys.md §5's Key.
type keyJSON struct {
	FlowKey      string        `json:"flowKey"`
	Counts       keyCountsJSON `json:"counts"`
	Hold         holdJSON      `json:"hold"`
	Concurrency  int           `json:"concurrency"`
	RateLimitMax int           `json:"rateLimitMax"`
	Weight       int           `json:"weight"`
}

// keyCountsJSON is a lane's counts: the queue's, without dead (a dead job
// has left every lane).
type keyCountsJSON struct {
	Pending     int64 `json:"pending"`
	Processing  int64 `json:"processing"`
	AwaitingAck int64 `json:"awaitingAck"`
}

// keysPageJSON answers GET .../keys; NextCursor is null on the last page.
type keysPageJSON struct {
	Keys       []keyJSON `json:"keys"`
	NextCursor *string   `json:"nextCursor"`
}

func keyView(k store.Key) keyJSON {
	state := string(k.Hold.State)
	if state == "" {
		state = string(store.HoldOpen)
	}
	return keyJSON{
		FlowKey: k.FlowKey,
		Counts:  keyCountsJSON{Pending: k.Counts.Pending, Processing: k.Counts.Processing, AwaitingAck: k.Counts.AwaitingAck},
		Hold: holdJSON{State: state, Until: formatTimePtr(k.Hold.Until), ProbeJobID: k.Hold.ProbeJobID,
			Reason: k.Hold.Reason},
		Concurrency: k.Concurrency, RateLimitMax: k.RateLimitMax, Weight: k.Weight,
	}
}

// lookupKey resolves the {queue} and {flowKey} path values ({flowKey}
// arrives percent-decoded); on failure the 404 or the 400 naming flowKey
// has been written.
func (s *Server) lookupKey(w http.ResponseWriter, r *http.Request) (string, config.Queue, string, bool) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return "", config.Queue{}, "", false
	}
	fk := r.PathValue("flowKey")
	if !validFlowKey(fk) {
		v := newValidator()
		v.fieldError("flowKey", msgFlowKey)
		writeValidation(w, v.errs)
		return "", config.Queue{}, "", false
	}
	return name, q, fk, true
}

// handleListKeys is GET /v1/queues/{queue}/keys?state=&limit=&cursor=: one
// page of the queue's lanes, held and probing ones by release time, active
// (or all, without state) ones in Redis' hash order. limit 1..1000
// (default 100); a page may hold fewer lanes while nextCursor says more
// follow. Lanes with no jobs and no override are not listed.
func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
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
	state, _ := single(v, query, "state")
	st := store.KeyState(state)
	switch st {
	case store.KeyAll, store.KeyHeld, store.KeyProbing, store.KeyActive:
	default:
		v.fieldError("state", "Invalid enum value. Expected 'held' | 'probing' | 'active', received '"+truncate(state, 32)+"'")
	}
	limit := v.queryLimit(query, defaultKeysPage, maxKeysPage)
	cursor, _ := single(v, query, "cursor")
	if len(cursor) > maxKeysCursor || (cursor != "" && !isDigits(cursor)) {
		v.fieldError("cursor", "Invalid cursor")
	}
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	keys, next, err := s.backend.ListKeys(r.Context(), q, st, cursor, limit)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	out := keysPageJSON{Keys: make([]keyJSON, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, keyView(k))
	}
	if next != "" {
		out.NextCursor = &next
	}
	s.respond(w, r, http.StatusOK, out)
}

// handleGetKey is GET /v1/queues/{queue}/keys/{flowKey}: the lane, or 404
// "Key not found" when it has no jobs, no override and no hold.
func (s *Server) handleGetKey(w http.ResponseWriter, r *http.Request) {
	_, q, fk, ok := s.lookupKey(w, r)
	if !ok {
		return
	}
	k, err := s.backend.GetKey(r.Context(), q, fk)
	s.respondKey(w, r, k, err)
}

// handlePutKey is PUT /v1/queues/{queue}/keys/{flowKey} {concurrency?,
// rateLimitMax?, weight?}: the lane's override, all of it (a member left
// out, or null, goes back to the queue's flowKeys settings; weight to 1),
// shared by the fleet at once. It answers the lane as it is now.
func (s *Server) handlePutKey(w http.ResponseWriter, r *http.Request) {
	name, q, fk, ok := s.lookupKey(w, r)
	if !ok {
		return
	}
	fields, ok := s.readObject(w, r, false)
	if !ok {
		return
	}
	v := newValidator()
	v.onlyFields(fields, "concurrency", "rateLimitMax", "weight")
	var o store.KeyOverride
	opt := func(name string, minV, maxV int) *int {
		if n, ok := v.optionalInt(fields, name, minV, maxV); ok {
			return &n
		}
		return nil
	}
	o.Concurrency = opt("concurrency", 0, maxLaneLimit)
	o.RateLimitMax = opt("rateLimitMax", 0, maxLaneLimit)
	o.Weight = opt("weight", 1, maxLaneWeight)
	if v.failed() {
		writeValidation(w, v.errs)
		return
	}
	k, err := s.backend.PutKey(r.Context(), q, fk, o)
	if err == nil {
		s.wakeState(name) // a raised cap or weight may let the lane start
	}
	s.respondKey(w, r, k, err)
}

// handleDeleteKey is DELETE /v1/queues/{queue}/keys/{flowKey} (no body, or
// {}): the lane's override goes; its jobs and hold stay. 204 whether there
// was an override or not, so a repeated delete is harmless.
func (s *Server) handleDeleteKey(w http.ResponseWriter, r *http.Request) {
	name, q, fk, ok := s.lookupKey(w, r)
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
	if err := s.backend.DeleteKey(r.Context(), q, fk); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.backendError(w, r, err)
		return
	}
	s.wakeState(name)
	w.WriteHeader(http.StatusNoContent)
}

// handleResumeKey is POST /v1/queues/{queue}/keys/{flowKey}/resume (no
// body, or {}): a held lane goes to probing at once (keys.md §3), so it
// still reopens only through one successful probe; a lane that is not held
// is answered as it is. 404 when the lane does not exist.
func (s *Server) handleResumeKey(w http.ResponseWriter, r *http.Request) {
	name, q, fk, ok := s.lookupKey(w, r)
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
	k, err := s.backend.ResumeKey(r.Context(), q, fk)
	if err == nil || errors.Is(err, store.ErrNotReplicated) {
		s.wakeState(name) // the probe may go out now
	}
	s.respondKey(w, r, k, err)
}

// respondKey answers 200 with lane k, or the error of reading it.
func (s *Server) respondKey(w http.ResponseWriter, r *http.Request, k store.Key, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, msgKeyNotFound)
	case err != nil:
		s.backendError(w, r, err)
	default:
		s.respond(w, r, http.StatusOK, keyView(k))
	}
}
