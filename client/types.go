package client

import (
	"encoding/json"
	"time"
)

// JobStatus is a job's status (semantics.md §1).
type JobStatus string

// The job statuses.
const (
	// StatusPending: waiting for its first delivery (ready, delayed or held).
	StatusPending JobStatus = "pending"
	// StatusProcessing: in flight, or delivered before and waiting for its next delivery.
	StatusProcessing JobStatus = "processing"
	// StatusAwaitingAck: ack mode, the webhook answered 2xx, no callback yet.
	StatusAwaitingAck JobStatus = "awaiting_ack"
	// StatusCompleted: terminal success.
	StatusCompleted JobStatus = "completed"
	// StatusDead: terminal failure; see Job.DeadReason.
	StatusDead JobStatus = "dead"
)

// Terminal reports whether the status is final (completed or dead), so a
// caller polling a job knows when to stop.
func (s JobStatus) Terminal() bool { return s == StatusCompleted || s == StatusDead }

// AttemptStatus is the outcome recorded in one history entry.
type AttemptStatus string

// The history entry statuses.
const (
	// AttemptSuccess: a standard-mode delivery answered 2xx.
	AttemptSuccess AttemptStatus = "success"
	// AttemptFailed: a delivery failed (other status, timeout, connection
	// error, lost lease, ack timeout); it spent an attempt.
	AttemptFailed AttemptStatus = "failed"
	// AttemptNacked: an ack-mode worker reported a failure.
	AttemptNacked AttemptStatus = "nacked"
	// AttemptDeferred: backpressure (a 429/503/529 answer or a defer
	// callback); it spent no attempt.
	AttemptDeferred AttemptStatus = "deferred"
)

// Scope is what a defer holds: the whole queue (the default, right for a
// provider's rate limit) or only the reporting job.
type Scope string

// The defer scopes.
const (
	// ScopeQueue holds the whole queue: a 429 is a fact about the downstream,
	// so every job of the queue would meet it.
	ScopeQueue Scope = "queue"
	// ScopeJob holds only the reporting job, for a wait that is about this
	// job (a per-job resource not ready yet); the queue keeps delivering.
	ScopeJob Scope = "job"
)

// Mode is a queue's delivery mode.
type Mode string

// The queue modes.
const (
	// ModeStandard: the webhook's answer is the outcome.
	ModeStandard Mode = "standard"
	// ModeAck: a 2xx only says "received"; the outcome is an ack/nack/defer callback.
	ModeAck Mode = "ack"
)

// HoldState is a queue's delivery state.
type HoldState string

// The hold states.
const (
	// HoldOpen: delivering normally, within concurrency and rateLimitMax.
	HoldOpen HoldState = "open"
	// HoldHeld: backpressure; nothing is delivered until Hold.Until.
	HoldHeld HoldState = "held"
	// HoldProbing: the hold ended; one probe job is out and only its success reopens the queue.
	HoldProbing HoldState = "probing"
	// HoldPaused: an operator paused the queue; nothing is delivered until Resume.
	HoldPaused HoldState = "paused"
)

// Job is the full view of a job (GET /v1/jobs/{id}). Nullable wire strings
// are "" when null; nullable times are nil. Times are UTC.
type Job struct {
	// ID is the job id (it carries the queue name; treat it as opaque).
	ID string
	// Queue is the queue the job belongs to.
	Queue string
	// Status is where the job is in its lifecycle.
	Status JobStatus
	// Attempts counts deliveries that ended in success or failure; defers never count.
	Attempts int
	// MaxAttempts is the queue's failure budget (its current setting).
	MaxAttempts int
	// DeferCount counts the defers this job reported, against the queue's maxDefers.
	DeferCount int
	// IdempotencyKey is the key the job was published with ("" for none).
	IdempotencyKey string
	// Payload is the published JSON object, byte for byte.
	Payload json.RawMessage
	// ScheduledFor is the first scheduled delivery time (publish time + delay).
	ScheduledFor time.Time
	// ExpiresAt ends the job's delivery lifetime (ScheduledFor + jobLifetime).
	ExpiresAt time.Time
	// LastError is the most recent failure's description ("" for none).
	LastError string
	// DeadReason says why a dead job died, e.g. "max_attempts_exhausted" ("" unless dead).
	DeadReason string
	// History lists every delivery outcome and callback, oldest first.
	History []Attempt
	// CreatedAt is the publish time.
	CreatedAt time.Time
	// CompletedAt is when the job became completed or dead (nil before).
	CompletedAt *time.Time
	// Priority is simpleqd's job priority, 0 to 9 (0 from SimpleQ's
	// hosted service, which has none).
	Priority int
	// FlowKey is the job's flow key, its lane (simpleqd; "" for none).
	FlowKey string
	// ReplaceKey is the job's replace key (simpleqd; "" for none).
	ReplaceKey string
	// ScheduleID is the schedule that published the job (simpleqd; "" for
	// a job published by a client).
	ScheduleID string
}

