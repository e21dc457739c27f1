package api

import (
	"context"
	"net/http"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Keys with a reach (runtime.md §3). An auth.apiKeys key, or a daemon
// without keys, may do anything; an auth.keys key only what its role allows
// on the queues its globs match. Which routes a role may use, and where a
// route's queue comes from, is routeAccess, one table for every route:
// routeMux.HandleFunc puts the check in front of each handler as it is
// registered, so no handler has to remember it, and a route missing from
// the table is refused to every scoped key (deny by default; the security
// test fails until the route is classified).
//
// The check runs before the handler looks anything up, and its 403 is the
// same {"error":"forbidden"} whether the queue (or the job) exists or not:
// a key never learns what lies outside its reach. Inside the reach, an
// unknown queue is the usual 404.

// access is what a route touches and which role may touch it.
type access struct {
	// role is the least role allowed: RolePublisher (publisher and admin)
	// or RoleAdmin.
	role string
	// from says where the queue comes from: fromQueue (the {queue} path
	// value), fromJob (the queue named inside the {id} path value),
	// fromNone (the route touches no queue, or filters what it answers by
	// reach itself, as GET /v1/queues does).
	from int
}

const (
	fromNone = iota
	fromQueue
	fromJob
)

// routeAccess classifies every route the API registers. The publisher's
// set is runtime.md's "publish, read jobs, send callbacks and list its
// queues' jobs": besides publishing and callbacks it may read what concerns
// its queues (the job, the queue's status, its dead-letter list, its
// events), since a tenant that publishes must be able to see why a job did
// not arrive. Every change of a queue's state (pause, resume, replay) is
// the admin's.
var routeAccess = map[string]access{
	"POST /v1/queues/{queue}/jobs":        {config.RolePublisher, fromQueue},
	"POST /v1/queues/{queue}/jobs/batch":  {config.RolePublisher, fromQueue},
	"GET /v1/jobs/{id}":                   {config.RolePublisher, fromJob},
	"POST /v1/jobs/{id}/ack":              {config.RolePublisher, fromJob},
	"POST /v1/jobs/{id}/nack":             {config.RolePublisher, fromJob},
	"POST /v1/jobs/{id}/defer":            {config.RolePublisher, fromJob},
	"GET /v1/queues":                      {config.RolePublisher, fromNone}, // filtered by handleListQueues
	"GET /v1/queues/{queue}":              {config.RolePublisher, fromQueue},
	"GET /v1/queues/{queue}/dead":         {config.RolePublisher, fromQueue},
	"GET /v1/queues/{queue}/events":       {config.RolePublisher, fromQueue},
	"POST /v1/queues/{queue}/dead/replay": {config.RoleAdmin, fromQueue},
	"POST /v1/queues/{queue}/pause":       {config.RoleAdmin, fromQueue},
	"POST /v1/queues/{queue}/resume":      {config.RoleAdmin, fromQueue},
	// Job lists and statistics (lists.go): a publisher lists its queues'
	// jobs (runtime.md) and reads their statistics.
	"GET /v1/queues/{queue}/jobs":  {config.RolePublisher, fromQueue},
	"GET /v1/queues/{queue}/stats": {config.RolePublisher, fromQueue},
	// Queues over the API (queuewrite.go): creating, changing and deleting
	// a queue is the admin's, inside its reach.
	"PUT /v1/queues/{queue}":    {config.RoleAdmin, fromQueue},
	"PATCH /v1/queues/{queue}":  {config.RoleAdmin, fromQueue},
	"DELETE /v1/queues/{queue}": {config.RoleAdmin, fromQueue},
	// Cancel (control.md §1) is the admin's, one job as well as in bulk:
	// it destroys work another publisher may have sent to the queue, and a
	// publisher that wants a job gone before delivery has replaceKey and
	// delay. docs/control.md says so.
	"POST /v1/jobs/{id}/cancel":      {config.RoleAdmin, fromJob},
	"POST /v1/queues/{queue}/cancel": {config.RoleAdmin, fromQueue},
	// Lanes (keys.go, keys.md §5): a publisher reads its queues' lanes as
	// it reads the queue; an override or a lane's resume changes how the
	// queue delivers, like pause and resume, and is the admin's.
	"GET /v1/queues/{queue}/keys":                   {config.RolePublisher, fromQueue},
	"GET /v1/queues/{queue}/keys/{flowKey}":         {config.RolePublisher, fromQueue},
	"PUT /v1/queues/{queue}/keys/{flowKey}":         {config.RoleAdmin, fromQueue},
	"DELETE /v1/queues/{queue}/keys/{flowKey}":      {config.RoleAdmin, fromQueue},
	"POST /v1/queues/{queue}/keys/{flowKey}/resume": {config.RoleAdmin, fromQueue},
	// Schedules are the admin's (runtime.md §3). The queue is in the body,
	// the query or behind the schedule id: the handlers check the reach
	// (schedules.go), with the same 403 for a missing schedule.
	"POST /v1/schedules":             {config.RoleAdmin, fromNone},
	"GET /v1/schedules":              {config.RoleAdmin, fromNone},
	"GET /v1/schedules/{id}":         {config.RoleAdmin, fromNone},
	"DELETE /v1/schedules/{id}":      {config.RoleAdmin, fromNone},
	"POST /v1/schedules/{id}/pause":  {config.RoleAdmin, fromNone},
	"POST /v1/schedules/{id}/resume": {config.RoleAdmin, fromNone},
	// No key is needed for these (publicPaths); any key may read them.
	"GET /healthz":         {config.RolePublisher, fromNone},
	"GET /readyz":          {config.RolePublisher, fromNone},
	"GET /v1/openapi.json": {config.RolePublisher, fromNone},
}

// routeMux is the ServeMux every route registers on. Its HandleFunc and
// Handle wrap each handler in the route's reach check.
type routeMux struct {
	*http.ServeMux
	s *Server
}

// HandleFunc registers h for pattern behind the reach check.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Handle registers h for pattern behind the reach check.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	acc, known := routeAccess[pattern]
	m.ServeMux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := scopedKey(r); k != nil && (!known || !allows(k, acc, r)) {
			writeError(w, http.StatusForbidden, msgForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

// allows reports whether scoped key k may use a route of this access for
// request r (path values set).
func allows(k *config.Key, acc access, r *http.Request) bool {
	if acc.role == config.RoleAdmin && k.Role != config.RoleAdmin {
		return false
	}
	switch acc.from {
	case fromQueue:
		return k.Reaches(r.PathValue("queue"))
	case fromJob:
		name, ok := store.QueueOfJob(r.PathValue("id"))
		if !ok {
			// A malformed id names no queue: the handler's 404 "Job not
			// found" tells nothing about any queue.
			return true
		}
		return k.Reaches(name)
	}
	return true
}

// scopedKeyCtx is the context key of the auth.keys entry a request
// authenticated with.
type scopedKeyCtx struct{}

// withScopedKey returns r carrying k. Only scoped keys are carried: full
// access is the absence of one, so the busiest requests (publishes with an
// auth.apiKeys key) pay no context allocation.
func withScopedKey(r *http.Request, k *config.Key) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), scopedKeyCtx{}, k))
}

// scopedKey returns the auth.keys entry r authenticated with, or nil for
// full access.
func scopedKey(r *http.Request) *config.Key {
	k, _ := r.Context().Value(scopedKeyCtx{}).(*config.Key)
	return k
}

// reaches reports whether r may see the queue called name (always, with
// full access); lists filter their entries with it.
func reaches(r *http.Request, name string) bool {
	k := scopedKey(r)
	return k == nil || k.Reaches(name)
}

// publishAllowed applies the publish route's reach check on the fast path
// of jsonFallback, which skips the mux (and so the check HandleFunc adds).
// It has written the 403 when it returns false.
func publishAllowed(w http.ResponseWriter, r *http.Request, batch bool) bool {
	k := scopedKey(r)
	if k == nil {
		return true
	}
	pattern := "POST /v1/queues/{queue}/jobs"
	if batch {
		pattern += "/batch"
	}
	if allows(k, routeAccess[pattern], r) {
		return true
	}
	writeError(w, http.StatusForbidden, msgForbidden)
	return false
}
