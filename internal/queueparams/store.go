// The queue calls of package store, one forwarder each (made from its
// method list; a new queue call of the store gets one here), but for the
// delivery path's ClaimCall and SettleAndClaim (see Store).

package queueparams

import (
	"context"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Store is a *store.Store whose queue calls take a config.Queue: the
// daemon's packages (ingest, schedule, the API backend) hold config.Queue
// values, and this turns each into the store's QueueParams at the call
// (Of: a copy of fifteen fields, no allocation). The delivery path's two
// calls, ClaimCall and SettleAndClaim, are the store's own: each pump of
// package dispatch builds its queue's QueueParams once per change of its
// settings and passes that.
type Store struct{ *store.Store }

// Wrap gives s's queue calls a config.Queue.
func Wrap(s *store.Store) Store { return Store{s} }

// Cancel is store.Store.Cancel for a config.Queue.
func (s Store) Cancel(ctx context.Context, q config.Queue, p store.CancelParams) (store.Cancelled, error) {
	return s.Store.Cancel(ctx, Of(q), p)
}

// BulkCancelStep is store.Store.BulkCancelStep for a config.Queue.
func (s Store) BulkCancelStep(ctx context.Context, q config.Queue, p store.BulkCancelParams) (store.BulkStep, error) {
	return s.Store.BulkCancelStep(ctx, Of(q), p)
}

// CancelBulk is store.Store.CancelBulk for a config.Queue.
func (s Store) CancelBulk(ctx context.Context, q config.Queue, p store.BulkCancelParams, until time.Time, onAbort func([]store.Abort)) (cancelled int, done bool, err error) {
	return s.Store.CancelBulk(ctx, Of(q), p, until, onAbort)
}

// ListDead is store.Store.ListDead for a config.Queue.
func (s Store) ListDead(ctx context.Context, q config.Queue, p store.ListDeadParams) ([]*store.Job, string, error) {
	return s.Store.ListDead(ctx, Of(q), p)
}

// GetKey is store.Store.GetKey for a config.Queue.
func (s Store) GetKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error) {
	return s.Store.GetKey(ctx, Of(q), flowKey)
}

// PutKey is store.Store.PutKey for a config.Queue.
func (s Store) PutKey(ctx context.Context, q config.Queue, flowKey string, o store.KeyOverride) (store.Key, error) {
	return s.Store.PutKey(ctx, Of(q), flowKey, o)
}

// DeleteKey is store.Store.DeleteKey for a config.Queue.
func (s Store) DeleteKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error) {
	return s.Store.DeleteKey(ctx, Of(q), flowKey)
}

// ResumeKey is store.Store.ResumeKey for a config.Queue.
func (s Store) ResumeKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error) {
	return s.Store.ResumeKey(ctx, Of(q), flowKey)
}

// ListKeys is store.Store.ListKeys for a config.Queue.
func (s Store) ListKeys(ctx context.Context, q config.Queue, p store.ListKeysParams) ([]store.Key, string, error) {
	return s.Store.ListKeys(ctx, Of(q), p)
}

// ListJobs is store.Store.ListJobs for a config.Queue.
func (s Store) ListJobs(ctx context.Context, q config.Queue, p store.ListJobsParams) ([]*store.Job, string, error) {
	return s.Store.ListJobs(ctx, Of(q), p)
}

// Settle is store.Store.Settle for a config.Queue.
func (s Store) Settle(ctx context.Context, q config.Queue, outcomes []store.Outcome) ([]store.Settled, error) {
	return s.Store.Settle(ctx, Of(q), outcomes)
}

// Callback is store.Store.Callback for a config.Queue.
func (s Store) Callback(ctx context.Context, q config.Queue, cb store.Callback) (store.Settled, error) {
	return s.Store.Callback(ctx, Of(q), cb)
}

// QueueStatus is store.Store.QueueStatus for a config.Queue.
func (s Store) QueueStatus(ctx context.Context, q config.Queue) (store.QueueStatus, error) {
	return s.Store.QueueStatus(ctx, Of(q))
}

