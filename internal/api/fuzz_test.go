package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Fuzz targets for every request body the API parses (issue #8). Plain `go
// test` runs the seeds below and the corpus in testdata/fuzz/<Target>/;
// `go test ./api -run '^$' -fuzz FuzzPublishBody -fuzztime 5m` explores
// further (docs/reliability.md). Properties, for any bytes and content type:
// no panic, never a 5xx, every rejection a 4xx whose JSON body names the
// problem, and whatever is accepted reaches the backend well-formed.

// fuzzRequest sends one request through the whole handler chain (auth,
// routing, panic recovery) with the fuzzed body and content type.
func fuzzRequest(h *harness, path, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	r.Header.Set("Authorization", "Bearer "+testKey)
	w := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(w, r)
	return w
}

// checkAnswer enforces the contract on any answer: no 5xx; a 4xx is JSON
// {"error": ...} where the error is a non-empty message, or a validation
// object with at least one named message.
func checkAnswer(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("server error %d for bad input: %s", w.Code, w.Body.String())
	}
	if w.Code < 400 {
		return
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%d answered with content type %q", w.Code, ct)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%d answered with a body that is not a JSON object: %q", w.Code, w.Body.String())
	}
	raw, ok := body["error"]
	if !ok || len(body) != 1 {
		t.Fatalf("%d answered without exactly an error member: %s", w.Code, w.Body.String())
	}
	var msg string
	if json.Unmarshal(raw, &msg) == nil {
		if strings.TrimSpace(msg) == "" {
			t.Fatalf("%d with an empty error message", w.Code)
		}
		return
	}
	if w.Code != http.StatusBadRequest {
		t.Fatalf("%d with a structured error; only 400 carries one: %s", w.Code, w.Body.String())
	}
	var ve struct {
		FormErrors  []string            `json:"formErrors"`
		FieldErrors map[string][]string `json:"fieldErrors"`
	}
	if err := json.Unmarshal(raw, &ve); err != nil || ve.FormErrors == nil || ve.FieldErrors == nil {
		t.Fatalf("400 error is neither a message nor {formErrors, fieldErrors}: %s", w.Body.String())
	}
	named := 0
	for _, m := range ve.FormErrors {
		if strings.TrimSpace(m) != "" {
			named++
		}
	}
	for field, ms := range ve.FieldErrors {
		// A field may be named "" (a body member with an empty name is
		// reported under its own name); it must still carry a message.
		if len(ms) == 0 {
			t.Fatalf("400 with a field %q but no message: %s", field, w.Body.String())
		}
		for _, m := range ms {
			if strings.TrimSpace(m) == "" {
				t.Fatalf("400 with an empty field message: %s", w.Body.String())
			}
		}
		named++
	}
	if named == 0 {
		t.Fatalf("400 that names no problem: %s", w.Body.String())
	}
}

// checkJob asserts what a publish handed to the backend is well-formed.
func checkJob(t *testing.T, j store.NewJob) {
	t.Helper()
	p := bytes.TrimSpace(j.Payload)
	if !json.Valid(p) || len(p) == 0 || p[0] != '{' {
		t.Fatalf("accepted a payload that is not a JSON object: %q", j.Payload)
	}
	if n := utf8.RuneCountInString(j.IdempotencyKey); n > maxIdempotencyKeyLen {
		t.Fatalf("accepted an idempotency key of %d characters", n)
	}
	if j.Delay < 0 || j.Delay > seconds(maxDelaySeconds) {
		t.Fatalf("accepted a delay of %s", j.Delay)
	}
}

func FuzzPublishBody(f *testing.F) {
	for _, s := range []struct{ ct, body string }{
		{"application/json", `{"payload":{"to":"a@b.com","n":12345678901234567890}}`},
		{"application/json", `{"payload":{},"idempotencyKey":"k","delay":1.5}`},
		{"application/json; charset=utf-8", `{"payload":{"a":[1,2,{"b":null}]},"delay":86400}`},
		{"application/json", `{"payload":{},"delay":-1}`},
		{"application/json", `{"payload":[],"idempotencyKey":""}`},
		{"application/json", `{"payload":{},"payload":{}}`},
		{"application/json", `{"payload":{},"extra":1}`},
		{"application/json", `{"jobs":[{"payload":{}},{"payload":1}]}`},
		{"application/json", `{"payload":{"x":"\ud800"}}`},
		{"application/json", "{\"payload\":{\"x\":\"\xff\"}}"},
		{"application/json", `{"payload":{}} trailing`},
		{"application/json", `{"delay":1e400,"payload":{}}`},
		{"text/plain", `{"payload":{}}`},
		{"application/json; charset=latin1", `{"payload":{}}`},
		{"", ``},
		{"application/json", `null`},
		{"application/json", strings.Repeat("[", 5000)},
	} {
		f.Add(s.ct, []byte(s.body), false)
		f.Add(s.ct, []byte(s.body), true)
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte, batch bool) {
		h := newHarness(t)
		path := "/v1/queues/emails/jobs"
		if batch {
			path += "/batch"
		}
		w := fuzzRequest(h, path, contentType, body)
		checkAnswer(t, w)
		calls := h.backend.publishCalls()
		if w.Code >= 300 {
			if len(calls) != 0 {
				t.Fatalf("rejected with %d but published", w.Code)
			}
			return
		}
		if len(calls) != 1 {
			t.Fatalf("answered %d after %d backend publishes", w.Code, len(calls))
		}
		if !batch && len(calls[0]) != 1 {
			t.Fatalf("single publish stored %d jobs", len(calls[0]))
		}
		if batch && (len(calls[0]) < 1 || len(calls[0]) > maxBatchJobs) {
			t.Fatalf("batch publish stored %d jobs", len(calls[0]))
		}
		for _, j := range calls[0] {
			checkJob(t, j)
		}
	})
}

