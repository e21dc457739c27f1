package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is a job's status as the API reports it.
type Status string

// The job statuses of semantics.md §1.
const (
	StatusPending     Status = "pending"
	StatusProcessing  Status = "processing"
	StatusAwaitingAck Status = "awaiting_ack"
	StatusCompleted   Status = "completed"
	StatusDead        Status = "dead"
)

// Errors the store returns for conditions the API maps to status codes.
var (
	// ErrNotFound: no such job (never existed, or purged after retention).
	ErrNotFound = errors.New("job not found")
	// ErrConflict: the job is not in a state that accepts this operation.
	ErrConflict = errors.New("job state conflict")
	// ErrStaleAttempt: a callback named an attempt that is no longer current.
	ErrStaleAttempt = errors.New("stale attempt")
	// ErrUnavailable wraps every failure to reach Redis, so the API can answer 503.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrNotReplicated: under replicated durability no replica confirmed a
	// write in time. The master may have applied it, but it is not yet
	// safe from a failover, so it is not acknowledged. It wraps
	// ErrUnavailable: the API answers 503 with Retry-After, and a retry (an
	// idempotent repeat for a publish) is safe.
	ErrNotReplicated = fmt.Errorf("%w: no replica confirmed the write in time", ErrUnavailable)
)

// NewJob is one job to publish.
type NewJob struct {
	// Payload is the publisher's raw JSON object, stored and delivered byte for byte.
	Payload json.RawMessage
	// IdempotencyKey, when not empty, makes a repeat publish return the first job.
	IdempotencyKey string
	// Delay postpones the first delivery.
	Delay time.Duration
	// TraceParent and TraceState are the publisher's W3C trace context in
	// canonical form (package tracing validates them; "" for none). They
	// are stored with the job, so that every delivery of it, on any daemon
	// and however late, is a span in the publisher's trace.
	TraceParent string
	TraceState  string
	// Priority, 0 to 9 (higher first; control.md §2), orders the queue's
	// due jobs; retries and defers keep it.
	Priority int
	// ReplaceKey, when not empty, names the job's "latest state" slot
	// (control.md §3): a later publish with the same key replaces this
	// job's payload while it has never been delivered.
	ReplaceKey string
	// FlowKey, when not empty, puts the job in that key's lane (keys.md):
	// its own limits, hold and probe, and a fair share of the queue.
	FlowKey string
}

// Published is the result of publishing one job.
type Published struct {
	ID        string
	Status    Status
	CreatedAt time.Time
	// Duplicate is true when the idempotency key was already known: the
	// returned job is the existing one and nothing new was stored.
	Duplicate bool
	// Replaced is true when the job's replace key named a job never
	// delivered: that job (ID) now carries this publish's payload, and
	// nothing new was stored (control.md §3).
	Replaced bool
}

// Attempt is one entry of a job's history.
type Attempt struct {
	Attempt           int
	Status            string // SimpleQ's: success, failed, nacked, deferred
	Error             *string
	WebhookStatusCode *int
	Timestamp         time.Time
	Probe             bool
	// Acked marks a success that an ack-mode worker's ack reported (the
	// entry's webhookStatusCode is the delivery's 2xx).
	Acked      bool
	RetryAfter *float64 // seconds, defers only
	Scope      string   // defers only
	Reason     *string  // defers only
}

// Job is the full view of a job, as GET /v1/jobs/{id} reports it.
type Job struct {
	ID             string
	Queue          string
	Status         Status
	Attempts       int
	MaxAttempts    int
	DeferCount     int
	IdempotencyKey *string
	Payload        json.RawMessage
	ScheduledFor   time.Time
	ExpiresAt      time.Time
	LastError      *string
	DeadReason     *string
	History        []Attempt
	CreatedAt      time.Time
	CompletedAt    *time.Time
	// ScheduleID names the schedule that published the job (nil: a publish).
	ScheduleID *string
	// Priority is the job's priority, 0 to 9 (control.md §2).
	Priority int
	// ReplaceKey is the replace key the job was published with (nil:
	// none; control.md §3).
	ReplaceKey *string
	// FlowKey is the job's flow key (nil: the default lane; keys.md §1).
	FlowKey *string
}

// CallbackKind is what an ack-mode worker reports.
type CallbackKind string

// The three ack-mode callbacks.
const (
	CallbackAck   CallbackKind = "ack"
	CallbackNack  CallbackKind = "nack"
	CallbackDefer CallbackKind = "defer"
)

// Scope of a defer: the whole queue (default) or only the reporting job.
type Scope string

// Defer scopes.
const (
	ScopeQueue Scope = "queue"
	ScopeJob   Scope = "job"
	// ScopeKey holds the job's lane (keys.md §3); a job without a flow
	// key holds the queue instead.
	ScopeKey Scope = "key"
	// ScopeDefault lets the script decide: the job's lane when it has a
	// flow key and the queue's flowKeys.holdScope is key, else the queue.
	ScopeDefault Scope = ""
)

// Callback is an ack/nack/defer reported over the API.
type Callback struct {
	JobID      string
	Kind       CallbackKind
	Attempt    int // 0: not given
	Retryable  bool
	RetryAfter time.Duration
	Scope      Scope
	Reason     string
}

// HoldState is the queue's delivery state as the API reports it.
type HoldState string

// Hold states of api.md.
const (
	HoldOpen    HoldState = "open"
	HoldHeld    HoldState = "held"
	HoldProbing HoldState = "probing"
	HoldPaused  HoldState = "paused"
)

// Hold describes why a queue is or is not delivering.
type Hold struct {
	State      HoldState
	Until      *time.Time
	ProbeJobID *string
	Reason     *string
}

// Counts are a queue's jobs by status, read from Redis.
type Counts struct {
	Pending     int64
	Processing  int64
	AwaitingAck int64
	Dead        int64
	// HeldKeys counts the queue's lanes (flow keys) that are held or
	// probing (keys.md §5).
	HeldKeys int64
}

// QueueStatus is the live state of one queue.
type QueueStatus struct {
	Name   string
	Counts Counts
	Hold   Hold
}
