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
// A call takes the queue, then what that one call is about: a single
// value when there is one (an id, a flow key, a job list), or the
// operation's own Params struct when there are several (CancelParams,
// BulkCancelParams, ClaimParams, ListJobsParams, ListKeysParams,
// ListDeadParams, StatsParams, QueueDefParams, DropQueueParams): named
// fields where positions of the same type could be swapped unnoticed, and
// a new option is a field with a zero value, not a change of every caller.
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
//   - A queue's settings (mode, limits, retries, backoff, lifetimes,
//     breaker, flow keys' defaults) live in the queue's state hash, field
//     conf (conf.go; lib.lua conf_load has the layout). Every script that
//     reads a setting reads it there, not from its arguments, so the whole
//     fleet enforces one set: the one written last. A Store writes a
//     queue's settings when its copy differs from what it last wrote (at
//     its first call after start-up or a reload, or for a queue created
//     over the API, its first call after learning the definition), so a
//     rolling reload switches the fleet at the first call of the first
//     reloaded daemon, and a daemon still on the old file keeps claiming
//     under the new limits. A queue with no conf (Redis flushed, a failover
//     to a replica that never had it) answers NOCONF before any write; the
//     Store writes its copy and sends the call once more. A restarted Redis
//     (its script cache empty, Ping) makes the Store write every queue's
//     settings again, since the data it came back with may be older.
//     ARGV carries only what is the caller's own: the call's own
//     arguments, after the per-call values its script reads and no others
//     (package lua's CallValues: claim and settle get a random value, the
//     maintenance batch and the delivery lease; callback the random value;
//     every other script none).
//     What it costs per claim is in docs/performance.md ("settings in
//     Redis").
//   - Limits set by a queue created over the API also live in the state
//     hash (lim_conc, lim_rmax, lim_rwin, written by queuedef.lua with the
//     definition, atomically) and override conf's: a lowered limit holds
//     from the write, before any daemon has re-read the definition.
//   - What stays in each daemon: the webhook (URL, secret, timeout of its
//     HTTP client), how many jobs it asks for per claim, and the local
//     knobs that decide its own work, not the fleet's rules. A delivery's
//     lease is among them (ARGV, the caller's timeout plus LeaseMargin):
//     it guards that daemon's HTTP request, so it must outlast that
//     daemon's timeout, whatever another daemon's file says.
//
// Queues created over the API keep their definitions in Redis too: the
// {queue}:meta hash in the queue's slot and a registry in a slot of its own,
// {#registry} (keys and write order: queuedefs.go).
package store
