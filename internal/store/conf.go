package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/simpleq/simpleqd/internal/lua"
)

// confScripts are the scripts that read a queue's settings (lib.lua
// conf_load): before one runs, the Store makes sure Redis holds the
// settings it was given for the queue. The others read or write no
// setting (inspect, control, lists, stats, the registry, a queue's
// definition and its removal).
var confScripts = map[string]bool{
	lua.Publish: true, lua.Claim: true, lua.Settle: true, lua.Callback: true, lua.Replay: true,
	lua.Cancel: true, lua.Schedule: true, lua.Keys: true,
}

// confs remembers, per queue, the settings this Store last wrote to Redis,
// so a call writes them only when they changed here (a reload, a queue
// created over the API), not on every call: last writer wins, and a daemon
// whose copy is a reload behind keeps claiming under what the fleet wrote
// last. It keeps the QueueParams, not their encoding: telling whether a
// call must write is one comparison, and only a write encodes.
type confs struct {
	mu      sync.Mutex
	written map[string]QueueParams
}

// stale reports whether this Store must write q's settings.
func (c *confs) stale(q QueueParams) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.written[q.Name]
	return !ok || w != q
}

func (c *confs) wrote(q QueueParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.written = map[string]QueueParams{}
	}
	c.written[q.Name] = q
}

// forget drops what this Store wrote for queue, or for every queue when
// queue is "": the next call writes again (Redis answered NOCONF, or it
// restarted and may have come back with older data).
func (c *confs) forget(queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if queue == "" {
		clear(c.written)
		return
	}
	delete(c.written, queue)
}

// encodeConf is q's settings in both stored forms (conf.lua), as lib.lua's
// conf_load reads them: "v1", then the fields in its order, joined by ","
// (text, for miniredis) and as MessagePack values one after another
// (packed, for Redis). New fields are only ever appended.
func encodeConf(q QueueParams, leaseMargin int64) (text, packed string, err error) {
	fields := []any{"v1", q.Mode, q.Concurrency, q.RateLimitMax, ms(q.RateLimitWindow),
		q.MaxAttempts, q.MaxDefers, ms(q.Timeout) + leaseMargin, ms(q.AckTimeout),
		q.AckTimeoutAction, q.Backoff.Type, ms(q.Backoff.Base), ms(q.Backoff.Max), q.Backoff.Jitter,
		ms(q.JobLifetime), ms(q.Retention), q.Breaker.Failures, ms(q.Breaker.HoldFor),
		q.FlowKeys.Concurrency, q.FlowKeys.RateLimitMax, ms(q.FlowKeys.RateLimitWindow),
		holdScope(q.FlowKeys.HoldScope)}
	texts := make([]string, len(fields))
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	for i, f := range fields {
		// One value after another, not an array: cmsgpack.unpack returns
		// them as its results, with no table built.
		if err := enc.Encode(f); err != nil {
			return "", "", fmt.Errorf("encode the settings of queue %s: %w", q.Name, err)
		}
		switch x := f.(type) {
		case bool:
			texts[i] = "0"
			if x {
				texts[i] = "1"
			}
		default:
			texts[i] = fmt.Sprint(x)
		}
	}
	return strings.Join(texts, ","), buf.String(), nil
}

// ensureConf writes q's settings to the queue's state hash (lib.lua K_STATE
// conf and confm, by conf.lua) unless this Store last wrote the same ones.
//
// A QueueParams that carries a name only (a schedule's removal with its
// queue, a look-up in another queue) has no settings to write: writing
// its zeros would set every daemon's limits to them.
func (s *Store) ensureConf(ctx context.Context, q QueueParams) error {
	if q == (QueueParams{Name: q.Name, Defined: q.Defined}) || !s.conf.stale(q) {
		return nil
	}
	text, packed, err := encodeConf(q, s.opts.LeaseMargin.Milliseconds())
	if err != nil {
		return err
	}
	defined := "0"
	if q.Defined {
		defined = "1"
	}
	keys := s.Keys(q.Name).List(s.metaKey(q.Name))
	res, err := s.sc.run(ctx, s.rdb, lua.Conf, keys, append(s.params(lua.Conf, q, 3), text, packed, defined)).Result()
	if err != nil {
		if redis.HasErrorPrefix(err, "READONLY") {
			// A replica (a master demoted mid-failover): it has the
			// settings its master had, and the call itself gets Redis'
			// own answer there.
			return nil
		}
		return wrap(fmt.Errorf("write the settings of queue %s: %w", q.Name, err))
	}
	a := newReply(lua.Conf, q.Name, res, 1)
	w := a.str(0)
	if w != "OK" && w != "GONE" {
		a.fail("want OK or GONE, got %q", w)
	}
	if err := a.err(); err != nil {
		return err
	}
	if w == "OK" {
		s.conf.wrote(q)
	}
	// GONE: the queue was deleted over the API. The call itself answers
	// NOCONF, before writing anything.
	return nil
}

// isNoConf tells a script's NOCONF answer (lib.lua NOCONF): the queue's
// state hash has no settings, because Redis lost them (a flush, a failover
// to a replica that never had them) or another daemon's removal of the
// queue deleted them.
func isNoConf(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOCONF") }
