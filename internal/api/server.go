package api

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/events"
	"github.com/simpleq/simpleqd/internal/wiretime"
)

// DefaultMaxPayloadBytes is the request body limit used when
// Options.MaxPayloadBytes is not set; it matches the config default (1 MiB)
// so a zero Options still refuses unbounded bodies.
const DefaultMaxPayloadBytes int64 = 1 << 20

// Options configures a Server. Everything a live config reload may change is
// taken as a function so the next request sees the new value without
// rebuilding the Server.
type Options struct {
	// Backend stores and reads jobs and queue state (Redis in the daemon).
	Backend Backend
	// Waker is told the queue name after a publish stored at least one new
	// job, a replay moved jobs back or a resume, so dispatchers start without
	// polling. Nil means nobody to wake.
	Waker Waker
	// Queues returns the currently configured queues by name. Nil means none.
	Queues Queues
	// Queue, when set, looks one queue up by name (the hot path of every
	// publish and job read), so a daemon with thousands of queues need not
	// hand out a map of them all for each request; Queues then only serves
	// GET /v1/queues.
	Queue func(name string) (config.Queue, bool)
	// APIKeys returns the currently accepted Bearer keys. Nil, or no non-empty
	// key, disables authentication (config only allows that on loopback).
	// Auth, when set, is used instead.
	APIKeys func() []string
	// Auth returns the auth section in force: auth.apiKeys (full access)
	// and auth.keys (a role and a reach each, reach.go). One pointer per
	// loaded configuration, never modified afterwards: the keys are hashed
	// once per pointer, and a reload swaps every key and its reach at once.
	Auth func() *config.Auth
	// MaxPayloadBytes bounds every request body (413 above it); <= 0 means
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int64
	// MaxConcurrentRequests bounds the /v1 requests served at once; past it
	// the API answers 429 with Retry-After: 1 (api.md), so an overload sheds
	// load instead of queueing without bound. <= 0 means no bound.
	MaxConcurrentRequests int
	// Logger receives debug request logs and error reports. Nil means no logs.
	Logger *zap.Logger
	// Events is this daemon's in-memory record of recent queue events, read
	// by GET /v1/queues/{queue}/events and written by the admin endpoints.
	// Nil means an always-empty timeline.
	Events *events.Log
	// Redis is shown by /readyz; nil shows nothing.
	Redis *RedisMode
	// Schedules serves /v1/schedules (schedules.go); nil: none.
	Schedules Schedules
}

// Server serves the simpleqd HTTP API. It holds no request state; build it
// once with New and mount Handler on the listener.
type Server struct {
	backend  Backend
	waker    Waker
	queues   Queues
	lookup   func(name string) (config.Queue, bool)
	apiKeys  func() []string
	auth     func() *config.Auth
	maxBytes int64
	log      *zap.Logger
	events   *events.Log
	// redisMode is Options.Redis, for /readyz.
	redisMode *RedisMode
	// schedules is Options.Schedules.
	schedules Schedules

	// ring caches the hashed keys of the current Options.Auth (keyring.go).
	ring atomic.Pointer[keyring]

	mux     *routeMux
	handler http.Handler
	// slots holds one token per request being served (nil: unbounded).
	slots chan struct{}
}

