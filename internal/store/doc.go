// Package store is simpleqd's storage seam: the only code that talks to Redis.
//
// Each method is one typed call of one script from package lua (or a plain
// read), so callers never build keys or parse script replies, and every state
// change stays a single atomic script run on Redis' clock. Keys are built here
// and only here, each with the queue's hash tag, so a queue's keys share one
// Redis Cluster slot.
//
// A queue reaches the store as a QueueParams (params.go): only the
// settings the scripts read, so this package knows nothing of package
// config (package queueparams builds them from a config.Queue). Keys are
// named (QueueKeys) and every script reply is read through a checked
// decoder (reply.go): a reply of a shape the decoder does not expect is an
// ErrUnexpectedReply, never a silent zero.
//
// What lives where, and why:
//   - A queue's jobs, its hold, its counters and its lanes live in the
//     queue's own keys (Keys: 11 of lib.lua, 6 of flow keys' lanes), so one
//     script sees all it needs in one slot. Lanes (flow keys, keys.md) are
//     fixed keys of the queue, not a key per lane: a lane is a field of
//     {queue}:lanes and members of sorted sets, so every key a script
//     touches is declared in KEYS, and a lane with no jobs, no override and
//     no hold occupies nothing.
//   - A lane's override (concurrency, rateLimitMax, weight) lives in its
//     field of {queue}:lanes, shared by the fleet at once (PutKey).
//   - Limits of queues created over the API live in the queue's state hash
//     (lim_conc, lim_rmax, lim_rwin, written by queuedef.lua): every
//     daemon's claim reads them there, so a change converges at once. A
//     file queue's settings still travel as ARGV from the daemon's loaded
//     configuration (issue 22 item 2 is not finished: during a rolling
//     reload two daemons can briefly enforce two sets for file queues).
//
// Queues created over the API keep their definitions in Redis too: the
// {queue}:meta hash in the queue's slot and a registry in a slot of its own,
// {#registry} (keys and write order: queuedefs.go).
package store
