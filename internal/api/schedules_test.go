package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// fakeSchedules keeps schedules in memory. The id "sc-<queue>" names a
// schedule of that queue for every queue of reachQueues (the reach test
// builds its paths so).
type fakeSchedules struct {
	mu   sync.Mutex
	byID map[string]*store.Schedule
}

func newFakeSchedules(queues ...string) *fakeSchedules {
	f := &fakeSchedules{byID: map[string]*store.Schedule{}}
	for _, q := range queues {
		f.byID["sc-"+q] = &store.Schedule{ID: "sc-" + q, Queue: q, Cron: "@every 1m", Timezone: "UTC",
			Payload: []byte(`{}`), NextRunAt: time.Unix(1800000000, 0).UTC(), Source: store.ScheduleSourceAPI}
	}
	return f
}

func (f *fakeSchedules) Put(_ context.Context, q config.Queue, sc store.Schedule) (bool, *store.Schedule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sc.ID == "" {
		sc.ID = "sch_new"
	}
	old, ok := f.byID[sc.ID]
	if ok && old.Source == store.ScheduleSourceFile {
		return false, nil, store.ErrFileSchedule
	}
	sc.Queue = q.Name
	sc.NextRunAt = time.Unix(1800000000, 0).UTC()
	f.byID[sc.ID] = &sc
	return !ok, &sc, nil
}

func (f *fakeSchedules) get(id string) (*store.Schedule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc, ok := f.byID[id]
	if !ok {
		return nil, store.ErrScheduleNotFound
	}
	return sc, nil
}

func (f *fakeSchedules) Get(_ context.Context, _ config.Queue, id string) (*store.Schedule, error) {
	return f.get(id)
}

func (f *fakeSchedules) Queue(_ context.Context, id string) (string, bool, error) {
	sc, err := f.get(id)
	if err != nil {
		return "", false, nil
	}
	return sc.Queue, true, nil
}

func (f *fakeSchedules) List(_ context.Context, q config.Queue) ([]*store.Schedule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*store.Schedule
	for _, sc := range f.byID {
		if sc.Queue == q.Name {
			out = append(out, sc)
		}
	}
	return out, nil
}

func (f *fakeSchedules) Queues(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, sc := range f.byID {
		if !seen[sc.Queue] {
			seen[sc.Queue] = true
			out = append(out, sc.Queue)
		}
	}
	return out, nil
}

func (f *fakeSchedules) Delete(_ context.Context, _ config.Queue, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc, ok := f.byID[id]
	if !ok {
		return store.ErrScheduleNotFound
	}
	if sc.Source == store.ScheduleSourceFile {
		return store.ErrFileSchedule
	}
	// Kept: the reach test calls the same route with several keys.
	return nil
}

func (f *fakeSchedules) pause(id string, paused bool) (*store.Schedule, error) {
	sc, err := f.get(id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sc.Paused = paused
	return sc, nil
}

func (f *fakeSchedules) Pause(_ context.Context, _ config.Queue, id string) (*store.Schedule, error) {
	return f.pause(id, true)
}

func (f *fakeSchedules) Resume(_ context.Context, _ config.Queue, id string) (*store.Schedule, error) {
	return f.pause(id, false)
}

// The Schedule object's exact shape, and validation naming each member.
func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	fs := newFakeSchedules()
	h := newHarness(t, func(o *Options) { o.Schedules = fs })
	w := h.do(t, req{method: http.MethodPost, path: "/v1/schedules",
		body: `{"queue":"tasks","cron":"*/5 * * * *","timezone":"Europe/Paris","payload":{"b":1,"a":12345678901234567890},"id":"five"}`})
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Equal(t, `{"id":"five","queue":"tasks","cron":"*/5 * * * *","timezone":"Europe/Paris","payload":{"b":1,"a":12345678901234567890},`+
		`"flowKey":null,"priority":0,"paused":false,"nextRunAt":"2027-01-15T08:00:00.000Z","lastRunAt":null,"lastJobId":null,"source":"api"}`+"\n",
		w.Body.String())
	w = h.do(t, req{method: http.MethodPost, path: "/v1/schedules",
		body: `{"queue":"tasks","cron":"@every 1m","payload":{},"id":"five"}`})
	require.Equal(t, http.StatusOK, w.Code, "replaced")

	w = h.do(t, req{method: http.MethodPost, path: "/v1/schedules",
		body: `{"queue":7,"cron":"@every 5ms","timezone":"Nowhere/City","payload":"x","flowKey":3,"priority":1.5,"id":"a b","x":1}`})
	require.Equal(t, http.StatusBadRequest, w.Code)
	for _, f := range []string{`"queue"`, `"timezone"`, `"payload"`, `"flowKey"`, `"priority"`, `"id"`, `"x"`} {
		require.Contains(t, w.Body.String(), f)
	}
	w = h.do(t, req{method: http.MethodPost, path: "/v1/schedules", body: `{"queue":"tasks","cron":"@every 5ms","payload":{}}`})
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `"cron":["Invalid cron: it @every must be a whole number of seconds`)

	fs.byID["file"] = &store.Schedule{ID: "file", Queue: "tasks", Source: store.ScheduleSourceFile}
	w = h.do(t, req{method: http.MethodDelete, path: "/v1/schedules/file"})
	requireError(t, w, http.StatusConflict, "Schedule 'file' is managed by the config file")
	w = h.do(t, req{method: http.MethodGet, path: "/v1/schedules/nope"})
	requireError(t, w, http.StatusNotFound, msgScheduleNotFound)
	w = h.do(t, req{method: http.MethodGet, path: "/v1/schedules?queue=tasks"})
	require.Equal(t, http.StatusOK, w.Code)
	require.True(t, strings.Index(w.Body.String(), `"id":"file"`) < strings.Index(w.Body.String(), `"id":"five"`), "by id")
	w = h.do(t, req{method: http.MethodPost, path: "/v1/schedules/five/pause"})
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Body.String(), `"paused":true`)
}
