package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Keys with a reach (runtime.md §3, reach.go): every endpoint tried with
// every kind of key.

// The keys of reachAuth, one per kind.
const (
	keyFull      = "sk_full_access"
	keyAdminA    = "sk_admin_tenant_a"
	keyAdminC    = "sk_admin_tenant_c" // reaches tenant-c-*: none of the queues used
	keyPublishA  = "sk_publisher_tenant_a"
	keyPublishC  = "sk_publisher_tenant_c"
	keyWrong     = "sk_not_configured"
	noKey        = ""
	queueA       = "tenant-a-1"   // in reach of the A keys
	queueA404    = "tenant-a-404" // in reach of the A keys, not configured
	queueB       = "tenant-b-1"   // in reach of no scoped key
	queueB404    = "tenant-b-404" // in reach of no scoped key, not configured
	forbiddenMsg = `{"error":"forbidden"}`
)

func reachAuth() *config.Auth {
	return &config.Auth{
		APIKeys: []string{keyFull},
		Keys: []config.Key{
			{Key: keyAdminA, Role: config.RoleAdmin, Queues: []string{"tenant-a-*"}},
			{Key: keyAdminC, Role: config.RoleAdmin, Queues: []string{"tenant-c-*"}},
			{Key: keyPublishA, Role: config.RolePublisher, Queues: []string{"tenant-a-*"}},
			{Key: keyPublishC, Role: config.RolePublisher, Queues: []string{"tenant-c-*"}},
		},
	}
}

func reachQueues() map[string]config.Queue {
	qs := map[string]config.Queue{}
	for _, name := range []string{queueA, queueB} {
		// API queues (Checked), so that the queue write routes may write them.
		qs[name] = config.Queue{Name: name, WebhookURL: "https://hooks.example.com/" + name, Checked: true,
			QueueSettings: config.QueueSettings{Mode: "ack", Concurrency: 1, MaxAttempts: 3, RateLimitWindow: time.Second}}
	}
	return qs
}

// newReachHarness serves reachQueues with reachAuth's keys (through
// Options.Auth, as the daemon does) and a backend that finds every job.
func newReachHarness(t *testing.T) *harness {
	t.Helper()
	auth := reachAuth()
	h := newHarness(t, func(o *Options) {
		o.Queues = reachQueues
		o.APIKeys = nil
		o.Auth = func() *config.Auth { return auth }
		o.Schedules = newFakeSchedules(queueA, queueB)
	})
	h.backend.getJobFn = func(q config.Queue, id string) (*store.Job, error) {
		return &store.Job{ID: id, Queue: q.Name, Status: store.StatusProcessing, MaxAttempts: 3}, nil
	}
	return h
}

// reachRoute is how the test calls one route on a queue.
type reachRoute struct {
	// publisher: a publisher key may use it (an admin always may).
	publisher bool
	// public: no key needed (publicPaths).
	public bool
	// list: GET /v1/queues, which answers 200 to every key, filtered.
	list bool
	// creates: PUT /v1/queues/{queue}, which creates an unknown queue
	// (201) instead of answering 404.
	creates bool
	// path builds the request path for a queue; body is sent as JSON.
	path func(queue string) string
	body string
	// bodyOf, when set, builds the body for a queue instead (POST
	// /v1/schedules names the queue in its body).
	bodyOf func(queue string) string
	// scheduleID: the route names a schedule by id, and a missing one is
	// 403 to every scoped key (it names no queue to tell the reach by).
	scheduleID bool
}

// bodyFor is the request body for a queue.
func (rt reachRoute) bodyFor(queue string) string {
	if rt.bodyOf != nil {
		return rt.bodyOf(queue)
	}
	return rt.body
}

// onSchedule builds a schedule path: fakeSchedules knows "sc-<queue>" for
// the configured queues only.
func onSchedule(suffix string) func(string) string {
	return func(q string) string { return "/v1/schedules/sc-" + q + suffix }
}

func onQueue(suffix string) func(string) string {
	return func(q string) string { return "/v1/queues/" + q + suffix }
}

func onJob(suffix string) func(string) string {
	return func(q string) string { return "/v1/jobs/" + newID(q) + suffix }
}

func fixed(p string) func(string) string { return func(string) string { return p } }

