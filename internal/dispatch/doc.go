// Package dispatch moves jobs from Redis to webhooks: a pump per queue with
// work claims due jobs (store.Claim enforces hold, probe and limits fleet-wide), a
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
// Pumps are lazy: a queue's pump exists only while the queue has work or
// a claim due within Options.PumpIdle, and retires after that long idle.
// A retired queue is an entry with its settings; its next due time (a
// delayed job, a lease, a hold's release) waits in one heap served by one
// timer for the whole dispatcher, and a wake-up makes a new pump. 10,000
// idle queues cost no goroutine.
//
// Shutdown is two-phase: cancelling Run's context stops claiming; deliveries
// in flight get the grace period to finish, then are cancelled and handed
// back to Redis without spending an attempt.
package dispatch
