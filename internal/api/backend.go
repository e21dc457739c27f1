package api

import (
	"context"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
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

	// The operator's administration (simpleqd additions to the contract).

	// ListDead returns one page of the queue's dead-letter list, newest death
	// first, and the cursor of the next page ("" after the last). A cursor it
	// did not issue for this queue is a *store.InvalidCursorError.
	ListDead(ctx context.Context, q config.Queue, limit int, cursor string) ([]*store.Job, string, error)
	// Replay moves the listed dead jobs back to pending and reports how many
	// moved; ids that are not dead jobs of q are skipped, not errors.
	Replay(ctx context.Context, q config.Queue, ids []string) (int, error)
	// ReplayAll moves every dead job of q back to pending.
	ReplayAll(ctx context.Context, q config.Queue) (int, error)
	// Pause stops every delivery of q, fleet-wide, until Resume.
	Pause(ctx context.Context, q config.Queue, reason string) error
	// Resume ends a pause and cuts a backpressure hold short (the queue probes).
	Resume(ctx context.Context, q config.Queue) error

	// The lanes of a queue (flow keys, keys.md §2, §3, §5; keys.go).

	// GetKey reads one lane; store.ErrNotFound when it has no jobs, no
	// override and no hold.
	GetKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error)
	// ListKeys reads one page of q's lanes in state (store.KeyAll: every
	// lane) from cursor ("" first) and the next page's cursor ("" after
	// the last).
	ListKeys(ctx context.Context, q config.Queue, state store.KeyState, cursor string, limit int) ([]store.Key, string, error)
	// PutKey sets a lane's whole override (a nil member: the queue's
	// flowKeys settings) and returns the lane as it is now.
	PutKey(ctx context.Context, q config.Queue, flowKey string, o store.KeyOverride) (store.Key, error)
	// DeleteKey removes a lane's override; store.ErrNotFound when nothing
	// of the lane remains (or was there).
	DeleteKey(ctx context.Context, q config.Queue, flowKey string) error
	// ResumeKey ends a lane's hold early into probing; store.ErrNotFound
	// for a lane that does not exist.
	ResumeKey(ctx context.Context, q config.Queue, flowKey string) (store.Key, error)
}

// Waker is told about every publish, replay and resume so dispatchers (this
// daemon's and, through Redis, the fleet's) wake up without polling.
type Waker interface {
	// Wake signals new work (a publish, a replay).
	Wake(queue string)
	// WakeState signals a change that can end a pause or hold (a resume).
	WakeState(queue string)
}

// Queues returns the current queue configuration; it is a function so a live
// config reload is seen by the next request.
type Queues func() map[string]config.Queue

// QueueOfJob extracts the queue name a job id was minted for (see store.NewJobID);
// ok is false for ids this daemon could never have issued.
var QueueOfJob = store.QueueOfJob