// Pause is store.Store.Pause for a config.Queue.
func (s Store) Pause(ctx context.Context, q config.Queue, reason string) error {
	return s.Store.Pause(ctx, Of(q), reason)
}

// Resume is store.Store.Resume for a config.Queue.
func (s Store) Resume(ctx context.Context, q config.Queue) error {
	return s.Store.Resume(ctx, Of(q))
}

// Replay is store.Store.Replay for a config.Queue.
func (s Store) Replay(ctx context.Context, q config.Queue, ids []string) (int, error) {
	return s.Store.Replay(ctx, Of(q), ids)
}

// ReplayAll is store.Store.ReplayAll for a config.Queue.
func (s Store) ReplayAll(ctx context.Context, q config.Queue) (int, error) {
	return s.Store.ReplayAll(ctx, Of(q))
}

// GetJob is store.Store.GetJob for a config.Queue.
func (s Store) GetJob(ctx context.Context, q config.Queue, id string) (*store.Job, error) {
	return s.Store.GetJob(ctx, Of(q), id)
}

// PutSchedule is store.Store.PutSchedule for a config.Queue.
func (s Store) PutSchedule(ctx context.Context, q config.Queue, sc store.Schedule, next time.Time) (bool, *store.Schedule, error) {
	return s.Store.PutSchedule(ctx, Of(q), sc, next)
}

// GetSchedule is store.Store.GetSchedule for a config.Queue.
func (s Store) GetSchedule(ctx context.Context, q config.Queue, id string) (*store.Schedule, error) {
	return s.Store.GetSchedule(ctx, Of(q), id)
}

// ListSchedules is store.Store.ListSchedules for a config.Queue.
func (s Store) ListSchedules(ctx context.Context, q config.Queue) ([]*store.Schedule, error) {
	return s.Store.ListSchedules(ctx, Of(q))
}

// DeleteSchedule is store.Store.DeleteSchedule for a config.Queue.
func (s Store) DeleteSchedule(ctx context.Context, q config.Queue, id, source string) error {
	return s.Store.DeleteSchedule(ctx, Of(q), id, source)
}

// PauseSchedule is store.Store.PauseSchedule for a config.Queue.
func (s Store) PauseSchedule(ctx context.Context, q config.Queue, id string) (*store.Schedule, error) {
	return s.Store.PauseSchedule(ctx, Of(q), id)
}

// ResumeSchedule is store.Store.ResumeSchedule for a config.Queue.
func (s Store) ResumeSchedule(ctx context.Context, q config.Queue, id string, next time.Time) (*store.Schedule, error) {
	return s.Store.ResumeSchedule(ctx, Of(q), id, next)
}

// TickSchedules is store.Store.TickSchedules for a config.Queue.
func (s Store) TickSchedules(ctx context.Context, q config.Queue, max int) (store.Ticked, error) {
	return s.Store.TickSchedules(ctx, Of(q), max)
}

// TickQueues is store.Store.TickQueues for a config.Queue.
func (s Store) TickQueues(ctx context.Context, qs []config.Queue, max int) ([]store.Ticked, []error) {
	return s.Store.TickQueues(ctx, ofAll(qs), max)
}

// FireSchedules is store.Store.FireSchedules for a config.Queue.
func (s Store) FireSchedules(ctx context.Context, q config.Queue, fires []store.Fire) (time.Time, []store.Fired, string, error) {
	return s.Store.FireSchedules(ctx, Of(q), fires)
}

// Stats is store.Store.Stats for a config.Queue.
func (s Store) Stats(ctx context.Context, q config.Queue, p store.StatsParams) (store.Stats, error) {
	return s.Store.Stats(ctx, Of(q), p)
}

// Publish is store.Store.Publish for a config.Queue.
func (s Store) Publish(ctx context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error) {
	return s.Store.Publish(ctx, Of(q), jobs)
}

// Claim is store.Store.Claim for a config.Queue.
func (s Store) Claim(ctx context.Context, q config.Queue, max int) (store.ClaimResult, error) {
	return s.Store.Claim(ctx, Of(q), max)
}