// reachRoutes is the role table, written out here rather than read from
// routeAccess so that a change of reach.go's table must be made twice.
var reachRoutes = map[string]reachRoute{
	"POST /v1/queues/{queue}/jobs":        {publisher: true, path: onQueue("/jobs"), body: `{"payload":{}}`},
	"POST /v1/queues/{queue}/jobs/batch":  {publisher: true, path: onQueue("/jobs/batch"), body: `{"jobs":[{"payload":{}}]}`},
	"GET /v1/jobs/{id}":                   {publisher: true, path: onJob("")},
	"POST /v1/jobs/{id}/ack":              {publisher: true, path: onJob("/ack"), body: `{}`},
	"POST /v1/jobs/{id}/nack":             {publisher: true, path: onJob("/nack"), body: `{}`},
	"POST /v1/jobs/{id}/defer":            {publisher: true, path: onJob("/defer"), body: `{"retryAfter":1}`},
	"GET /v1/queues":                      {publisher: true, list: true, path: fixed("/v1/queues")},
	"GET /v1/queues/{queue}":              {publisher: true, path: onQueue("")},
	"GET /v1/queues/{queue}/dead":         {publisher: true, path: onQueue("/dead")},
	"GET /v1/queues/{queue}/events":       {publisher: true, path: onQueue("/events")},
	"GET /v1/queues/{queue}/jobs":         {publisher: true, path: onQueue("/jobs?status=pending")},
	"GET /v1/queues/{queue}/stats":        {publisher: true, path: onQueue("/stats")},
	"POST /v1/queues/{queue}/dead/replay": {path: onQueue("/dead/replay"), body: `{"all":true}`},
	"POST /v1/queues/{queue}/pause":       {path: onQueue("/pause"), body: `{}`},
	"POST /v1/queues/{queue}/resume":      {path: onQueue("/resume"), body: `{}`},
	"PUT /v1/queues/{queue}": {creates: true, path: onQueue(""),
		body: `{"webhookUrl":"https://hooks.example.com/x","signingSecret":"whsec_reach_test_secret"}`},
	"PATCH /v1/queues/{queue}":                      {path: onQueue(""), body: `{"concurrency":2}`},
	"DELETE /v1/queues/{queue}":                     {path: onQueue("")},
	"GET /v1/queues/{queue}/keys":                   {publisher: true, path: onQueue("/keys?state=held")},
	"GET /v1/queues/{queue}/keys/{flowKey}":         {publisher: true, path: onQueue("/keys/tenant%2Fa")},
	"PUT /v1/queues/{queue}/keys/{flowKey}":         {path: onQueue("/keys/tenant-a"), body: `{"weight":2}`},
	"DELETE /v1/queues/{queue}/keys/{flowKey}":      {path: onQueue("/keys/tenant-a")},
	"POST /v1/queues/{queue}/keys/{flowKey}/resume": {path: onQueue("/keys/tenant-a/resume"), body: `{}`},
	"POST /v1/jobs/{id}/cancel":                     {path: onJob("/cancel"), body: `{}`},
	"POST /v1/queues/{queue}/cancel":                {path: onQueue("/cancel"), body: `{"all":true}`},
	"POST /v1/schedules": {path: fixed("/v1/schedules"), bodyOf: func(q string) string {
		return `{"queue":"` + q + `","cron":"@every 1m","payload":{}}`
	}},
	"GET /v1/schedules":              {path: func(q string) string { return "/v1/schedules?queue=" + q }},
	"GET /v1/schedules/{id}":         {scheduleID: true, path: onSchedule("")},
	"DELETE /v1/schedules/{id}":      {scheduleID: true, path: onSchedule("")},
	"POST /v1/schedules/{id}/pause":  {scheduleID: true, path: onSchedule("/pause"), body: `{}`},
	"POST /v1/schedules/{id}/resume": {scheduleID: true, path: onSchedule("/resume"), body: `{}`},
	"GET /healthz":                   {public: true, path: fixed("/healthz")},
	"GET /readyz":                    {public: true, path: fixed("/readyz")},
	"GET /v1/openapi.json":           {public: true, path: fixed("/v1/openapi.json")},
}

