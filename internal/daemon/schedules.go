package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/schedule"
	"github.com/simpleq/simpleqd/internal/store"
)

// daemonSchedules is the daemon's part in schedules (runtime.md §4): the
// scheduler that fires them, the service the API writes through, and the
// sync of the file's schedules at start and on every reload.
type daemonSchedules struct {
	runner *schedule.Runner
	svc    *schedule.Service
	// file receives the file's schedules after a reload; the sync loop
	// applies the latest.
	file chan []config.Schedule
	// initial are the file's schedules at start.
	initial []config.Schedule
}

// initSchedules prepares the scheduler; it starts in startSchedules.
func (d *Daemon) initSchedules(cfg *config.Config) {
	lag := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "simpleqd_schedule_tick_lag_seconds",
		Help:    "Redis' time of a schedule's firing minus the tick it fired, for ticks this daemon fired.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60},
	})
	fired := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "simpleqd_schedule_jobs_total",
		Help: "Jobs published by schedules' ticks on this daemon, by queue.",
	}, []string{"queue"})
	d.metrics.Registry().MustRegister(lag, fired)
	d.sched.runner = schedule.New(schedule.Options{
		Store:  d.store,
		Queues: d.queueMap,
		Wake:   d.bus.Notify,
		OnFired: func(queue, _ string, _ time.Time, l time.Duration) {
			lag.Observe(l.Seconds())
			fired.WithLabelValues(queue).Inc()
		},
		Logger: d.log.Named("scheduler"),
		Lease:  cfg.Dispatch.ScheduleLease,
	})
	d.sched.svc = &schedule.Service{Store: d.store, Kick: d.sched.runner.Kick}
	// runtime.md §4: a schedule on a queue that is deleted is deleted with it.
	d.OnQueueDeleted(func(ctx context.Context, queue string) {
		n, err := d.store.DeleteQueueSchedules(ctx, queue)
		if err != nil {
			d.log.Error("queue deleted; deleting its schedules failed", zap.String("queue", queue), zap.Error(err))
			return
		}
		if n > 0 {
			d.log.Info("schedules deleted with their queue", zap.String("queue", queue), zap.Int("schedules", n))
		}
	})
	d.sched.file = make(chan []config.Schedule, 1)
	d.sched.initial = cfg.Schedules
}

// startSchedules runs the scheduler and the file-schedule sync in g until
// ctx ends.
func (d *Daemon) startSchedules(ctx context.Context, g *errgroup.Group) {
	g.Go(func() error { return d.sched.runner.Run(ctx) })
	g.Go(func() error { d.syncSchedulesLoop(ctx); return nil })
}

// reloadSchedules hands the reloaded file's schedules to the sync loop.
func (d *Daemon) reloadSchedules(cfg *config.Config) {
	select {
	case <-d.sched.file:
	default:
	}
	d.sched.file <- cfg.Schedules
}

func (d *Daemon) syncSchedulesLoop(ctx context.Context) {
	want := d.sched.initial
	for {
		// A sync that failed (Redis away) is tried again until it succeeds
		// or a newer file replaces it.
		for delay := time.Second; ctx.Err() == nil; delay = min(2*delay, 30*time.Second) {
			err := d.syncFileSchedules(ctx, want)
			if err == nil {
				break
			}
			d.log.Warn("file schedules: sync failed; retrying", zap.Error(err), zap.Duration("in", delay))
			select {
			case <-ctx.Done():
				return
			case want = <-d.sched.file:
			case <-time.After(delay):
			}
		}
		select {
		case <-ctx.Done():
			return
		case want = <-d.sched.file:
		}
	}
}

// syncFileSchedules makes the stored file schedules the file's: each one
// written (unchanged timing keeps its next tick and run state), and the
// file schedules the file no longer declares deleted. API schedules are
// untouched; a file schedule whose id an API schedule holds is refused
// with a log line naming it.
func (d *Daemon) syncFileSchedules(ctx context.Context, list []config.Schedule) error {
	queues := d.queueMap()
	keep := map[string]bool{}
	var errs []error
	for _, fs := range list {
		keep[fs.ID] = true
		q, ok := queues[fs.Queue]
		if !ok {
			continue // config validated it; a queue dropped meanwhile
		}
		if q.Name == "" {
			q.Name = fs.Queue
		}
		sc := store.Schedule{ID: fs.ID, Queue: fs.Queue, Cron: fs.Cron, Timezone: fs.Timezone, Payload: fs.Payload,
			FlowKey: fs.FlowKey, Priority: fs.Priority, Source: store.ScheduleSourceFile}
		created, _, err := d.sched.svc.Put(ctx, q, sc)
		var elsewhere *store.ScheduleIDElsewhereError
		switch {
		case errors.Is(err, store.ErrScheduleTaken):
			d.log.Error("file schedule refused: a schedule created over the API holds its id",
				zap.String("schedule", fs.ID), zap.String("queue", fs.Queue))
		case errors.As(err, &elsewhere):
			d.log.Error("file schedule refused: its id is a schedule of another queue",
				zap.String("schedule", fs.ID), zap.String("queue", fs.Queue), zap.String("other", elsewhere.Queue))
		case err != nil:
			errs = append(errs, err)
		case created:
			d.log.Info("file schedule added", zap.String("schedule", fs.ID), zap.String("queue", fs.Queue))
		}
	}
	names, err := d.store.ScheduleQueues(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, name := range names {
		q := config.Queue{Name: name}
		all, err := d.store.ListSchedules(ctx, q)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, sc := range all {
			if sc.Source != store.ScheduleSourceFile || keep[sc.ID] {
				continue
			}
			if err := d.store.DeleteSchedule(ctx, q, sc.ID, store.ScheduleSourceFile); err != nil && !errors.Is(err, store.ErrScheduleNotFound) {
				errs = append(errs, err)
				continue
			}
			d.log.Info("file schedule removed", zap.String("schedule", sc.ID), zap.String("queue", name))
		}
	}
	return errors.Join(errs...)
}
