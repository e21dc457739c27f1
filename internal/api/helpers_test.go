package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

const testKey = "sk_test_key_1"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

// fakeBackend records calls and answers with the configured functions.
type fakeBackend struct {
	mu        sync.Mutex
	published [][]store.NewJob
	callbacks []store.Callback
	gets      []string
	statuses  []string

	publishFn  func(q config.Queue, jobs []store.NewJob) ([]store.Published, error)
	getJobFn   func(q config.Queue, id string) (*store.Job, error)
	callbackFn func(q config.Queue, cb store.Callback) error
	statusFn   func(q config.Queue) (store.QueueStatus, error)
	pingErr    error

	admin       []adminCall
	listDeadFn  func(q config.Queue, limit int, cursor string) ([]*store.Job, string, error)
	replayFn    func(q config.Queue, ids []string) (int, error)
	replayAllFn func(q config.Queue) (int, error)
	pauseFn     func(q config.Queue, reason string) error
	resumeFn    func(q config.Queue) error
	// deleteErr is what DeleteQueue returns (queuewrite_test.go).
	deleteErr error
}

// adminCall records one administration call: which method, on which queue,
// with which arguments.
type adminCall struct {
	Method string
	Queue  string
	Limit  int
	Cursor string
	IDs    []string
	Reason string
}

func (f *fakeBackend) record(c adminCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admin = append(f.admin, c)
}

func (f *fakeBackend) adminCalls() []adminCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]adminCall(nil), f.admin...)
}

func (f *fakeBackend) ListDead(_ context.Context, q config.Queue, limit int, cursor string) ([]*store.Job, string, error) {
	f.record(adminCall{Method: "ListDead", Queue: q.Name, Limit: limit, Cursor: cursor})
	if f.listDeadFn != nil {
		return f.listDeadFn(q, limit, cursor)
	}
	return []*store.Job{}, "", nil
}

func (f *fakeBackend) Replay(_ context.Context, q config.Queue, ids []string) (int, error) {
	f.record(adminCall{Method: "Replay", Queue: q.Name, IDs: ids})
	if f.replayFn != nil {
		return f.replayFn(q, ids)
	}
	return len(ids), nil
}

func (f *fakeBackend) ReplayAll(_ context.Context, q config.Queue) (int, error) {
	f.record(adminCall{Method: "ReplayAll", Queue: q.Name})
	if f.replayAllFn != nil {
		return f.replayAllFn(q)
	}
	return 0, nil
}

func (f *fakeBackend) Pause(_ context.Context, q config.Queue, reason string) error {
	f.record(adminCall{Method: "Pause", Queue: q.Name, Reason: reason})
	if f.pauseFn != nil {
		return f.pauseFn(q, reason)
	}
	return nil
}

func (f *fakeBackend) Resume(_ context.Context, q config.Queue) error {
	f.record(adminCall{Method: "Resume", Queue: q.Name})
	if f.resumeFn != nil {
		return f.resumeFn(q)
	}
	return nil
}

func (f *fakeBackend) Publish(_ context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
	f.mu.Lock()
	f.published = append(f.published, jobs)
	fn := f.publishFn
	f.mu.Unlock()
	if fn != nil {
		return fn(q, jobs)
	}
	var g store.IDGen
	out := make([]store.Published, len(jobs))
	for i := range jobs {
		out[i] = store.Published{ID: g.New(q.Name), Status: store.StatusPending, CreatedAt: t0}
	}
	return out, nil
}

func (f *fakeBackend) GetJob(_ context.Context, q config.Queue, id string) (*store.Job, error) {
	f.mu.Lock()
	f.gets = append(f.gets, id)
	fn := f.getJobFn
	f.mu.Unlock()
	if fn != nil {
		return fn(q, id)
	}
	return nil, store.ErrNotFound
}

func (f *fakeBackend) Callback(_ context.Context, q config.Queue, cb store.Callback) error {
	f.mu.Lock()
	f.callbacks = append(f.callbacks, cb)
	fn := f.callbackFn
	f.mu.Unlock()
	if fn != nil {
		return fn(q, cb)
	}
	return nil
}

func (f *fakeBackend) QueueStatus(_ context.Context, q config.Queue) (store.QueueStatus, error) {
	f.mu.Lock()
	f.statuses = append(f.statuses, q.Name)
	fn := f.statusFn
	f.mu.Unlock()
	if fn != nil {
		return fn(q)
	}
	return store.QueueStatus{Name: q.Name, Hold: store.Hold{State: store.HoldOpen}}, nil
}

func (f *fakeBackend) Ping(context.Context) error { return f.pingErr }