// keyKind is one kind of key: its token, and which of the test's queues
// it reaches with which role.
type keyKind struct {
	name      string
	token     string
	valid     bool
	full      bool
	admin     bool
	reachesA  bool
	listNames []string
}

var keyKinds = []keyKind{
	{"full apiKey", keyFull, true, true, true, true, []string{queueA, queueB}},
	{"admin with reach", keyAdminA, true, false, true, true, []string{queueA}},
	{"admin without reach", keyAdminC, true, false, true, false, []string{}},
	{"publisher with reach", keyPublishA, true, false, false, true, []string{queueA}},
	{"publisher without reach", keyPublishC, true, false, false, false, []string{}},
	{"wrong key", keyWrong, false, false, false, false, nil},
	{"no key", noKey, false, false, false, false, nil},
}

// backendCalls counts every call the fake backend has seen.
func backendCalls(h *harness) int {
	h.backend.mu.Lock()
	defer h.backend.mu.Unlock()
	return len(h.backend.published) + len(h.backend.callbacks) + len(h.backend.gets) +
		len(h.backend.statuses) + len(h.backend.admin)
}

func (h *harness) as(t *testing.T, k keyKind, method, path, body string) (int, string) {
	t.Helper()
	auth := ""
	if k.token != "" {
		auth = "Bearer " + k.token
	}
	w := h.do(t, req{method: method, path: path, body: body, auth: str(auth)})
	return w.Code, w.Body.String()
}

// TestReachEveryEndpointEveryKey: each route the API registers (read from
// the source, as the OpenAPI test does, so a new route fails here until it
// is in reachRoutes and in reach.go's routeAccess) is called with every
// kind of key on a queue in reach, a queue out of reach that exists and one
// that does not. It proves:
//
//   - a full key, and an admin inside its reach, get 2xx on everything;
//   - a publisher inside its reach gets 2xx on publish, batch, job reads,
//     callbacks and the queue reads, and 403 on replay, pause and resume;
//   - outside the reach every key gets 403, with the same body for a queue
//     (or a job of a queue) that exists and one that does not, and the
//     backend is never asked anything, so not even timing tells them apart;
//   - inside the reach an unknown queue is still 404 (or 403 for a route
//     the role may not use, whether the queue exists or not);
//   - a wrong key and no key get 401 everywhere but the public paths;
//   - GET /v1/queues lists exactly the queues the key reaches.
func TestReachEveryEndpointEveryKey(t *testing.T) {
	t.Parallel()
	registered := registeredRoutes(t)
	var covered []string
	for route := range reachRoutes {
		covered = append(covered, route)
	}
	sort.Strings(covered)
	require.Equal(t, registered, covered, "every registered route must be in reachRoutes (and in reach.go's routeAccess)")
	for route := range reachRoutes {
		_, ok := routeAccess[route]
		require.True(t, ok, "%s is missing from routeAccess: scoped keys are refused on it", route)
	}

	for _, route := range registered {
		rt := reachRoutes[route]
		method, _, _ := strings.Cut(route, " ")
		for _, k := range keyKinds {
			t.Run(route+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				h := newReachHarness(t)
				code, body := h.as(t, k, method, rt.path(queueA), rt.bodyFor(queueA))
				switch {
				case rt.public:
					require.Equal(t, http.StatusOK, code, body)
					return
				case !k.valid:
					require.Equal(t, http.StatusUnauthorized, code, body)
					require.JSONEq(t, `{"error":"unauthorized"}`, body)
					return
				case rt.list:
					require.Equal(t, http.StatusOK, code, body)
					var got struct {
						Queues []struct {
							Name string `json:"name"`
						} `json:"queues"`
					}
					require.NoError(t, json.Unmarshal([]byte(body), &got))
					names := []string{}
					for _, q := range got.Queues {
						names = append(names, q.Name)
					}
					require.Equal(t, k.listNames, names)
					return
				}
				mayUse := k.full || (k.reachesA && (k.admin || rt.publisher))
				if mayUse {
					require.True(t, code >= 200 && code < 300, "%s as %s: %d %s", route, k.name, code, body)
				} else {
					require.Equal(t, http.StatusForbidden, code, body)
					require.JSONEq(t, forbiddenMsg, body)
				}

				// Outside the reach: the same 403 for a queue that exists
				// and one that does not, without a backend call.
				if !k.full {
					before := backendCalls(h)
					codeB, bodyB := h.as(t, k, method, rt.path(queueB), rt.bodyFor(queueB))
					code404, body404 := h.as(t, k, method, rt.path(queueB404), rt.bodyFor(queueB404))
					require.Equal(t, http.StatusForbidden, codeB, bodyB)
					require.Equal(t, http.StatusForbidden, code404, body404)
					require.Equal(t, bodyB, body404, "a 403 must not tell an existing queue from a missing one")
					require.JSONEq(t, forbiddenMsg, bodyB)
					require.Equal(t, before, backendCalls(h), "a request outside the reach reached the backend")
				}

				// Inside the reach, an unknown queue is 404 to a role that
				// may use the route, 403 to one that may not.
				if k.reachesA || k.full {
					code, body := h.as(t, k, method, rt.path(queueA404), rt.bodyFor(queueA404))
					switch {
					case rt.scheduleID && !k.full:
						require.Equal(t, http.StatusForbidden, code, body)
						require.JSONEq(t, forbiddenMsg, body)
					case (k.admin || rt.publisher) && rt.creates:
						require.Equal(t, http.StatusCreated, code, body)
					case k.admin || rt.publisher:
						require.Equal(t, http.StatusNotFound, code, body)
					default:
						require.Equal(t, http.StatusForbidden, code, body)
						require.JSONEq(t, forbiddenMsg, body)
					}
				}
			})
		}
	}
}

