package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// The fake backend's lanes: every flow key is a lane with 3 pending jobs,
// but "missing", which does not exist; "held" is held until t0 + 1 min
// with its probe named. Each call is recorded (the flow key as the one id,
// a list's state as the reason).
func fakeKey(q config.Queue, fk string) (store.Key, error) {
	if fk == "missing" {
		return store.Key{}, store.ErrNotFound
	}
	k := store.Key{FlowKey: fk, Counts: store.Counts{Pending: 3, Processing: 1}, Hold: store.Hold{State: store.HoldOpen},
		Concurrency: q.FlowKeys.Concurrency, RateLimitMax: q.FlowKeys.RateLimitMax, Weight: 1}
	if fk == "held" {
		until, probe, reason := t0.Add(time.Minute), "job_probe", "HTTP 429"
		k.Hold = store.Hold{State: store.HoldHeld, Until: &until, ProbeJobID: &probe, Reason: &reason}
	}
	return k, nil
}

func (f *fakeBackend) GetKey(_ context.Context, q config.Queue, fk string) (store.Key, error) {
	f.record(adminCall{Method: "GetKey", Queue: q.Name, IDs: []string{fk}})
	return fakeKey(q, fk)
}

func (f *fakeBackend) ListKeys(_ context.Context, q config.Queue, st store.KeyState, cursor string, limit int) ([]store.Key, string, error) {
	f.record(adminCall{Method: "ListKeys", Queue: q.Name, Limit: limit, Cursor: cursor, Reason: string(st)})
	a, _ := fakeKey(q, "tenant-a")
	h, _ := fakeKey(q, "held")
	if cursor == "7" {
		return []store.Key{a}, "", nil
	}
	return []store.Key{h, a}, "7", nil
}

func (f *fakeBackend) PutKey(_ context.Context, q config.Queue, fk string, o store.KeyOverride) (store.Key, error) {
	var got []string
	for _, p := range []*int{o.Concurrency, o.RateLimitMax, o.Weight} {
		if p == nil {
			got = append(got, "-")
		} else {
			got = append(got, strings.Repeat("i", *p))
		}
	}
	f.record(adminCall{Method: "PutKey", Queue: q.Name, IDs: []string{fk}, Reason: strings.Join(got, ",")})
	k, _ := fakeKey(q, fk)
	if o.Concurrency != nil {
		k.Concurrency = *o.Concurrency
	}
	if o.RateLimitMax != nil {
		k.RateLimitMax = *o.RateLimitMax
	}
	if o.Weight != nil {
		k.Weight = *o.Weight
	}
	k.FlowKey = fk
	return k, nil
}

func (f *fakeBackend) DeleteKey(_ context.Context, q config.Queue, fk string) error {
	f.record(adminCall{Method: "DeleteKey", Queue: q.Name, IDs: []string{fk}})
	_, err := fakeKey(q, fk)
	return err
}

func (f *fakeBackend) ResumeKey(_ context.Context, q config.Queue, fk string) (store.Key, error) {
	f.record(adminCall{Method: "ResumeKey", Queue: q.Name, IDs: []string{fk}})
	k, err := fakeKey(q, fk)
	if err == nil && k.Hold.State == store.HoldHeld {
		k.Hold.State = store.HoldProbing
	}
	return k, err
}

