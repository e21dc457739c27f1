package store

import "time"

// QueueParams are the settings of one queue that the scripts read, and
// nothing else (no webhook URL, no secrets): the storage seam's own view of
// a queue, so that package store needs nothing of package config. Package
// queueparams builds it from a config.Queue (Of). It is comparable, so
// telling whether a queue's settings changed is one ==.
type QueueParams struct {
	Name string
	// Defined marks a queue created over the API: its settings are written
	// to Redis only while its definition is there (conf.go), so a daemon a
	// moment behind a deletion cannot bring the queue's state back.
	Defined bool
	// Mode is "standard" or "ack".
	Mode            string
	Concurrency     int
	RateLimitMax    int
	RateLimitWindow time.Duration
	MaxAttempts     int
	MaxDefers       int
	// Timeout is the webhook's timeout; a delivery's lease is Timeout plus
	// the Store's LeaseMargin.
	Timeout    time.Duration
	AckTimeout time.Duration
	// AckTimeoutAction is "retry" or "dead".
	AckTimeoutAction string
	Backoff          Backoff
	JobLifetime      time.Duration
	Retention        time.Duration
	Breaker          Breaker
	FlowKeys         FlowKeys
}

// Backoff is a queue's retry backoff.
type Backoff struct {
	// Type is "exponential" or "fixed".
	Type   string
	Base   time.Duration
	Max    time.Duration
	Jitter bool
}

// Breaker is a queue's circuit breaker (semantics.md §4b): Failures in a
// row hold the queue for HoldFor; 0 failures is off.
type Breaker struct {
	Failures int
	HoldFor  time.Duration
}

// FlowKeys are the default limits of each lane of a queue (keys.md).
type FlowKeys struct {
	Concurrency     int
	RateLimitMax    int
	RateLimitWindow time.Duration
	// HoldScope is "key" or "queue"; "" reads as "key".
	HoldScope string
}
