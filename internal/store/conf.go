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
// last.
type confs struct {
	mu      sync.Mutex
	encoded map[QueueParams]confValue
	written map[string]string
}

// confValue is one queue's settings in both stored forms (conf.lua): text
// for miniredis, MessagePack for Redis.
type confValue struct{ text, packed string }

// value is q's settings as lib.lua's conf_load reads them: "v1", then the
// fields in its order. New fields are only ever appended.
func (c *confs) value(q QueueParams, leaseMargin int64) (confValue, error) {
	c.mu.Lock()
	v, ok := c.encoded[q]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	fields := []any{"v1", q.Mode, q.Concurrency, q.RateLimitMax, ms(q.RateLimitWindow),
		q.MaxAttempts, q.MaxDefers, ms(q.Timeout) + leaseMargin, ms(q.AckTimeout),
		q.AckTimeoutAction, q.Backoff.Type, ms(q.Backoff.Base), ms(q.Backoff.Max), q.Backoff.Jitter,
		ms(q.JobLifetime), ms(q.Retention), q.Breaker.Failures, ms(q.Breaker.HoldFor),
		q.FlowKeys.Concurrency, q.FlowKeys.RateLimitMax, ms(q.FlowKeys.RateLimitWindow),
		holdScope(q.FlowKeys.HoldScope)}
	text := make([]string, len(fields))
	var packed bytes.Buffer
	enc := msgpack.NewEncoder(&packed)
	enc.UseCompactInts(true)
	for i, f := range fields {
		// One value after another, not an array: cmsgpack.unpack returns
		// them as its results, with no table built.
		if err := enc.Encode(f); err != nil {
			return confValue{}, fmt.Errorf("encode the settings of queue %s: %w", q.Name, err)
		}
		switch x := f.(type) {
		case bool:
			text[i] = "0"
			if x {
				text[i] = "1"
			}
		default:
			text[i] = fmt.Sprint(x)
		}
	}
	v = confValue{text: strings.Join(text, ","), packed: packed.String()}
	c.mu.Lock()
	if c.encoded == nil || len(c.encoded) > 4096 {
		// Bounded: a test or a long run with many reloads builds new
		// QueueParams values; encoding again is cheap.
		c.encoded = map[QueueParams]confValue{}
	}
	c.encoded[q] = v
	c.mu.Unlock()
	return v, nil
}

// stale reports whether this Store must write t as queue's settings.
func (c *confs) stale(queue, t string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written[queue] != t
}

func (c *confs) wrote(queue, t string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.written = map[string]string{}
	}
	c.written[queue] = t
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

// ensureConf writes q's settings to the queue's state hash (lib.lua K_STATE
// conf, by conf.lua) unless this Store last wrote the same ones.
//
// A QueueParams that carries a name only (a schedule's removal with its
// queue, a look-up in another queue) has no settings to write: writing
// its zeros would set every daemon's limits to them.
func (s *Store) ensureConf(ctx context.Context, q QueueParams) error {
	if q == (QueueParams{Name: q.Name, Defined: q.Defined}) {
		return nil
	}
	v, err := s.conf.value(q, s.opts.LeaseMargin.Milliseconds())
	if err != nil {
		return err
	}
	t := v.text
	if !s.conf.stale(q.Name, t) {
		return nil
	}
	defined := "0"
	if q.Defined {
		defined = "1"
	}
	keys := s.Keys(q.Name).List(s.metaKey(q.Name))
	res, err := s.scripts[lua.Conf].Run(ctx, s.rdb, keys, append(s.params(q, 3), v.text, v.packed, defined)...).Result()
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
	switch w := a.str(0); w {
	case "OK":
	case "GONE":
	default:
		a.fail("want OK or GONE, got %q", w)
	}
	if err := a.err(); err != nil {
		return err
	}
	if a.str(0) == "GONE" {
		// GONE: the queue was deleted over the API. The call itself will
		// answer NOCONF, before writing anything.
		return nil
	}
	s.conf.wrote(q.Name, t)
	return nil
}

// isNoConf tells a script's NOCONF answer (lib.lua NOCONF): the queue's
// state hash has no settings, because Redis lost them (a flush, a failover
// to a replica that never had them) or another daemon's removal of the
// queue deleted them.
func isNoConf(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOCONF") }
