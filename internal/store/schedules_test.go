package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

func newSchedule(id, queue string) store.Schedule {
	return store.Schedule{ID: id, Queue: queue, Cron: "@every 1s", Timezone: "UTC",
		Payload: json.RawMessage(`{"n":12345678901234567890,"b":1}`), Priority: 3, Source: store.ScheduleSourceAPI}
}

// A schedule's life in the store: create, read, fire exactly once per tick
// (the script computes an @every tick itself; a second look finds nothing
// due), pause, resume, the file's schedules refused to the API, ids unique
// across queues, delete with the queue.
func TestSchedulesStore(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("sq")
		now, err := s.RedisTime(ctx)
		require.NoError(t, err)
		next := now.Truncate(time.Second).Add(-time.Second) // due at once

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

		tk, err := s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Equal(t, 1, tk.Taken)
		require.Empty(t, tk.Cron)
		require.Len(t, tk.Fired, 1)
		fired := tk.Fired
		require.Equal(t, "FIRED", fired[0].Word)
		require.Equal(t, "nightly", fired[0].ID)
		// The latest whole second due: the ticks before it caught up as one.
		tick := fired[0].Tick
		require.Equal(t, tk.Now.Truncate(time.Second).UnixMilli(), tick.UnixMilli())
		require.Equal(t, tick.Add(time.Second).UnixMilli(), toMS(t, tk.Earliest))
		second, err := s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Zero(t, second.Taken, "a tick fires once")
		require.Empty(t, second.Fired)
		require.NoError(t, s.SettleScheduleIndex(ctx, q.Name, taken[0].Version, tk.Earliest))
		at := tk.Now

		// The job record: publish.lua's for a job without a delay, plus
		// its schedule, then the payload byte for byte.
		rec, err := b.rdb.HGet(ctx, "t:{sq}:jobs", fired[0].JobID).Result()
		require.NoError(t, err)
		c := tk.Now.UnixMilli()
		require.Equal(t, fmt.Sprintf(`{"c":%d,"s":%d,"x":%d,"st":"p","pri":3,"k":"schedule:nightly:%d","sid":"nightly"}`+"\n"+
			`{"n":12345678901234567890,"b":1}`, c, c, c+time.Hour.Milliseconds(), tick.UnixMilli()), rec)

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
		none, err := s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Zero(t, none.Taken)
		require.Equal(t, "", none.Earliest)
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
		// Another cron moves the next tick to the new one.
		sc3 := newSchedule("nightly", q.Name)
		sc3.Cron = "@every 2s"
		_, rep, err = s.PutSchedule(ctx, q, sc3, at.Add(5*time.Hour))
		require.NoError(t, err)
		require.Equal(t, at.Add(5*time.Hour).UnixMilli(), rep.NextRunAt.UnixMilli())
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

// Exactly one job per tick even if a schedule's next tick were rewound (its
// run state lost): the tick's idempotency key names the job it published,
// which is recorded as the run (DUP) and nothing is published twice.
func TestScheduleTickIdempotent(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("sq")
		now, err := s.RedisTime(ctx)
		require.NoError(t, err)
		next := now.Truncate(time.Second).Add(-time.Hour)
		_, _, err = s.PutSchedule(ctx, q, newSchedule("beat", q.Name), next)
		require.NoError(t, err)
		tk, err := s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, tk.Fired, 1, "an hour of missed ticks caught up as one")
		first := tk.Fired[0]
		require.Equal(t, "FIRED", first.Word)

		// Rewind: the same tick is due again.
		require.NoError(t, b.rdb.ZAdd(ctx, "t:{sq}:sched_due", redis.Z{Score: float64(first.Tick.UnixMilli()), Member: "beat"}).Err())
		tk, err = s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, tk.Fired, 1)
		require.Equal(t, "DUP", tk.Fired[0].Word)
		require.Equal(t, first.JobID, tk.Fired[0].JobID)
		require.Equal(t, first.Tick, tk.Fired[0].Tick)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.Counts.Pending, "one job for the tick")
		got, err := s.GetSchedule(ctx, q, "beat")
		require.NoError(t, err)
		require.Equal(t, first.JobID, *got.LastJobID)
		require.Equal(t, first.Tick.Add(time.Second), got.NextRunAt)
	})
}

