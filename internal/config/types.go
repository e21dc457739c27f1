package config

import (
	"reflect"
	"time"
)

// Config is the whole, validated configuration of one daemon. Every daemon of a
// fleet is expected to load the same file; see docs for what happens while they
// briefly disagree during a rolling change.
type Config struct {
	Redis         Redis         `cfg:"redis" reload:"restart"`
	HTTP          HTTP          `cfg:"http"`
	ShutdownGrace time.Duration `cfg:"shutdownGrace" reload:"restart"`
	// LameDuck is how long a stopping daemon keeps serving the API with
	// /readyz answering 503, so load balancers stop sending it requests
	// before its listener closes; claiming stops at once all the same.
	LameDuck time.Duration `cfg:"lameDuck"`
	Auth     Auth          `cfg:"auth"`
	Log      Log           `cfg:"log"`
	Dispatch Dispatch      `cfg:"dispatch"`
	Tracing  Tracing       `cfg:"tracing" reload:"restart"`
	// Webhooks limits where API-created queues may point (webhooks.go).
	Webhooks Webhooks `cfg:"webhooks"`
	// Defaults are the settings every queue starts from.
	Defaults QueueSettings `cfg:"defaults"`
	// Queues maps the queue name (case preserved, as written in the file) to
	// its resolved settings: Defaults overlaid with the queue's own keys.
	Queues map[string]Queue `cfg:"queues,apart"`
	// Schedules are the file's schedules (source file), on file queues.
	Schedules []Schedule
}

// Redis says where the shared state lives and how to reach it. At most one
// of URL, Addr, Addrs and Sentinel names the Redis; none means the embedded
// in-memory store (one process, nothing persisted). production.md §1.
type Redis struct {
	// URL is a redis:// or rediss:// (TLS) URL with the user, password and
	// database, the form managed Redis services hand out; with ?addr=
	// parameters it lists Redis Cluster seeds instead (go-redis' cluster URL).
	URL      string   `cfg:"url,secret,url"`
	Addr     string   `cfg:"addr"`
	Addrs    []string `cfg:"addrs"`
	Username string   `cfg:"username"`
	// Password is the file's password or the one read from PasswordEnv; a
	// password inside URL stays there ([Redis.Endpoint] resolves both).
	Password string `cfg:"password,secret"`
	// PasswordEnv names the environment variable Password was read from
	// ("" when the file held it), so secrets stay out of the file and
	// Redacted can show where the password comes from.
	PasswordEnv string `cfg:"passwordEnv,env" resolves:"password"`
	DB          int    `cfg:"db"`
	Prefix      string `cfg:"prefix"`
	// Durability is DurabilityLocal or DurabilityReplicated: when a write
	// counts as done (durability.go).
	Durability string `cfg:"durability"`
	// ReplicaTimeout bounds how long a replicated write waits for a
	// replica before the API answers 503.
	ReplicaTimeout time.Duration `cfg:"replicaTimeout"`
	// Sentinel and TLS come last, as sections do in the file.
	Sentinel Sentinel `cfg:"sentinel"`
	TLS      TLS      `cfg:"tls"`
}

// Sentinel points the daemon at a Redis Sentinel set: go-redis' failover
// client asks the sentinels for the master of MasterName and follows a
// failover by itself.
type Sentinel struct {
	MasterName string `cfg:"masterName"`
	// Addrs are the sentinels' host:port, not the data nodes'.
	Addrs []string `cfg:"addrs"`
	// Username and Password authenticate to the sentinels, which may be
	// protected apart from the data nodes (Redis' own username/password).
	Username    string `cfg:"username"`
	Password    string `cfg:"password,secret"`
	PasswordEnv string `cfg:"passwordEnv,env" resolves:"password"`
}

