package config

import "time"

// Config is the whole, validated configuration of one daemon. Every daemon of a
// fleet is expected to load the same file; see docs for what happens while they
// briefly disagree during a rolling change.
type Config struct {
	Redis         Redis
	HTTP          HTTP
	ShutdownGrace time.Duration
	Auth          Auth
	Log           Log
	Dispatch      Dispatch
	// Defaults are the settings every queue starts from.
	Defaults QueueSettings
	// Queues maps the queue name (case preserved, as written in the file) to
	// its resolved settings: Defaults overlaid with the queue's own keys.
	Queues map[string]Queue
}

// Redis says where the shared state lives. An empty Addr and empty Addrs mean
// the embedded in-memory store (one process, nothing persisted).
type Redis struct {
	Addr     string
	Addrs    []string
	Username string
	Password string
	DB       int
	Prefix   string
}

// Embedded reports whether the daemon must run on its in-process store.
func (r Redis) Embedded() bool { return r.Addr == "" && len(r.Addrs) == 0 }

// HTTP configures the API listener.
type HTTP struct {
	Listen          string
	MaxPayloadBytes int64
	// MaxConcurrentRequests bounds the API requests served at once; past it
	// the API answers 429 with Retry-After (api.md: "the API itself is
	// overloaded") instead of queueing without bound.
	MaxConcurrentRequests int
}

// Auth holds the Bearer keys the API accepts.
type Auth struct {
	APIKeys []string
}

// Log selects the log encoding ("json" or "console") and level.
type Log struct {
	Format string
	Level  string
}

// Dispatch tunes the claim loop; the defaults suit production, tests shorten
// them so crash recovery can be observed in seconds.
type Dispatch struct {
	// LeaseMargin is added to a queue's webhook timeout to form the lease of a
	// delivery in Redis: long enough that a live daemon always records its
	// outcome first, short enough that a dead daemon's jobs come back soon.
	LeaseMargin time.Duration
	// ClaimBatch bounds how many jobs one claim script call may hand out.
	ClaimBatch int
	// Linger is the least time between two claim (and two settle) script
	// calls of one queue on one daemon. Under load, jobs and outcomes that
	// arrive meanwhile share a call, so Redis runs fewer, larger scripts; an
	// idle queue is never delayed. 0 turns it off.
	Linger time.Duration
}

// Backoff is the retry schedule after a failed delivery.
type Backoff struct {
	Type   string // "exponential" or "fixed"
	Base   time.Duration
	Max    time.Duration
	Jitter bool
}

// Breaker holds a queue whose webhook keeps failing (semantics.md §4b), so a
// broken webhook (a wrong signing secret answering 401, a bad deploy) does not
// spend every waiting job's attempts within minutes.
type Breaker struct {
	// Failures is how many consecutive failed deliveries, fleet-wide, trip
	// the breaker; 0 turns it off.
	Failures int
	// HoldFor is how long the tripped breaker holds the queue before one
	// probe goes out (and again after each failed probe).
	HoldFor time.Duration
}

// QueueSettings are the per-queue knobs that can be set under defaults or per queue.
type QueueSettings struct {
	Mode              string // "standard" or "ack"
	Concurrency       int
	RateLimitMax      int
	RateLimitWindow   time.Duration
	MaxAttempts       int
	MaxDefers         int
	Timeout           time.Duration
	AckTimeout        time.Duration
	AckTimeoutAction  string // "retry" or "dead"
	Backoff           Backoff
	DefaultRetryAfter time.Duration
	JobLifetime       time.Duration
	Retention         time.Duration
	Breaker           Breaker
}

// Queue is one webhook URL plus its settings.
type Queue struct {
	Name          string
	WebhookURL    string
	SigningSecret string
	// SigningSecretEnv names the environment variable SigningSecret was read
	// from ("" when the file held the secret itself); kept so Redacted can
	// show where the secret comes from without showing the secret.
	SigningSecretEnv string
	QueueSettings
}
