package schedule

import (
	"context"
	"fmt"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/cronspec"
	"github.com/simpleq/simpleqd/internal/queueparams"
	"github.com/simpleq/simpleqd/internal/store"
)

// Service is the schedules' write path for the API, the CLI (through the
// API) and the config file: it computes a schedule's first tick on Redis'
// clock and stores it. Every daemon's Runner then fires it.
type Service struct {
	Store queueparams.Store
	// Kick, when set, wakes this daemon's Runner after a change (the fleet's
	// are woken over pub/sub by the store).
	Kick func()
}

// Put creates or replaces sc (validated by the caller: Parse must accept
// its cron and time zone), minting an id when it has none. It reports
// whether it created it.
func (s *Service) Put(ctx context.Context, q config.Queue, sc store.Schedule) (bool, *store.Schedule, error) {
	if sc.ID == "" {
		sc.ID = s.Store.NewScheduleID()
	}
	tm, err := cronspec.Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return false, nil, fmt.Errorf("schedule %s: cron %q: %w", sc.ID, sc.Cron, err)
	}
	now, err := s.Store.RedisTime(ctx)
	if err != nil {
		return false, nil, err
	}
	next := tm.Next(now)
	if next.IsZero() {
		next = cronspec.NeverMS
	}
	created, out, err := s.Store.PutSchedule(ctx, q, sc, next)
	if err == nil && s.Kick != nil {
		s.Kick()
	}
	return created, out, err
}

// Resume restarts a paused schedule at its first tick after now.
func (s *Service) Resume(ctx context.Context, q config.Queue, id string) (*store.Schedule, error) {
	sc, err := s.Store.GetSchedule(ctx, q, id)
	if err != nil {
		return nil, err
	}
	if !sc.Paused {
		return sc, nil
	}
	tm, err := cronspec.Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: stored cron %q: %w", id, sc.Cron, err)
	}
	now, err := s.Store.RedisTime(ctx)
	if err != nil {
		return nil, err
	}
	next := tm.Next(now)
	if next.IsZero() {
		next = cronspec.NeverMS
	}
	out, err := s.Store.ResumeSchedule(ctx, q, id, next)
	if err == nil && s.Kick != nil {
		s.Kick()
	}
	return out, err
}

// Get, List, Queue, Queues, Delete and Pause pass through to the store.

// Get returns the schedule id of queue q.
func (s *Service) Get(ctx context.Context, q config.Queue, id string) (*store.Schedule, error) {
	return s.Store.GetSchedule(ctx, q, id)
}

// Queue returns the queue of the schedule called id.
func (s *Service) Queue(ctx context.Context, id string) (string, bool, error) {
	return s.Store.ScheduleQueue(ctx, id)
}

// List returns the schedules of queue q.
func (s *Service) List(ctx context.Context, q config.Queue) ([]*store.Schedule, error) {
	return s.Store.ListSchedules(ctx, q)
}

// Queues lists the queues holding schedules.
func (s *Service) Queues(ctx context.Context) ([]string, error) { return s.Store.ScheduleQueues(ctx) }

// Delete deletes an API schedule (a file schedule is store.ErrFileSchedule).
func (s *Service) Delete(ctx context.Context, q config.Queue, id string) error {
	return s.Store.DeleteSchedule(ctx, q, id, store.ScheduleSourceAPI)
}

// Pause stops the schedule's ticks until Resume.
func (s *Service) Pause(ctx context.Context, q config.Queue, id string) (*store.Schedule, error) {
	return s.Store.PauseSchedule(ctx, q, id)
}
