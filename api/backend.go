package api

import (
	"context"

	"github.com/simpleq/simpleqd/config"
	"github.com/simpleq/simpleqd/store"
)

// Backend is everything the HTTP layer needs from the rest of the daemon. It is
// an interface so handlers can be tested without Redis; in the daemon it is
// *store.Store plus the dispatcher's wake-up hook.
type Backend interface {
	// Publish stores jobs atomically per job and reports, per job, whether it
	// is new or an idempotent repeat. Errors wrap store.ErrUnavailable when
	// Redis cannot be reached.
	Publish(ctx context.Context, q config.Queue, jobs []store.NewJob) ([]store.Published, error)
	// GetJob returns store.ErrNotFound for unknown or purged ids. maxAttempts
	// is reported from the queue's current settings.
	GetJob(ctx context.Context, q config.Queue, id string) (*store.Job, error)
	// Callback applies an ack-mode ack/nack/defer. It returns store.ErrNotFound,
	// store.ErrConflict (job not awaiting an outcome) or store.ErrStaleAttempt.
	Callback(ctx context.Context, q config.Queue, cb store.Callback) error
	// QueueStatus reads counts and hold state on Redis' clock.
	QueueStatus(ctx context.Context, q config.Queue) (store.QueueStatus, error)
	// Ping reports whether Redis is reachable and the scripts are loaded.
	Ping(ctx context.Context) error
}

// Waker is told about every publish so dispatchers (this daemon's and, through
// Redis, the fleet's) wake up without polling.
type Waker interface {
	Wake(queue string)
}

// Queues returns the current queue configuration; it is a function so a live
// config reload is seen by the next request.
type Queues func() map[string]config.Queue

// QueueOfJob extracts the queue name a job id was minted for (see store.NewJobID);
// ok is false for ids this daemon could never have issued.
var QueueOfJob = store.QueueOfJob
