// Package queueparams turns a configured queue (package config) into the
// settings the storage seam reads (store.QueueParams), so that neither
// package imports the other: config describes what an operator wrote,
// store what the scripts enforce.
package queueparams

import (
	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// Of is the store's view of q: the settings the scripts read.
func Of(q config.Queue) store.QueueParams {
	return store.QueueParams{
		Name:             q.Name,
		Defined:          q.Defined,
		Mode:             q.Mode,
		Concurrency:      q.Concurrency,
		RateLimitMax:     q.RateLimitMax,
		RateLimitWindow:  q.RateLimitWindow,
		MaxAttempts:      q.MaxAttempts,
		MaxDefers:        q.MaxDefers,
		Timeout:          q.Timeout,
		AckTimeout:       q.AckTimeout,
		AckTimeoutAction: q.AckTimeoutAction,
		Backoff: store.Backoff{Type: q.Backoff.Type, Base: q.Backoff.Base, Max: q.Backoff.Max,
			Jitter: q.Backoff.Jitter},
		JobLifetime: q.JobLifetime,
		Retention:   q.Retention,
		Breaker:     store.Breaker{Failures: q.Breaker.Failures, HoldFor: q.Breaker.HoldFor},
		FlowKeys: store.FlowKeys{Concurrency: q.FlowKeys.Concurrency, RateLimitMax: q.FlowKeys.RateLimitMax,
			RateLimitWindow: q.FlowKeys.RateLimitWindow, HoldScope: q.FlowKeys.HoldScope},
	}
}

// ofAll is Of of each queue.
func ofAll(qs []config.Queue) []store.QueueParams {
	out := make([]store.QueueParams, len(qs))
	for i, q := range qs {
		out[i] = Of(q)
	}
	return out
}