// GET .../keys/{flowKey}: the Key as keys.md §5 spells it, the flow key
// percent-decoded; 404 "Key not found" for a lane that does not exist.
func TestKeysGet(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/v1/queues/emails/keys/held")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.JSONEq(t, `{"flowKey":"held","counts":{"pending":3,"processing":1,"awaitingAck":0},
		"hold":{"state":"held","until":"2026-01-02T03:05:05.678Z","probeJobId":"job_probe","reason":"HTTP 429"},
		"concurrency":0,"rateLimitMax":0,"weight":1}`, w.Body.String())

	w = h.get(t, "/v1/queues/emails/keys/tenant%2Fa%20%C3%A9")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var k map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &k))
	require.Equal(t, "tenant/a é", k["flowKey"])
	require.Equal(t, map[string]any{"state": "open", "until": nil, "probeJobId": nil, "reason": nil}, k["hold"])

	requireError(t, h.get(t, "/v1/queues/emails/keys/missing"), http.StatusNotFound, msgKeyNotFound)
	requireError(t, h.get(t, "/v1/queues/nope/keys/a"), http.StatusNotFound, "Queue 'nope' not found")
	calls := h.backend.adminCalls()
	require.Len(t, calls, 3, "an unknown queue reaches no backend")
	require.Equal(t, []string{"tenant/a é"}, calls[1].IDs)
}

// A flow key in a path that keys.md §1 refuses is a 400 naming flowKey,
// on every route, without a backend call.
func TestKeysPathFlowKeyValidated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, fk := range []string{"a%00b", "%1F", "x%7F", "%C2%85", "%FF%FE", strings.Repeat("k", 256)} {
		for _, rq := range []req{
			{method: http.MethodGet, path: "/v1/queues/emails/keys/" + fk},
			{method: http.MethodPut, path: "/v1/queues/emails/keys/" + fk, body: `{"weight":2}`},
			{method: http.MethodDelete, path: "/v1/queues/emails/keys/" + fk},
			{method: http.MethodPost, path: "/v1/queues/emails/keys/" + fk + "/resume"},
		} {
			vb := requireValidation(t, h.do(t, rq))
			require.Equal(t, []string{msgFlowKey}, vb.Error.FieldErrors["flowKey"], "%s %s", rq.method, rq.path)
		}
	}
	require.Empty(t, h.backend.adminCalls())
	// 255 bytes is the most.
	w := h.get(t, "/v1/queues/emails/keys/"+strings.Repeat("é", 127)+"k")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
}

// GET .../keys: the page, the state, limit and cursor handed on, and a
// null nextCursor at the end; bad parameters are 400s naming them.
func TestKeysList(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/v1/queues/emails/keys")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var page struct {
		Keys       []map[string]any `json:"keys"`
		NextCursor *string          `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Len(t, page.Keys, 2)
	require.Equal(t, "held", page.Keys[0]["flowKey"])
	require.Equal(t, "7", *page.NextCursor)

	w = h.get(t, "/v1/queues/emails/keys?state=active&limit=5&cursor=7")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"nextCursor":null`)
	for _, st := range []string{"held", "probing"} {
		require.Equal(t, http.StatusOK, h.get(t, "/v1/queues/emails/keys?state="+st).Code)
	}
	require.Equal(t, []adminCall{
		{Method: "ListKeys", Queue: "emails", Limit: 100},
		{Method: "ListKeys", Queue: "emails", Limit: 5, Cursor: "7", Reason: "active"},
		{Method: "ListKeys", Queue: "emails", Limit: 100, Reason: "held"},
		{Method: "ListKeys", Queue: "emails", Limit: 100, Reason: "probing"},
	}, h.backend.adminCalls())

	for query, field := range map[string]string{
		"state=open":                        "state",
		"state=held&state=x":                "state",
		"limit=0":                           "limit",
		"limit=1001":                        "limit",
		"limit=x":                           "limit",
		"cursor=abc":                        "cursor",
		"cursor=-1":                         "cursor",
		"cursor=" + strings.Repeat("9", 21): "cursor",
	} {
		vb := requireValidation(t, h.get(t, "/v1/queues/emails/keys?"+query))
		require.Contains(t, vb.Error.FieldErrors, field, query)
	}
	requireError(t, h.get(t, "/v1/queues/nope/keys"), http.StatusNotFound, "Queue 'nope' not found")
}

// PUT .../keys/{flowKey}: the whole override (absent and null members
// leave a value to the queue), bounds as keys.md §2 gives them, unknown
// members refused; it wakes the queue's pumps.
func TestKeysPut(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/tenant-a", body: `{"concurrency":2,"rateLimitMax":0,"weight":3.0}`})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"concurrency":2,"rateLimitMax":0,"weight":3}`)
	w = h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/tenant-a", body: `{"weight":null}`})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/new-lane", body: `{}`})
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	calls := h.backend.adminCalls()
	require.Len(t, calls, 3)
	require.Equal(t, "ii,,iii", calls[0].Reason)
	require.Equal(t, "-,-,-", calls[1].Reason)
	require.Equal(t, []string{"emails", "emails", "emails"}, h.waker.calls())

	for body, field := range map[string]string{
		`{"weight":0}`:            "weight",
		`{"weight":101}`:          "weight",
		`{"weight":"2"}`:          "weight",
		`{"concurrency":-1}`:      "concurrency",
		`{"concurrency":1.5}`:     "concurrency",
		`{"rateLimitMax":-3}`:     "rateLimitMax",
		`{"rateLimitMax":1e12}`:   "rateLimitMax",
		`{"rateLimitWindow":1}`:   "rateLimitWindow",
		`{"weight":1,"weight":2}`: "weight",
	} {
		vb := requireValidation(t, h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/tenant-a", body: body}))
		require.Contains(t, vb.Error.FieldErrors, field, body)
	}
	requireValidation(t, h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/tenant-a", body: `[]`}))
	requireValidation(t, h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/tenant-a"}))
	w = h.do(t, req{method: http.MethodPut, path: "/v1/queues/emails/keys/tenant-a", body: `{}`, contentType: str("text/plain")})
	requireError(t, w, http.StatusUnsupportedMediaType, msgNotJSON)
	require.Len(t, h.backend.adminCalls(), 3, "refused requests reach no backend")
}

// DELETE .../keys/{flowKey}: 204 with or without an override (a lane that
// is gone too), no body or {}, nothing else.
func TestKeysDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, rq := range []req{
		{method: http.MethodDelete, path: "/v1/queues/emails/keys/tenant-a"},
		{method: http.MethodDelete, path: "/v1/queues/emails/keys/missing", body: `{}`},
	} {
		w := h.do(t, rq)
		require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
		require.Empty(t, w.Body.String())
	}
	vb := requireValidation(t, h.do(t, req{method: http.MethodDelete, path: "/v1/queues/emails/keys/tenant-a", body: `{"x":1}`}))
	require.Contains(t, vb.Error.FieldErrors, "x")
	requireError(t, h.do(t, req{method: http.MethodDelete, path: "/v1/queues/nope/keys/a"}), http.StatusNotFound, "Queue 'nope' not found")
	require.Len(t, h.backend.adminCalls(), 2)
}

// POST .../keys/{flowKey}/resume: a held lane goes to probing; 404 for a
// lane that does not exist; it wakes the queue's pumps.
func TestKeysResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.post(t, "/v1/queues/emails/keys/held/resume", "")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"state":"probing"`)
	require.Equal(t, http.StatusOK, h.post(t, "/v1/queues/emails/keys/tenant-a/resume", `{}`).Code)
	requireError(t, h.post(t, "/v1/queues/emails/keys/missing/resume", ""), http.StatusNotFound, msgKeyNotFound)
	vb := requireValidation(t, h.post(t, "/v1/queues/emails/keys/held/resume", `{"reason":"x"}`))
	require.Contains(t, vb.Error.FieldErrors, "reason")
	require.Equal(t, []string{"emails", "emails"}, h.waker.calls())
}
