package daemon

import (
	"context"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// ListJobsByKey lists one lane's jobs (keys.md §5).
func (b backend) ListJobsByKey(ctx context.Context, q config.Queue, st store.Status, flowKey string, limit int, cursor string) ([]*store.Job, string, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.ListJobs(ctx, q, store.ListJobsParams{Status: st, FlowKey: flowKey, Limit: limit, Cursor: cursor})
}

// ListJobs serves GET /v1/queues/{queue}/jobs (api.JobLister): one page of
// a queue's jobs by status, read from Redis in one script call.
func (b backend) ListJobs(ctx context.Context, q config.Queue, st store.Status, limit int, cursor string) ([]*store.Job, string, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.ListJobs(ctx, q, store.ListJobsParams{Status: st, Limit: limit, Cursor: cursor})
}

// Stats serves GET /v1/queues/{queue}/stats (api.StatsReader): the queue's
// fleet-wide statistics, on Redis' clock.
func (b backend) Stats(ctx context.Context, q config.Queue, since, until time.Time) (store.Stats, error) {
	ctx, cancel := apiCtx(ctx)
	defer cancel()
	return b.d.store.Stats(ctx, q, store.StatsParams{Since: since, Until: until})
}