// New builds a Server from opts and registers every route.
func New(opts Options) *Server {
	s := &Server{
		backend:  opts.Backend,
		waker:    opts.Waker,
		queues:   opts.Queues,
		lookup:   opts.Queue,
		apiKeys:  opts.APIKeys,
		auth:     opts.Auth,
		maxBytes: opts.MaxPayloadBytes,
		log:      opts.Logger,
		events:   opts.Events,
		mux:      &routeMux{ServeMux: http.NewServeMux()},

		redisMode: opts.Redis,
		schedules: opts.Schedules,
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxPayloadBytes
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if opts.MaxConcurrentRequests > 0 {
		s.slots = make(chan struct{}, opts.MaxConcurrentRequests)
	}
	s.mux.s = s
	s.routes()
	// Outermost first: log everything (including 401s), turn panics into a
	// JSON 500, refuse what a keyless daemon must not serve to a browser
	// (before any load-shedding slot is taken), authenticate, refuse
	// state changes that are not JSON (browser.go), then route with JSON
	// 404/405 for unknown paths.
	s.handler = s.logRequests(s.recoverPanics(s.keylessGuard(s.shedLoad(s.requireAuth(requireJSON(s.jsonFallback(s.mux.ServeMux)))))))
	return s
}

// Handler returns the http.Handler serving the whole API, ready to mount on a
// listener (or to wrap, e.g. to add /metrics, which needs no key).
func (s *Server) Handler() http.Handler { return s.handler }

// routes registers every resource's routes; each resource's file has its own
// register method (admin.go: dead letters, replay, pause/resume).
func (s *Server) routes() {
	s.registerHealthRoutes()
	s.registerJobRoutes()
	s.registerCallbackRoutes()
	s.registerQueueRoutes()
	s.registerQueueWriteRoutes()
	s.registerAdminRoutes()
	s.registerListRoutes()
	s.registerCancelRoutes()
	s.registerKeyRoutes()
	s.registerEventRoutes()
	s.registerScheduleRoutes()
	s.registerOpenAPIRoutes()
}

// jsonFallback answers unknown paths and wrong methods with the contract's
// JSON error body instead of ServeMux's plain text, keeping the Allow header.
func (s *Server) jsonFallback(next *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The publish endpoints, by far the busiest, skip the mux's routing
		// (two pattern matches per request here); anything unusual about
		// the path goes the general way below.
		if r.Method == http.MethodPost {
			if name, batch, ok := publishPath(r.URL.Path); ok {
				r.SetPathValue("queue", name)
				if !publishAllowed(w, r, batch) {
					return
				}
				if batch {
					s.handlePublishBatch(w, r)
				} else {
					s.handlePublish(w, r)
				}
				return
			}
		}
		h, pattern := next.Handler(r)
		if pattern != "" {
			next.ServeHTTP(w, r) // ServeHTTP (not h) so path values are set
			return
		}
		// No pattern: h is ServeMux's 404 or 405 handler. Run it against a
		// scratch writer to learn which, then answer in JSON.
		probe := &headerProbe{header: make(http.Header), status: http.StatusOK}
		h.ServeHTTP(probe, r)
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch probe.status {
		case http.StatusMethodNotAllowed:
			writeError(w, http.StatusMethodNotAllowed, "Method not allowed")
		default:
			writeError(w, http.StatusNotFound, "Not found")
		}
	})
}

// headerProbe records the status and headers a handler sets, discarding the body.
type headerProbe struct {
	header http.Header
	status int
	wrote  bool
}

func (p *headerProbe) Header() http.Header { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) {
	p.wrote = true
	return len(b), nil
}
func (p *headerProbe) WriteHeader(code int) {
	if !p.wrote {
		p.status = code
		p.wrote = true
	}
}

// statusRecorder remembers the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *statusRecorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *statusRecorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *statusRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// logRequests logs one debug line per request: method, path, status, size and
// duration. It deliberately logs neither bodies (payloads) nor headers (keys).
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ce := s.log.Check(zap.DebugLevel, "http request"); ce == nil {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.log.Debug("http request",
			zap.String("method", r.Method),
			zap.String("path", r.URL.Path),
			zap.Int("status", status),
			zap.Int64("bytes", rec.bytes),
			zap.Duration("duration", time.Since(start)),
		)
	})
}

// recoverPanics turns a handler panic into a logged JSON 500 instead of a
// dropped connection. http.ErrAbortHandler keeps its meaning.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in HTTP handler",
				zap.String("method", r.Method),
				zap.String("path", r.URL.Path),
				zap.Any("panic", v),
				zap.Stack("stack"),
			)
			writeError(w, http.StatusInternalServerError, msgInternal)
		}()
		next.ServeHTTP(w, r)
	})
}

// formatTime renders t the one way the wire uses (package wiretime).
func formatTime(t time.Time) string { return wiretime.Format(t) }

// formatTimePtr is formatTime for nullable times (nil → JSON null).
func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// shedLoad answers 429 with Retry-After: 1 when MaxConcurrentRequests
// requests are already being served. Health checks are never shed: a load
// balancer must still see the daemon alive and ready.
func (s *Server) shedLoad(next http.Handler) http.Handler {
	if s.slots == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "API overloaded: too many concurrent requests, retry later")
		}
	})
}

// publishPath recognises /v1/queues/{queue}/jobs and .../jobs/batch with a
// queue name of one plain path segment.
func publishPath(path string) (queue string, batch, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1/queues/")
	if !found {
		return "", false, false
	}
	if q, found := strings.CutSuffix(rest, "/jobs/batch"); found {
		queue, batch = q, true
	} else if q, found := strings.CutSuffix(rest, "/jobs"); found {
		queue = q
	} else {
		return "", false, false
	}
	if queue == "" || queue == "." || queue == ".." || strings.ContainsRune(queue, '/') {
		return "", false, false
	}
	return queue, batch, true
}