// A cron schedule's tick is computed by the caller (robfig/cron): the script
// returns it as due and FireSchedules fires it once; the same tick again is
// STALE, and a paused schedule's tick is STALE too.
func TestScheduleCronFire(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("sq")
		now, err := s.RedisTime(ctx)
		require.NoError(t, err)
		next := now.Truncate(time.Second).Add(-2 * time.Second)
		sc := newSchedule("cron", q.Name)
		sc.Cron = "* * * * * *"
		sc.Priority = 0
		_, _, err = s.PutSchedule(ctx, q, sc, next)
		require.NoError(t, err)
		tk, err := s.TickSchedules(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, tk.Fired)
		require.Len(t, tk.Cron, 1)
		require.Equal(t, "cron", tk.Cron[0].ID)
		require.Equal(t, next.UnixMilli(), tk.Cron[0].Next.UnixMilli())
		require.Equal(t, "* * * * * *\tUTC", tk.Cron[0].Spec)

		fire := store.Fire{ID: "cron", Expected: next, Tick: next.Add(time.Second), After: tk.Now.Add(time.Minute)}
		_, fired, earliest, err := s.FireSchedules(ctx, q, []store.Fire{fire})
		require.NoError(t, err)
		require.Equal(t, "FIRED", fired[0].Word)
		require.Equal(t, fire.After.UnixMilli(), toMS(t, earliest))
		_, again, _, err := s.FireSchedules(ctx, q, []store.Fire{fire})
		require.NoError(t, err)
		require.Equal(t, "STALE", again[0].Word, "a tick fires once")
		job, err := s.GetJob(ctx, q, fired[0].JobID)
		require.NoError(t, err)
		require.Equal(t, "cron", *job.ScheduleID)
		require.Zero(t, job.Priority)
		require.Equal(t, store.ScheduleTickKey("cron", fire.Tick), *job.IdempotencyKey)
		require.Equal(t, `{"n":12345678901234567890,"b":1}`, string(job.Payload))

		_, err = s.PauseSchedule(ctx, q, "cron")
		require.NoError(t, err)
		paused := store.Fire{ID: "cron", Expected: fire.After, Tick: fire.After, After: fire.After.Add(time.Second)}
		_, stale, _, err := s.FireSchedules(ctx, q, []store.Fire{paused})
		require.NoError(t, err)
		require.Equal(t, "STALE", stale[0].Word)
	})
}

// A firing batch is bounded: 250 due schedules take three calls of 100, and
// the index settles several queues in one call.
func TestScheduleTickBatches(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("sq")
		now, err := s.RedisTime(ctx)
		require.NoError(t, err)
		next := now.Truncate(time.Second).Add(-time.Second)
		for i := range 250 {
			_, _, err := s.PutSchedule(ctx, q, newSchedule(fmt.Sprintf("s%03d", i), q.Name), next)
			require.NoError(t, err)
		}
		var takes []int
		seen := map[string]bool{}
		for range 10 {
			tk, err := s.TickSchedules(ctx, q, 100)
			require.NoError(t, err)
			takes = append(takes, tk.Taken)
			for _, f := range tk.Fired {
				require.Equal(t, "FIRED", f.Word)
				require.False(t, seen[f.ID], "%s fired twice", f.ID)
				seen[f.ID] = true
			}
			if tk.Taken < 100 {
				break
			}
		}
		require.Equal(t, []int{100, 100, 50}, takes)
		require.Len(t, seen, 250)
		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 250, st.Counts.Pending)

		_, _, err = s.PutSchedule(ctx, queue("sq2"), newSchedule("other", "sq2"), next)
		require.NoError(t, err)
		_, taken, err := s.TakeScheduleQueues(ctx, time.Minute, 10)
		require.NoError(t, err)
		require.Len(t, taken, 2)
		settles := make([]store.IndexSettle, 0, 2)
		for _, iq := range taken {
			settles = append(settles, store.IndexSettle{Queue: iq.Queue, Version: iq.Version, Earliest: ""})
		}
		require.NoError(t, s.SettleScheduleIndexes(ctx, settles))
		for _, iq := range taken {
			require.ErrorIs(t, b.rdb.ZScore(ctx, "t:{~sched}:due", iq.Queue).Err(), redis.Nil, "settled to no tick")
		}
	})
}

// TickQueues fires several queues' due schedules in one pipeline, each
// queue's call on its own; after Redis lost its script cache (SCRIPT FLUSH,
// as after a restart) the calls load the script again.
func TestScheduleTickQueues(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newStore(t, rdb)
	ctx := context.Background()
	now, err := s.RedisTime(ctx)
	require.NoError(t, err)
	next := now.Truncate(time.Second).Add(-time.Second)
	qs := []store.QueueParams{queue("p1"), queue("p2"), queue("p3")}
	for i, q := range qs {
		for j := range i + 1 {
			_, _, err := s.PutSchedule(ctx, q, newSchedule(fmt.Sprintf("%s-%d", q.Name, j), q.Name), next)
			require.NoError(t, err)
		}
	}
	out, errs := s.TickQueues(ctx, qs, 100)
	for i := range qs {
		require.NoError(t, errs[i])
		require.Len(t, out[i].Fired, i+1, qs[i].Name)
		for _, f := range out[i].Fired {
			require.Equal(t, "FIRED", f.Word)
			q, ok := store.QueueOfJob(f.JobID)
			require.True(t, ok)
			require.Equal(t, qs[i].Name, q, "the job's id names its queue")
		}
	}

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	require.NoError(t, rdb.ZAdd(ctx, "t:{p3}:sched_due", redis.Z{Score: float64(next.UnixMilli() - 5000), Member: "p3-0"}).Err())
	out, errs = s.TickQueues(ctx, qs, 100)
	for i := range qs {
		require.NoError(t, errs[i])
	}
	require.Len(t, out[2].Fired, 1)
	require.Equal(t, "p3-0", out[2].Fired[0].ID)
	require.Empty(t, out[0].Fired)
}
