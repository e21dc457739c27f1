package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// registerQueueRoutes: the operator's view of configured queues (simpleqd).
func (s *Server) registerQueueRoutes() {
	s.mux.HandleFunc("GET /v1/queues", s.handleListQueues)
	s.mux.HandleFunc("GET /v1/queues/{queue}", s.handleGetQueue)
}

// queue returns the configured queue called name (exact, case-sensitive),
// as of now: config reloads are seen by the next call.
func (s *Server) queue(name string) (config.Queue, bool) {
	var q config.Queue
	var ok bool
	switch {
	case s.lookup != nil:
		q, ok = s.lookup(name)
	case s.queues != nil:
		q, ok = s.queues()[name]
	}
	if ok && q.Name == "" {
		q.Name = name
	}
	return q, ok
}

// lookupQueue resolves the {queue} path value; on failure the 404
// "Queue '<name>' not found" has been written.
func (s *Server) lookupQueue(w http.ResponseWriter, r *http.Request) (string, config.Queue, bool) {
	name := r.PathValue("queue")
	q, ok := s.queue(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Queue '%s' not found", name))
		return "", config.Queue{}, false
	}
	return name, q, true
}

// queueJSON is the contract's Queue, field order as in api.md.
type queueJSON struct {
	Name            string     `json:"name"`
	Mode            string     `json:"mode"`
	WebhookURL      string     `json:"webhookUrl"`
	Concurrency     int        `json:"concurrency"`
	RateLimitMax    int        `json:"rateLimitMax"`
	RateLimitWindow float64    `json:"rateLimitWindow"` // seconds
	MaxAttempts     int        `json:"maxAttempts"`
	MaxDefers       int        `json:"maxDefers"`
	Counts          countsJSON `json:"counts"`
	Hold            holdJSON   `json:"hold"`
	// Source is "file" or "api" (runtime.md §1): only an API queue may be
	// changed or deleted over the API.
	Source string `json:"source"`
	// SigningSecretHint is the last 4 characters of the current signing
	// secret (null for a secret too short to hint at); the secret itself
	// is never part of any answer.
	SigningSecretHint *string `json:"signingSecretHint"`
	// FlowKeys are the queue's per-lane settings (keys.md §2).
	FlowKeys flowKeysJSON `json:"flowKeys"`
}

// flowKeysJSON is a queue's flowKeys section; rateLimitWindow in seconds,
// as the queue's own.
type flowKeysJSON struct {
	Concurrency     int     `json:"concurrency"`
	RateLimitMax    int     `json:"rateLimitMax"`
	RateLimitWindow float64 `json:"rateLimitWindow"`
	HoldScope       string  `json:"holdScope"`
}

type countsJSON struct {
	Pending     int64 `json:"pending"`
	Processing  int64 `json:"processing"`
	AwaitingAck int64 `json:"awaitingAck"`
	Dead        int64 `json:"dead"`
	// HeldKeys is simpleqd's: the lanes (flow keys) held or probing.
	HeldKeys int64 `json:"heldKeys"`
}

type holdJSON struct {
	State      string  `json:"state"`
	Until      *string `json:"until"`
	ProbeJobID *string `json:"probeJobId"`
	Reason     *string `json:"reason"`
}

// queueView reads q's live status and renders it with its settings. The
// signing secret is never part of it, and a password in the webhook URL's
// userinfo is redacted.
func (s *Server) queueView(ctx context.Context, name string, q config.Queue) (queueJSON, error) {
	st, err := s.backend.QueueStatus(ctx, q)
	if err != nil {
		return queueJSON{}, err
	}
	return renderQueue(name, q, st), nil
}

func renderQueue(name string, q config.Queue, st store.QueueStatus) queueJSON {
	mode := q.Mode
	if mode == "" {
		mode = "standard"
	}
	state := string(st.Hold.State)
	if state == "" {
		state = string(store.HoldOpen)
	}
	return queueJSON{
		Name:            name,
		Mode:            mode,
		WebhookURL:      redactURL(q.WebhookURL),
		Concurrency:     q.Concurrency,
		RateLimitMax:    q.RateLimitMax,
		RateLimitWindow: q.RateLimitWindow.Seconds(),
		MaxAttempts:     q.MaxAttempts,
		MaxDefers:       q.MaxDefers,
		Counts: countsJSON{
			Pending:     st.Counts.Pending,
			Processing:  st.Counts.Processing,
			AwaitingAck: st.Counts.AwaitingAck,
			Dead:        st.Counts.Dead,
			HeldKeys:    st.Counts.HeldKeys,
		},
		FlowKeys: flowKeysJSON{Concurrency: q.FlowKeys.Concurrency, RateLimitMax: q.FlowKeys.RateLimitMax,
			RateLimitWindow: q.FlowKeys.RateLimitWindow.Seconds(), HoldScope: holdScopeOf(q)},
		Hold: holdJSON{
			State:      state,
			Until:      formatTimePtr(st.Hold.Until),
			ProbeJobID: st.Hold.ProbeJobID,
			Reason:     st.Hold.Reason,
		},
		Source:            source(q),
		SigningSecretHint: secretHint(q),
	}
}

// source names where a queue is defined.
func source(q config.Queue) string {
	if q.Checked {
		return "api"
	}
	return "file"
}

func secretHint(q config.Queue) *string {
	if h := config.SecretHint(q.SigningSecret); h != "" {
		return &h
	}
	return nil
}

// redactURL hides a password in the URL's userinfo; anything unparsable is
// returned unchanged (config validated it already).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if _, has := u.User.Password(); !has {
		return raw
	}
	return u.Redacted()
}

// handleGetQueue is GET /v1/queues/{queue}.
func (s *Server) handleGetQueue(w http.ResponseWriter, r *http.Request) {
	name, q, ok := s.lookupQueue(w, r)
	if !ok {
		return
	}
	view, err := s.queueView(r.Context(), name, q)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	s.respond(w, r, http.StatusOK, view)
}

// handleListQueues is GET /v1/queues: every configured queue the key
// reaches, sorted by name.
// Status is read queue by queue; any failure fails the whole answer rather
// than returning a partial list that looks complete.
func (s *Server) handleListQueues(w http.ResponseWriter, r *http.Request) {
	var all map[string]config.Queue
	if s.queues != nil {
		all = s.queues()
	}
	names := make([]string, 0, len(all))
	for name := range all {
		// A scoped key sees only the queues it reaches (reach.go).
		if reaches(r, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make([]queueJSON, 0, len(names))
	for _, name := range names {
		q := all[name]
		if q.Name == "" {
			q.Name = name
		}
		view, err := s.queueView(r.Context(), name, q)
		if err != nil {
			s.backendError(w, r, err)
			return
		}
		out = append(out, view)
	}
	s.respond(w, r, http.StatusOK, struct {
		Queues []queueJSON `json:"queues"`
	}{out})
}

// holdScopeOf is the queue's flowKeys.holdScope, "key" when a queue built
// in code left it empty (as the store reads it).
func holdScopeOf(q config.Queue) string {
	if q.FlowKeys.HoldScope == "" {
		return "key"
	}
	return q.FlowKeys.HoldScope
}
