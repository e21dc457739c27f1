// Package store is simpleqd's storage seam: the only code that talks to Redis.
//
// Each method is one typed call of one script from package lua (or a plain
// read), so callers never build keys or parse script replies, and every state
// change stays a single atomic script run on Redis' clock. Keys are built here
// and only here, each with the queue's hash tag, so a queue's keys share one
// Redis Cluster slot.
//
// Queues created over the API keep their definitions in Redis too: the
// {queue}:meta hash in the queue's slot and a registry in a slot of its own,
// {#registry} (keys and write order: queuedefs.go).
package store