// Attempt is one history entry: a delivery outcome or a callback.
type Attempt struct {
	// Attempt is the 1-based attempt the entry belongs to; a defer keeps the number.
	Attempt int
	// Status is the outcome.
	Status AttemptStatus
	// Error describes a failure or nack ("" for none).
	Error string
	// WebhookStatusCode is the webhook's HTTP status, 0 when there was none (timeout, connection error).
	WebhookStatusCode int
	// Timestamp is when the outcome was recorded.
	Timestamp time.Time
	// Probe is true for the single delivery that tested a queue after a hold (simpleqd).
	Probe bool
	// Acked marks a success that an ack-mode worker's ack reported (simpleqd);
	// WebhookStatusCode is then the delivery's 2xx.
	Acked bool
	// RetryAfter is a defer's requested wait (simpleqd).
	RetryAfter time.Duration
	// Scope is a defer's scope (simpleqd).
	Scope Scope
	// Reason is a defer's reason (simpleqd): the callback's, or the webhook's status and Retry-After.
	Reason string
}

// Queue is a queue's settings and live state (simpleqd).
type Queue struct {
	// Name is the queue name from the configuration file.
	Name string
	// Mode is standard or ack.
	Mode Mode
	// WebhookURL is where jobs are delivered (a password in it is redacted).
	WebhookURL string
	// Concurrency bounds deliveries in flight plus jobs awaiting an ack, fleet-wide.
	Concurrency int
	// RateLimitMax bounds deliveries started per RateLimitWindow, fleet-wide (0: no limit).
	RateLimitMax int
	// RateLimitWindow is the sliding window of RateLimitMax.
	RateLimitWindow time.Duration
	// MaxAttempts is the failure budget of each job.
	MaxAttempts int
	// MaxDefers is the defer budget of each job.
	MaxDefers int
	// Counts are the queue's jobs by status.
	Counts QueueCounts
	// Hold is the queue's delivery state.
	Hold Hold
}

// QueueCounts are a queue's non-terminal jobs by status, plus its dead
// letters, as read from Redis at one instant.
type QueueCounts struct {
	// Pending jobs wait for their first delivery.
	Pending int64
	// Processing jobs are in flight or wait for a redelivery.
	Processing int64
	// AwaitingAck jobs (ack mode) were delivered and wait for a callback.
	AwaitingAck int64
	// Dead jobs sit in the dead-letter list.
	Dead int64
}

// Hold is why a queue is or is not delivering.
type Hold struct {
	// State is open, held, probing or paused.
	State HoldState
	// Until is the release time of a backpressure hold (nil otherwise).
	Until *time.Time
	// ProbeJobID is the job delivered as the probe while probing.
	ProbeJobID string
	// Reason is the pause reason or what caused the hold ("" for none).
	Reason string
}