// TLS configures encrypted (and optionally mutually authenticated)
// connections to every Redis node and sentinel the daemon talks to.
type TLS struct {
	// Enabled turns TLS on; a rediss:// URL does too.
	Enabled bool `cfg:"enabled"`
	// CAFile is a PEM bundle of the authorities the server certificate must
	// chain to; empty means the system's roots.
	CAFile string `cfg:"caFile"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that require one (mutual TLS, tls-auth-clients yes).
	CertFile string `cfg:"certFile"`
	KeyFile  string `cfg:"keyFile"`
	// ServerName is the name the server certificate must be valid for;
	// empty means each node's own host, as dialled.
	ServerName string `cfg:"serverName"`
	// InsecureSkipVerify accepts any server certificate. Never the default;
	// the daemon warns about it at start-up because it gives up the point
	// of TLS against anyone on the network path.
	InsecureSkipVerify bool `cfg:"insecureSkipVerify"`
}

// Set reports whether any TLS key is set, so validation can refuse TLS
// settings that would be ignored because TLS is off.
func (t TLS) Set() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// Set reports whether any Sentinel key is set: one is enough to mean
// Sentinel was wanted, so the others are then required.
func (s Sentinel) Set() bool {
	return s.MasterName != "" || len(s.Addrs) > 0 || s.Username != "" || s.Password != "" || s.PasswordEnv != ""
}

// Embedded reports whether the daemon must run on its in-process store.
func (r Redis) Embedded() bool {
	return r.URL == "" && r.Addr == "" && len(r.Addrs) == 0 && !r.Sentinel.Set()
}

// Same reports whether two Redis sections are equal in every key, so a
// reload can tell a change that needs a restart from none.
func (r Redis) Same(o Redis) bool {
	return sameValue(reflect.ValueOf(r), reflect.ValueOf(o)) // restart.go
}

// HTTP configures the API listener.
type HTTP struct {
	Listen          string `cfg:"listen" reload:"restart"`
	MaxPayloadBytes int64  `cfg:"maxPayloadBytes" reload:"restart"`
	// MaxConcurrentRequests bounds the API requests served at once; past it
	// the API answers 429 with Retry-After (api.md: "the API itself is
	// overloaded") instead of queueing without bound.
	MaxConcurrentRequests int `cfg:"maxConcurrentRequests" reload:"restart"`
}

// Auth holds the Bearer keys the API accepts.
type Auth struct {
	// APIKeys have full access to every queue and endpoint.
	APIKeys []string `cfg:"apiKeys,secret,set"`
	// Keys reach only the queues their globs match, with a role (keys.go).
	Keys []Key `cfg:"keys,apart,omitempty"`
}

// Log selects the log encoding ("json" or "console") and level.
type Log struct {
	Format string `cfg:"format" reload:"restart"`
	Level  string `cfg:"level" reload:"restart"`
}

// Dispatch tunes the claim loop; the defaults suit production, tests shorten
// them so crash recovery can be observed in seconds.
type Dispatch struct {
	// LeaseMargin is added to a queue's webhook timeout to form the lease of a
	// delivery in Redis: long enough that a live daemon always records its
	// outcome first, short enough that a dead daemon's jobs come back soon.
	LeaseMargin time.Duration `cfg:"leaseMargin" reload:"restart"`
	// ClaimBatch bounds how many jobs one claim script call may hand out.
	ClaimBatch int `cfg:"claimBatch" reload:"restart"`
	// Linger is the least time between two claim (and two settle) script
	// calls of one queue on one daemon. Under load, jobs and outcomes that
	// arrive meanwhile share a call, so Redis runs fewer, larger scripts; an
	// idle queue is never delayed. 0 turns it off.
	Linger time.Duration `cfg:"linger" reload:"restart"`
	// ScheduleLease is how long a daemon owns a queue's due schedules
	// before another daemon may fire them: the longest a tick waits when
	// the daemon firing it dies (runtime.md §4).
	ScheduleLease time.Duration `cfg:"scheduleLease" reload:"restart"`
}

// Tracing exports a span per delivery over OTLP/HTTP (production.md §2), so
// a team sees a job's deliveries inside the publisher's trace in its own
// tracing system. Off unless OTLPEndpoint is set; the publisher's
// traceparent is stored and forwarded to the webhook either way.
type Tracing struct {
	// OTLPEndpoint is the collector's OTLP/HTTP URL, e.g.
	// http://collector:4318 (/v1/traces is added when it has no path); empty
	// turns tracing off.
	OTLPEndpoint string `cfg:"otlpEndpoint,url"`
	// SampleRatio is the share of traces recorded, 0 to 1, for jobs published
	// without a traceparent; a publisher's sampling decision is followed.
	SampleRatio float64 `cfg:"sampleRatio"`
	// ServiceName is the service.name of the spans.
	ServiceName string `cfg:"serviceName"`
}

// Backoff is the retry schedule after a failed delivery.
type Backoff struct {
	Type   string        `cfg:"type"` // "exponential" or "fixed"
	Base   time.Duration `cfg:"base"`
	Max    time.Duration `cfg:"max"`
	Jitter bool          `cfg:"jitter"`
}

// Breaker holds a queue whose webhook keeps failing (semantics.md §4b), so a
// broken webhook (a wrong signing secret answering 401, a bad deploy) does not
// spend every waiting job's attempts within minutes.
type Breaker struct {
	// Failures is how many consecutive failed deliveries, fleet-wide, trip
	// the breaker; 0 turns it off.
	Failures int `cfg:"failures"`
	// HoldFor is how long the tripped breaker holds the queue before one
	// probe goes out (and again after each failed probe).
	HoldFor time.Duration `cfg:"holdFor"`
}

// FlowKeys are a queue's per-lane settings (keys.md §2): a job published
// with a flowKey belongs to that key's lane, which gets its own limits, its
// own hold and its own probe, so one tenant's 429 does not stop the others.
// The queue's Concurrency and RateLimitMax stay the totals over all lanes.
type FlowKeys struct {
	// Concurrency caps each lane's deliveries in flight plus awaiting ack,
	// fleet-wide; 0 means no per-lane cap.
	Concurrency int `cfg:"concurrency"`
	// RateLimitMax caps the deliveries each lane starts per
	// RateLimitWindow (sliding); 0 means none.
	RateLimitMax    int           `cfg:"rateLimitMax"`
	RateLimitWindow time.Duration `cfg:"rateLimitWindow"`
	// HoldScope says what a backpressure answer (429/503/529) to a keyed
	// job holds: "key" its lane only, "queue" the whole queue.
	HoldScope string `cfg:"holdScope"`
}

// QueueSettings are the per-queue knobs that can be set under defaults or per queue.
type QueueSettings struct {
	Mode              string        `cfg:"mode"` // "standard" or "ack"
	Concurrency       int           `cfg:"concurrency"`
	RateLimitMax      int           `cfg:"rateLimitMax"`
	RateLimitWindow   time.Duration `cfg:"rateLimitWindow"`
	MaxAttempts       int           `cfg:"maxAttempts"`
	MaxDefers         int           `cfg:"maxDefers"`
	Timeout           time.Duration `cfg:"timeout"`
	AckTimeout        time.Duration `cfg:"ackTimeout"`
	AckTimeoutAction  string        `cfg:"ackTimeoutAction"` // "retry" or "dead"
	Backoff           Backoff       `cfg:"backoff"`
	DefaultRetryAfter time.Duration `cfg:"defaultRetryAfter"`
	JobLifetime       time.Duration `cfg:"jobLifetime"`
	Retention         time.Duration `cfg:"retention"`
	Breaker           Breaker       `cfg:"breaker"`
	FlowKeys          FlowKeys      `cfg:"flowKeys"`
}

// Queue is one webhook URL plus its settings.
type Queue struct {
	Name       string
	WebhookURL string `cfg:"webhookUrl,url"`
	// SigningSecret is the current secret: it alone signs
	// x-simpleq-signature, so SimpleQ's SDK helpers, which know one secret,
	// keep verifying. With a list (SigningSecrets) it is the list's first.
	SigningSecret string `cfg:"signingSecret,secret,omitempty"`
	// SigningSecretEnv names the environment variable SigningSecret was read
	// from ("" when the file held the secret itself); kept so Redacted can
	// show where the secret comes from without showing the secret.
	SigningSecretEnv string `cfg:"signingSecretEnv,env,omitempty" resolves:"signingSecret"`
	// SigningSecrets are the active secrets, current first, when the queue
	// lists them (signingSecrets or signingSecretsEnv) to rotate: every one
	// signs webhook-signature, so a receiver holding any of them verifies
	// while the old secret is being replaced. nil when the queue names one
	// secret; [Queue.Secrets] covers both forms.
	SigningSecrets []string `cfg:"signingSecrets,secret,numbered,omitempty" resolves:"signingSecret"`
	// SigningSecretsEnv names the environment variable SigningSecrets were
	// read from (a comma- or space-separated list), for Redacted as with
	// SigningSecretEnv.
	SigningSecretsEnv string `cfg:"signingSecretsEnv,env,omitempty" resolves:"signingSecrets,signingSecret"`
	// Checked marks a queue whose webhook URL an API user wrote: its URL is
	// checked against webhooks.allowedHosts and allowPrivateNetworks when
	// written (netguard.Policy.CheckURL), and every connection it makes is
	// checked at the address dialled. Queues loaded from the file leave it
	// false: they are trusted, as runtime.md §2 says.
	Checked bool
	// Defined marks a queue created over the API (ResolveQueueSpec): its
	// definition lives in Redis, and its settings are written there only
	// while the definition exists (store.QueueParams.Defined).
	Defined       bool
	QueueSettings `cfg:",inline"`
}

// Secrets returns the queue's active signing secrets, current first,
// whichever key configured them; nil when none is set. It reads either
// field, so a Queue built in code with only SigningSecret (tests, the
// demo) counts the same as a loaded one.
func (q Queue) Secrets() []string {
	if len(q.SigningSecrets) > 0 {
		return q.SigningSecrets
	}
	if q.SigningSecret != "" {
		return []string{q.SigningSecret}
	}
	return nil
}
