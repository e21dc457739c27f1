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

// ListJobs and Stats make the fake backend a JobLister and a StatsReader;
// each call is recorded like the administration calls.
func (f *fakeBackend) ListJobs(_ context.Context, q config.Queue, st store.Status, limit int, cursor string) ([]*store.Job, string, error) {
	f.record(adminCall{Method: "ListJobs", Queue: q.Name, Limit: limit, Cursor: cursor, Reason: string(st)})
	if cursor == "bad" {
		return nil, "", &store.InvalidCursorError{Cursor: cursor, Reason: "not a cursor returned by this endpoint"}
	}
	j := &store.Job{ID: newID(q.Name), Queue: q.Name, Status: st, MaxAttempts: 3, Payload: json.RawMessage(`{"a":1}`),
		CreatedAt: t0, ScheduledFor: t0, ExpiresAt: t0.Add(time.Hour), Priority: 7}
	return []*store.Job{j}, "next-page", nil
}

// ListJobsByKey makes the fake backend a KeyedJobLister; the flow key is
// recorded as the call's one id.
func (f *fakeBackend) ListJobsByKey(ctx context.Context, q config.Queue, st store.Status, flowKey string, limit int, cursor string) ([]*store.Job, string, error) {
	f.record(adminCall{Method: "ListJobsByKey", Queue: q.Name, Limit: limit, Cursor: cursor, IDs: []string{flowKey}, Reason: string(st)})
	return nil, "", nil
}

func (f *fakeBackend) Stats(_ context.Context, q config.Queue, since, until time.Time) (store.Stats, error) {
	f.record(adminCall{Method: "Stats", Queue: q.Name})
	b := store.StatsBucket{Start: t0.Truncate(time.Minute), HeldMS: 1500,
		StatsCounters: store.StatsCounters{Success: 4, Deferred: 2, HTTP429: 1, Started: 6, Holds: 1}}
	return store.Stats{Now: t0, Since: b.Start, Until: b.Start.Add(time.Minute), Buckets: []store.StatsBucket{b},
		Totals: b.StatsCounters, HeldMS: 1500, Holds: []store.HoldWindow{{From: t0, Until: t0.Add(1500 * time.Millisecond)}}}, nil
}

func TestListJobsAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/v1/queues/emails/jobs?status=pending&limit=5&cursor=abc")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var page struct {
		Jobs       []map[string]any `json:"jobs"`
		NextCursor *string          `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Len(t, page.Jobs, 1)
	require.Equal(t, "pending", page.Jobs[0]["status"])
	require.EqualValues(t, 7, page.Jobs[0]["priority"])
	require.Equal(t, "next-page", *page.NextCursor)
	require.Equal(t, []adminCall{{Method: "ListJobs", Queue: "emails", Limit: 5, Cursor: "abc", Reason: "pending"}}, h.backend.adminCalls())

	// The default page is 100.
	h.get(t, "/v1/queues/emails/jobs?status=dead")
	require.Equal(t, 100, h.backend.adminCalls()[1].Limit)

	// A flow key filter lists that lane's jobs (keys.md §5).
	w = h.get(t, "/v1/queues/emails/jobs?status=pending&flowKey=tenant-a")
	require.Equal(t, http.StatusOK, w.Code)
	require.Len(t, h.backend.adminCalls(), 3)
	require.Equal(t, adminCall{Method: "ListJobsByKey", Queue: "emails", Limit: 100, IDs: []string{"tenant-a"}, Reason: "pending"},
		h.backend.adminCalls()[2])

	w = h.get(t, "/v1/queues/nope/jobs?status=pending")
	requireError(t, w, http.StatusNotFound, "Queue 'nope' not found")
}

func TestListJobsValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for path, field := range map[string]string{
		"/v1/queues/emails/jobs":                                                    "status",
		"/v1/queues/emails/jobs?status=":                                            "status",
		"/v1/queues/emails/jobs?status=waiting":                                     "status",
		"/v1/queues/emails/jobs?status=pending&status=dead":                         "status",
		"/v1/queues/emails/jobs?status=pending&limit=0":                             "limit",
		"/v1/queues/emails/jobs?status=pending&limit=1001":                          "limit",
		"/v1/queues/emails/jobs?status=pending&limit=x":                             "limit",
		"/v1/queues/emails/jobs?status=pending&flowKey=a%00b":                       "flowKey",
		"/v1/queues/emails/jobs?status=pending&flowKey=" + strings.Repeat("k", 256): "flowKey",
		"/v1/queues/emails/jobs?status=pending&cursor=bad":                          "cursor",
		"/v1/queues/emails/jobs?status=pending&cursor=" + strings.Repeat("c", 1025): "cursor",
	} {
		w := h.get(t, path)
		require.Equal(t, http.StatusBadRequest, w.Code, path)
		var body struct {
			Error struct {
				FieldErrors map[string][]string `json:"fieldErrors"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), path)
		require.Contains(t, body.Error.FieldErrors, field, "%s: %s", path, w.Body.String())
	}
}

func TestStatsAnswers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.get(t, "/v1/queues/emails/stats")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.JSONEq(t, `{"queue":"emails","resolution":60,"retention":86400,
		"now":"2026-01-02T03:04:05.678Z","since":"2026-01-02T03:04:00.000Z","until":"2026-01-02T03:05:00.000Z",
		"totals":{"deliveries":{"success":4,"failed":0,"lost":0,"deferred":2},"http429":1,"started":6,"probes":0,"holds":1,"dead":0,"heldSeconds":1.5,"laneHolds":0,"laneProbes":0},
		"buckets":[{"start":"2026-01-02T03:04:00.000Z","deliveries":{"success":4,"failed":0,"lost":0,"deferred":2},"http429":1,"started":6,"probes":0,"holds":1,"dead":0,"heldSeconds":1.5,"laneHolds":0,"laneProbes":0}],
		"holds":[{"from":"2026-01-02T03:04:05.678Z","until":"2026-01-02T03:04:07.178Z"}]}`, w.Body.String())

	for path, field := range map[string]string{
		"/v1/queues/emails/stats?since=yesterday":                                       "since",
		"/v1/queues/emails/stats?until=2026-13-01T00:00:00Z":                            "until",
		"/v1/queues/emails/stats?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z": "since",
	} {
		w := h.get(t, path)
		require.Equal(t, http.StatusBadRequest, w.Code, path)
		require.Contains(t, w.Body.String(), `"`+field+`"`, path)
	}
	requireError(t, h.get(t, "/v1/queues/nope/stats"), http.StatusNotFound, "Queue 'nope' not found")
}
