package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

func newSchedule(id, queue string) store.Schedule {
	return store.Schedule{ID: id, Queue: queue, Cron: "@every 1s", Timezone: "UTC",
		Payload: json.RawMessage(`{"n":12345678901234567890,"b":1}`), Priority: 3, Source: store.ScheduleSourceAPI}
}

// A schedule's life in the store: create, read, fire exactly once per tick
// (a second firing of the same tick is STALE), pause, resume, the file's
// schedules refused to the API, ids unique across queues, delete with the
// queue.
func TestSchedulesStore(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("sq")
		now, err := s.RedisTime(ctx)
		require.NoError(t, err)
		next := now.Add(-time.Second).Truncate(time.Millisecond) // due at once

		created, sc, err := s.PutSchedule(ctx, q, newSchedule("nightly", q.Name), next)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, next.UnixMilli(), sc.NextRunAt.UnixMilli())
		require.Nil(t, sc.LastRunAt)

		got, err := s.GetSchedule(ctx, q, "nightly")
		require.NoError(t, err)
		require.JSONEq(t, `{"n":12345678901234567890,"b":1}`, string(got.Payload))
		require.Equal(t, `{"n":12345678901234567890,"b":1}`, string(got.Payload), "payload byte for byte")
		require.Equal(t, 3, got.Priority)
		qn, ok, err := s.ScheduleQueue(ctx, "nightly")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "sq", qn)

		// The index says the queue is due; one daemon takes it.
		wake, taken, err := s.TakeScheduleQueues(ctx, time.Second, 10)
		require.NoError(t, err)
		require.Len(t, taken, 1)
		require.Equal(t, "sq", taken[0].Queue)
		require.GreaterOrEqual(t, wake, time.Duration(0))
		_, again, err := s.TakeScheduleQueues(ctx, time.Second, 10)
		require.NoError(t, err)
		require.Empty(t, again, "taken for the lease")

		at, due, _, err := s.DueSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, due, 1)
		tick := due[0].Next
		fire := store.Fire{ID: "nightly", Expected: tick, Tick: tick, After: at.Add(time.Hour)}
		_, fired, earliest, err := s.FireSchedules(ctx, q, []store.Fire{fire})
		require.NoError(t, err)
		require.Equal(t, "FIRED", fired[0].Word)
		require.Equal(t, at.Add(time.Hour).UnixMilli(), toMS(t, earliest))
		_, fired2, _, err := s.FireSchedules(ctx, q, []store.Fire{fire})
		require.NoError(t, err)
		require.Equal(t, "STALE", fired2[0].Word, "a tick fires once")
		require.NoError(t, s.SettleScheduleIndex(ctx, q.Name, taken[0].Version, earliest))

		job, err := s.GetJob(ctx, q, fired[0].JobID)
		require.NoError(t, err)
		require.NotNil(t, job.ScheduleID)
		require.Equal(t, "nightly", *job.ScheduleID)
		require.Equal(t, 3, job.Priority, "the job carries its schedule's priority")
		require.Equal(t, store.ScheduleTickKey("nightly", tick), *job.IdempotencyKey)
		require.Equal(t, `{"n":12345678901234567890,"b":1}`, string(job.Payload))
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.Counts.Pending)
		got, err = s.GetSchedule(ctx, q, "nightly")
		require.NoError(t, err)
		require.Equal(t, fired[0].JobID, *got.LastJobID)
		require.Equal(t, tick.UnixMilli(), got.LastRunAt.UnixMilli())

		// Pause: not due any more; resume at a new next tick.
		p, err := s.PauseSchedule(ctx, q, "nightly")
		require.NoError(t, err)
		require.True(t, p.Paused)
		_, _, e, err := s.DueSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, "", e)
		r, err := s.ResumeSchedule(ctx, q, "nightly", at.Add(2*time.Hour))
		require.NoError(t, err)
		require.False(t, r.Paused)
		require.Equal(t, at.Add(2*time.Hour).UnixMilli(), r.NextRunAt.UnixMilli())

		// A replacement with the same spec keeps the next tick and the run.
		sc2 := newSchedule("nightly", q.Name)
		sc2.Payload = json.RawMessage(`{"v":2}`)
		created, rep, err := s.PutSchedule(ctx, q, sc2, at.Add(5*time.Hour))
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, at.Add(2*time.Hour).UnixMilli(), rep.NextRunAt.UnixMilli())
		require.Equal(t, fired[0].JobID, *rep.LastJobID)

		// The id is taken on another queue.
		_, _, err = s.PutSchedule(ctx, queue("other"), newSchedule("nightly", "other"), next)
		var elsewhere *store.ScheduleIDElsewhereError
		require.ErrorAs(t, err, &elsewhere)
		require.Equal(t, "sq", elsewhere.Queue)

		// File schedules are not the API's to change or delete.
		f := newSchedule("fromfile", q.Name)
		f.Source = store.ScheduleSourceFile
		_, _, err = s.PutSchedule(ctx, q, f, next)
		require.NoError(t, err)
		_, _, err = s.PutSchedule(ctx, q, newSchedule("fromfile", q.Name), next)
		require.ErrorIs(t, err, store.ErrFileSchedule)
		require.ErrorIs(t, s.DeleteSchedule(ctx, q, "fromfile", store.ScheduleSourceAPI), store.ErrFileSchedule)
		require.ErrorIs(t, s.DeleteSchedule(ctx, q, "missing", store.ScheduleSourceAPI), store.ErrScheduleNotFound)

		list, err := s.ListSchedules(ctx, q)
		require.NoError(t, err)
		require.Len(t, list, 2)
		n, err := s.DeleteQueueSchedules(ctx, q.Name)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		_, err = s.GetSchedule(ctx, q, "nightly")
		require.True(t, errors.Is(err, store.ErrScheduleNotFound))
		_, ok, err = s.ScheduleQueue(ctx, "nightly")
		require.NoError(t, err)
		require.False(t, ok)
		// The id is free for another queue now.
		_, _, err = s.PutSchedule(ctx, queue("other"), newSchedule("nightly", "other"), next)
		require.NoError(t, err)
	})
}

func toMS(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}