func FuzzCallbackBody(f *testing.F) {
	for _, s := range []struct {
		kind uint8
		ct   string
		body string
	}{
		{0, "", ``},
		{0, "application/json", `{"attempt":2}`},
		{0, "application/json", `{"attempt":2.5}`},
		{1, "application/json", `{"retryable":false,"reason":"bad input","attempt":1}`},
		{1, "application/json", `{"retryable":"no"}`},
		{1, "application/json", `{"reason":"` + strings.Repeat("é", 501) + `"}`},
		{2, "application/json", `{"retryAfter":1.5,"scope":"job","reason":"busy"}`},
		{2, "application/json", `{"retryAfter":-1,"scope":"fleet"}`},
		{2, "application/json", `{"retryAfter":1e400}`},
		{2, "application/json", `{"scope":"queue"}`},
		{3, "application/json", `{"retryAfter":0}`},
		{4, "application/json", `{}`},
		{5, "application/json", `{}`},
		{2, "text/plain", `{"retryAfter":1}`},
		{1, "application/json", `[]`},
	} {
		f.Add(s.kind, s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, sel uint8, contentType string, body []byte) {
		h := newHarness(t)
		kinds := []string{"ack", "nack", "defer"}
		kind := kinds[int(sel)%3]
		// The backend's verdict varies too: applied, conflict, stale
		// attempt, unknown job.
		verdicts := []error{nil, store.ErrConflict, store.ErrStaleAttempt, store.ErrNotFound}
		verdict := verdicts[int(sel/3)%len(verdicts)]
		h.backend.callbackFn = func(config.Queue, store.Callback) error { return verdict }
		queue := "tasks"
		if sel >= 240 {
			queue = "emails" // standard mode: always 409
		}
		w := fuzzRequest(h, "/v1/jobs/"+newID(queue)+"/"+kind, contentType, body)
		checkAnswer(t, w)
		calls := h.backend.callbackCalls()
		if w.Code == http.StatusOK {
			if len(calls) != 1 || verdict != nil {
				t.Fatalf("200 after %d callbacks with verdict %v", len(calls), verdict)
			}
			cb := calls[0]
			if string(cb.Kind) != kind || cb.Attempt < 0 || cb.RetryAfter < 0 ||
				utf8.RuneCountInString(cb.Reason) > maxReasonLen {
				t.Fatalf("accepted a malformed callback: %+v", cb)
			}
			if kind == "defer" && cb.Scope != store.ScopeQueue && cb.Scope != store.ScopeJob &&
				cb.Scope != store.ScopeKey && cb.Scope != store.ScopeDefault {
				t.Fatalf("accepted defer scope %q", cb.Scope)
			}
		}
	})
}

func FuzzAdminBody(f *testing.F) {
	for _, s := range []struct {
		route uint8
		body  string
	}{
		{0, `{"ids":["job_01"]}`},
		{0, `{"all":true}`},
		{0, `{"all":false}`},
		{0, `{"ids":[],"all":true}`},
		{0, `{"ids":[1,""]}`},
		{1, `{"reason":"maintenance"}`},
		{1, ``},
		{1, `{"reason":7}`},
		{2, ``},
		{2, `{"x":1}`},
	} {
		f.Add(s.route, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		h := newHarness(t)
		paths := []string{"/v1/queues/emails/dead/replay", "/v1/queues/emails/pause", "/v1/queues/emails/resume"}
		w := fuzzRequest(h, paths[int(route)%len(paths)], "application/json", body)
		checkAnswer(t, w)
		if w.Code >= 300 && len(h.backend.adminCalls()) != 0 {
			t.Fatalf("rejected with %d but called the backend: %v", w.Code, h.backend.adminCalls())
		}
	})
}