// TestReachMalformedJobID: an id that names no queue is "Job not found" to
// a scoped key, as to any key: it tells nothing about any queue.
func TestReachMalformedJobID(t *testing.T) {
	t.Parallel()
	h := newReachHarness(t)
	w := h.do(t, req{method: http.MethodGet, path: "/v1/jobs/not-an-id", auth: str("Bearer " + keyPublishA)})
	requireError(t, w, http.StatusNotFound, msgJobNotFound)
}

// TestReachSwapsOnReload: Options.Auth returning a new configuration swaps
// the keys and their reach at once, with no restart: a key that widened its
// reach is let in at the next request, a removed key is refused.
func TestReachSwapsOnReload(t *testing.T) {
	t.Parallel()
	var cur atomic.Pointer[config.Auth]
	cur.Store(reachAuth())
	h := newHarness(t, func(o *Options) {
		o.Queues = reachQueues
		o.APIKeys = nil
		o.Auth = func() *config.Auth { return cur.Load() }
	})
	publish := func(key, queue string) int {
		return h.do(t, req{method: http.MethodPost, path: "/v1/queues/" + queue + "/jobs",
			body: `{"payload":{}}`, auth: str("Bearer " + key)}).Code
	}
	require.Equal(t, http.StatusCreated, publish(keyPublishA, queueA))
	require.Equal(t, http.StatusForbidden, publish(keyPublishA, queueB))

	next := reachAuth()
	next.Keys[2].Queues = []string{"tenant-b-*"} // the A publisher now reaches B only
	next.Keys = slices.Delete(next.Keys, 0, 1)   // and the A admin is gone
	cur.Store(next)
	require.Equal(t, http.StatusForbidden, publish(keyPublishA, queueA))
	require.Equal(t, http.StatusCreated, publish(keyPublishA, queueB))
	require.Equal(t, http.StatusUnauthorized, publish(keyAdminA, queueA))
	require.Equal(t, http.StatusCreated, publish(keyFull, queueA))
}

// TestReachKeysOnlyIsNotKeyless: a daemon with auth.keys and no apiKeys
// authenticates (401 without a key) and drops the keyless Host check.
func TestReachKeysOnlyIsNotKeyless(t *testing.T) {
	t.Parallel()
	auth := &config.Auth{Keys: []config.Key{{Key: keyPublishA, Role: config.RolePublisher, Queues: []string{"*"}}}}
	h := newHarness(t, func(o *Options) {
		o.Queues = reachQueues
		o.APIKeys = nil
		o.Auth = func() *config.Auth { return auth }
	})
	requireError(t, h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("")}), http.StatusUnauthorized, "unauthorized")
	w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("Bearer " + keyPublishA), host: "api.example.com"})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
}