// jobWire, attemptWire and queueWire are the wire shapes of api.md.
type jobWire struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	Status         JobStatus       `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	DeferCount     int             `json:"deferCount"`
	IdempotencyKey *string         `json:"idempotencyKey"`
	Payload        json.RawMessage `json:"payload"`
	ScheduledFor   time.Time       `json:"scheduledFor"`
	ExpiresAt      time.Time       `json:"expiresAt"`
	LastError      *string         `json:"lastError"`
	DeadReason     *string         `json:"deadReason"`
	History        []Attempt       `json:"history"`
	CreatedAt      time.Time       `json:"createdAt"`
	CompletedAt    *time.Time      `json:"completedAt"`
	Priority       int             `json:"priority"`
	FlowKey        *string         `json:"flowKey"`
	ReplaceKey     *string         `json:"replaceKey"`
	ScheduleID     *string         `json:"scheduleId"`
}

type attemptWire struct {
	Attempt           int           `json:"attempt"`
	Status            AttemptStatus `json:"status"`
	Error             *string       `json:"error"`
	WebhookStatusCode *int          `json:"webhookStatusCode"`
	Timestamp         time.Time     `json:"timestamp"`
	Probe             bool          `json:"probe"`
	Acked             bool          `json:"acked"`
	RetryAfter        *float64      `json:"retryAfter"`
	Scope             Scope         `json:"scope"`
	Reason            *string       `json:"reason"`
}

type queueWire struct {
	Name            string  `json:"name"`
	Mode            Mode    `json:"mode"`
	WebhookURL      string  `json:"webhookUrl"`
	Concurrency     int     `json:"concurrency"`
	RateLimitMax    int     `json:"rateLimitMax"`
	RateLimitWindow float64 `json:"rateLimitWindow"`
	MaxAttempts     int     `json:"maxAttempts"`
	MaxDefers       int     `json:"maxDefers"`
	Counts          struct {
		Pending     int64 `json:"pending"`
		Processing  int64 `json:"processing"`
		AwaitingAck int64 `json:"awaitingAck"`
		Dead        int64 `json:"dead"`
	} `json:"counts"`
	Hold struct {
		State      HoldState  `json:"state"`
		Until      *time.Time `json:"until"`
		ProbeJobID *string    `json:"probeJobId"`
		Reason     *string    `json:"reason"`
	} `json:"hold"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// UnmarshalJSON decodes the API's Job JSON, so a saved or proxied answer
// can be read into the typed struct too.
func (j *Job) UnmarshalJSON(b []byte) error {
	var w jobWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*j = Job{
		ID: w.ID, Queue: w.Queue, Status: w.Status, Attempts: w.Attempts, MaxAttempts: w.MaxAttempts,
		DeferCount: w.DeferCount, IdempotencyKey: str(w.IdempotencyKey), Payload: w.Payload,
		ScheduledFor: w.ScheduledFor, ExpiresAt: w.ExpiresAt, LastError: str(w.LastError),
		DeadReason: str(w.DeadReason), History: w.History, CreatedAt: w.CreatedAt, CompletedAt: w.CompletedAt,
		Priority: w.Priority, FlowKey: str(w.FlowKey), ReplaceKey: str(w.ReplaceKey), ScheduleID: str(w.ScheduleID),
	}
	if j.History == nil {
		j.History = []Attempt{}
	}
	return nil
}

// UnmarshalJSON decodes one history entry, converting retryAfter seconds.
func (a *Attempt) UnmarshalJSON(b []byte) error {
	var w attemptWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = Attempt{Attempt: w.Attempt, Status: w.Status, Error: str(w.Error), Timestamp: w.Timestamp,
		Probe: w.Probe, Acked: w.Acked, Scope: w.Scope, Reason: str(w.Reason)}
	if w.Status == "acked" { // an older simpleqd's ack entry
		a.Status, a.Acked = AttemptSuccess, true
	}
	if w.WebhookStatusCode != nil {
		a.WebhookStatusCode = *w.WebhookStatusCode
	}
	if w.RetryAfter != nil && *w.RetryAfter >= 0 {
		a.RetryAfter = secondsToDuration(*w.RetryAfter)
	}
	return nil
}

// UnmarshalJSON decodes the API's Queue JSON, converting rateLimitWindow seconds.
func (q *Queue) UnmarshalJSON(b []byte) error {
	var w queueWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*q = Queue{
		Name: w.Name, Mode: w.Mode, WebhookURL: w.WebhookURL, Concurrency: w.Concurrency,
		RateLimitMax: w.RateLimitMax, RateLimitWindow: secondsToDuration(max(w.RateLimitWindow, 0)),
		MaxAttempts: w.MaxAttempts, MaxDefers: w.MaxDefers,
		Counts: QueueCounts{Pending: w.Counts.Pending, Processing: w.Counts.Processing,
			AwaitingAck: w.Counts.AwaitingAck, Dead: w.Counts.Dead},
		Hold: Hold{State: w.Hold.State, Until: w.Hold.Until, ProbeJobID: str(w.Hold.ProbeJobID), Reason: str(w.Hold.Reason)},
	}
	return nil
}