func (f *fakeBackend) publishCalls() [][]store.NewJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]store.NewJob(nil), f.published...)
}

func (f *fakeBackend) callbackCalls() []store.Callback {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.Callback(nil), f.callbacks...)
}

type fakeWaker struct {
	mu    sync.Mutex
	woken []string
}

func (w *fakeWaker) Wake(q string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.woken = append(w.woken, q)
}

func (w *fakeWaker) WakeState(q string) { w.Wake(q) }

func (w *fakeWaker) calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.woken...)
}

func testQueues() map[string]config.Queue {
	return map[string]config.Queue{
		"emails": {
			Name:          "emails",
			WebhookURL:    "https://hooks.example.com/emails",
			SigningSecret: "whsec_secret",
			QueueSettings: config.QueueSettings{
				Mode: "standard", Concurrency: 10, RateLimitMax: 100, RateLimitWindow: 1500 * time.Millisecond,
				MaxAttempts: 5, MaxDefers: 20,
			},
		},
		"tasks": {
			Name:       "tasks",
			WebhookURL: "https://user:hunter2@hooks.example.com/tasks",
			QueueSettings: config.QueueSettings{
				Mode: "ack", Concurrency: 2, RateLimitMax: 0, RateLimitWindow: time.Minute,
				MaxAttempts: 3, MaxDefers: 10,
			},
		},
	}
}

type harness struct {
	srv     *Server
	backend *fakeBackend
	waker   *fakeWaker
}

func newHarness(t testing.TB, mod ...func(*Options)) *harness {
	t.Helper()
	h := &harness{backend: &fakeBackend{}, waker: &fakeWaker{}}
	opts := Options{
		Backend:         h.backend,
		Waker:           h.waker,
		Queues:          testQueues,
		APIKeys:         func() []string { return []string{"sk_other_key", testKey} },
		MaxPayloadBytes: 4096,
	}
	for _, m := range mod {
		m(&opts)
	}
	h.srv = New(opts)
	return h
}

// req is one request; JSON content type and the test key unless overridden.
// host is the Host header (httptest's example.com when empty); origin is an
// Origin header (none when empty).
type req struct {
	method, path, body string
	contentType        *string
	auth               *string
	host, origin       string
}

func str(s string) *string { return &s }

func (h *harness) do(t testing.TB, rq req) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader = http.NoBody
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	r := httptest.NewRequest(rq.method, rq.path, body)
	if rq.host != "" {
		r.Host = rq.host
	}
	if rq.origin != "" {
		r.Header.Set("Origin", rq.origin)
	}
	ct := "application/json"
	if rq.contentType != nil {
		ct = *rq.contentType
	}
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	auth := "Bearer " + testKey
	if rq.auth != nil {
		auth = *rq.auth
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(w, r)
	return w
}

func (h *harness) post(t testing.TB, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return h.do(t, req{method: http.MethodPost, path: path, body: body})
}

func (h *harness) get(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	return h.do(t, req{method: http.MethodGet, path: path})
}

// requireError asserts status and {"error": msg}.
func requireError(t *testing.T, w *httptest.ResponseRecorder, status int, msg string) {
	t.Helper()
	require.Equal(t, status, w.Code, w.Body.String())
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Len(t, body, 1, w.Body.String())
	require.Equal(t, msg, body["error"])
}

// validation decodes a 400 validation body.
type validationBody struct {
	Error struct {
		FormErrors  []string            `json:"formErrors"`
		FieldErrors map[string][]string `json:"fieldErrors"`
	} `json:"error"`
}

func requireValidation(t *testing.T, w *httptest.ResponseRecorder) validationBody {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	var vb validationBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &vb))
	require.NotNil(t, vb.Error.FormErrors, "formErrors must be present: %s", w.Body.String())
	require.NotNil(t, vb.Error.FieldErrors, "fieldErrors must be present: %s", w.Body.String())
	return vb
}

// requireFieldError asserts a 400 whose field errors are exactly the given fields.
func requireFieldErrors(t *testing.T, w *httptest.ResponseRecorder, fields ...string) validationBody {
	t.Helper()
	vb := requireValidation(t, w)
	got := make([]string, 0, len(vb.Error.FieldErrors))
	for k := range vb.Error.FieldErrors {
		got = append(got, k)
	}
	require.ElementsMatch(t, fields, got, w.Body.String())
	return vb
}

func newID(queue string) string {
	var g store.IDGen
	return g.New(queue)
}

// newChunkedRequest builds a request with an unknown length (no Content-Length).
func newChunkedRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, io.NopCloser(strings.NewReader(body)))
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+testKey)
	return r
}

func serve(h *harness, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(w, r)
	return w
}
