// Package dispatch moves jobs from Redis to webhooks: one pump per queue claims
// due jobs (store.Claim enforces hold, probe and limits fleet-wide), a
// delivery goroutine POSTs each signed envelope (goroutines are reused while
// the queue is busy), and a settler per queue records outcomes in batches and
// claims their replacements in the same call (store.SettleAndClaim, fenced by
// lease tokens).
//
// Pumps sleep until something can change: a wake-up (a publish, a callback, a
// freed slot, a reopened queue, here or on another daemon through Redis
// pub/sub) or the time the claim script said the queue next needs attention,
// computed on Redis' clock. A paused or held queue ignores new-work wake-ups:
// only a state change or its release time can make it deliver. There is no fixed polling on the hot path; a long
// safety timer only guards against a lost pub/sub message.
//
// Shutdown is two-phase: cancelling Run's context stops claiming; deliveries
// in flight get the grace period to finish, then are cancelled and handed
// back to Redis without spending an attempt.
package dispatch
