package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// The fake backend cancels as the store would answer: every job it is asked
// about is cancelled (ids ending "done" are terminal already), and a bulk
// cancel takes 3 jobs.
func (f *fakeBackend) Cancel(_ context.Context, q config.Queue, id, reason string) (*store.Job, error) {
	f.record(adminCall{Method: "Cancel", Queue: q.Name, IDs: []string{id}, Reason: reason})
	if f.getJobFn != nil {
		if _, err := f.getJobFn(q, id); err != nil {
			return nil, err
		}
	}
	dr, le := "cancelled", store.CancelError(reason)
	return &store.Job{ID: id, Queue: q.Name, Status: store.StatusDead, MaxAttempts: q.MaxAttempts, Payload: []byte(`{}`),
		DeadReason: &dr, LastError: &le, CreatedAt: t0, ScheduledFor: t0, ExpiresAt: t0, History: []store.Attempt{}}, nil
}

func (f *fakeBackend) CancelBulk(_ context.Context, q config.Queue, flt store.CancelFilter, reason string, until time.Time) (int, bool, error) {
	f.record(adminCall{Method: "CancelBulk", Queue: q.Name, Reason: reason})
	if flt.FlowKey != nil {
		return 0, true, nil
	}
	return 3, true, nil
}

func TestCancelOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID("emails")
	w := h.post(t, "/v1/jobs/"+id+"/cancel", `{"reason":"not needed"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"status":"dead"`)
	require.Contains(t, w.Body.String(), `"lastError":"cancelled: not needed","deadReason":"cancelled"`)

	w = h.post(t, "/v1/jobs/"+id+"/cancel", `{}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())

	long := make([]byte, 501)
	for i := range long {
		long[i] = 'x'
	}
	w = h.post(t, "/v1/jobs/"+id+"/cancel", `{"reason":"`+string(long)+`"}`)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `"reason":["String must contain at most 500 character(s)"]`)
	w = h.post(t, "/v1/jobs/"+id+"/cancel", `{"why":"x"}`)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `"why":["Unrecognized field"]`)

	w = h.post(t, "/v1/jobs/job_nope/cancel", `{}`)
	require.Equal(t, http.StatusNotFound, w.Code)
}

func TestCancelOneMapsStoreErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.getJobFn = func(q config.Queue, id string) (*store.Job, error) { return nil, store.ErrNotFound }
	w := h.post(t, "/v1/jobs/"+newID("emails")+"/cancel", `{}`)
	require.Equal(t, http.StatusNotFound, w.Code)
	require.JSONEq(t, `{"error":"Job not found"}`, w.Body.String())
}

func TestCancelBulkValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct{ body, field, msg string }{
		{`{}`, "", "Give at least one filter (status, flowKey, createdBefore) or all: true"},
		{`{"all":false}`, "all", "Invalid literal value, expected true"},
		{`{"status":"pending"}`, "status", "Expected array, received string"},
		{`{"status":[]}`, "status", "Array must contain at least 1 element(s)"},
		{`{"status":["dead"]}`, "status", "Invalid enum value. Expected 'pending' | 'processing' | 'awaiting_ack', received 'dead'"},
		{`{"flowKey":""}`, "flowKey", "A flow key is 1-255 bytes of UTF-8 without control characters"},
		{`{"flowKey":"a\nb"}`, "flowKey", "A flow key is 1-255 bytes of UTF-8 without control characters"},
		{`{"createdBefore":"yesterday"}`, "createdBefore", "Invalid datetime (ISO-8601, e.g. 2026-01-01T00:00:00.000Z)"},
		{`{"all":true,"ids":["x"]}`, "ids", "Unrecognized field"},
	} {
		w := h.post(t, "/v1/queues/emails/cancel", tc.body)
		require.Equal(t, http.StatusBadRequest, w.Code, tc.body)
		if tc.field == "" {
			require.Contains(t, w.Body.String(), `"formErrors":["`+tc.msg+`"]`, tc.body)
		} else {
			require.Contains(t, w.Body.String(), `"`+tc.field+`":["`+tc.msg+`"]`, tc.body)
		}
	}
	for _, body := range []string{`{"all":true}`, `{"status":["pending","processing"]}`,
		`{"createdBefore":"2026-01-01T00:00:00.000Z"}`, `{"status":["awaiting_ack"],"reason":"drain"}`} {
		w := h.post(t, "/v1/queues/emails/cancel", body)
		require.Equal(t, http.StatusOK, w.Code, body)
		require.JSONEq(t, `{"cancelled":3,"done":true}`, w.Body.String())
	}
	w := h.post(t, "/v1/queues/emails/cancel", `{"flowKey":"tenant-a"}`)
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"cancelled":0,"done":true}`, w.Body.String())
	w = h.post(t, "/v1/queues/nope/cancel", `{"all":true}`)
	require.Equal(t, http.StatusNotFound, w.Code)
}

func TestPublishReplaced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.backend.publishFn = func(q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
		out := make([]store.Published, len(jobs))
		for i, j := range jobs {
			out[i] = store.Published{ID: "job_01m8t4fd63x0nnjfbq5mh1n313_emails", Status: store.StatusPending, CreatedAt: t0,
				Replaced: j.ReplaceKey == "k"}
		}
		return out, nil
	}
	w := h.post(t, "/v1/queues/emails/jobs", `{"payload":{},"replaceKey":"k"}`)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, `{"id":"job_01m8t4fd63x0nnjfbq5mh1n313_emails","status":"pending","createdAt":"2026-01-02T03:04:05.678Z","replaced":true}`+"\n", w.Body.String())
	w = h.post(t, "/v1/queues/emails/jobs", `{"payload":{},"replaceKey":"other"}`)
	require.Equal(t, http.StatusCreated, w.Code)
	require.NotContains(t, w.Body.String(), "replaced")
	require.Equal(t, "other", h.backend.publishCalls()[1][0].ReplaceKey)
	w = h.post(t, "/v1/queues/emails/jobs/batch", `{"jobs":[{"payload":{},"replaceKey":"k"},{"payload":{}}]}`)
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Body.String(), `"duplicate":false,"replaced":true},{`)
	w = h.post(t, "/v1/queues/emails/jobs", `{"payload":{},"replaceKey":""}`)
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `"replaceKey":["String must contain at least 1 character(s)"]`)
}
