package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Key is one lane of a queue (keys.md §5): the jobs of one flow key, with
// its own hold and probe and its effective limits. Lanes live in Redis
// (lua/lanes.lua), so every daemon answers the same.
type Key struct {
	FlowKey string
	// Counts: Pending counts the lane's waiting jobs (first deliveries and
	// retries alike), Processing those in flight, AwaitingAck those whose
	// webhook answered 2xx in ack mode.
	Counts Counts
	Hold   Hold
	// Concurrency and RateLimitMax are the lane's limits in effect (its
	// override, else the queue's flowKeys settings; 0: none), Weight its
	// share in the round-robin (1 to 100).
	Concurrency  int
	RateLimitMax int
	Weight       int
	// Overridden says which of them an override sets (PUT .../keys/{key}).
	Overridden KeyOverride
}

// KeyOverride is a lane's override (keys.md §2): a nil member leaves that
// value to the queue's flowKeys settings.
type KeyOverride struct {
	Concurrency  *int
	RateLimitMax *int
	Weight       *int
}

// KeyState filters ListKeys: held (until the release), probing (released,
// waiting for its probe's success), active (not held), or all ("").
type KeyState string

// Lane states a list can filter on (keys.md §5).
const (
	KeyHeld    KeyState = "held"
	KeyProbing KeyState = "probing"
	KeyActive  KeyState = "active"
	KeyAll     KeyState = ""
)

// MaxKeysPage bounds a page of ListKeys.
const MaxKeysPage = 1000

// GetKey reads one lane; ErrNotFound when it has no jobs, no override and
// no hold (it occupies nothing, keys.md §6).
func (s *Store) GetKey(ctx context.Context, q QueueParams, flowKey string) (Key, error) {
	return s.keyOp(ctx, q, "get", flowKey)
}

// PutKey sets a lane's override (all three values: a nil one goes back to
// the queue's settings), shared by the fleet at once.
func (s *Store) PutKey(ctx context.Context, q QueueParams, flowKey string, o KeyOverride) (Key, error) {
	opt := func(p *int) string {
		if p == nil {
			return ""
		}
		return strconv.Itoa(*p)
	}
	return s.keyOp(ctx, q, "put", flowKey, opt(o.Concurrency), opt(o.RateLimitMax), opt(o.Weight))
}

// DeleteKey removes a lane's override. It answers the lane as it is left,
// or ErrNotFound when nothing of it remains.
func (s *Store) DeleteKey(ctx context.Context, q QueueParams, flowKey string) (Key, error) {
	return s.keyOp(ctx, q, "del", flowKey)
}

// ResumeKey ends a lane's hold early into probing (keys.md §3): the lane
// still reopens only through one successful probe.
func (s *Store) ResumeKey(ctx context.Context, q QueueParams, flowKey string) (Key, error) {
	return s.keyOp(ctx, q, "resume", flowKey)
}

func (s *Store) keyOp(ctx context.Context, q QueueParams, op, flowKey string, extra ...any) (Key, error) {
	args := append(s.params(lua.Keys, q, 2+len(extra)), op, flowKey)
	args = append(args, extra...)
	res, err := s.run(ctx, lua.Keys, q, args)
	if err != nil {
		return Key{}, err
	}
	a := newReply(lua.Keys, q.Name, res, 1)
	switch a.len() {
	case 1:
		if err := a.err(); err != nil {
			return Key{}, err
		}
		return Key{}, ErrNotFound
	case 3:
		now, fk, packed := a.int(0), a.str(1), a.str(2)
		if err := a.err(); err != nil {
			return Key{}, err
		}
		return decodeKey(q, now, fk, packed)
	}
	a.fail("keys %s: want 1 or 3 values", op)
	return Key{}, a.err()
}

// ListKeysParams choose one page of ListKeys.
type ListKeysParams struct {
	// State is the lanes' state listed.
	State KeyState
	// Cursor is "" for the first page, else the cursor a page returned.
	Cursor string
	// Limit is the page size: <= 0 or above MaxKeysPage is MaxKeysPage.
	Limit int
}

// ListKeys reads one page of a queue's lanes in p.State, from p.Cursor;
// the next cursor is "" after the last page. A page may hold fewer than
// p.Limit lanes while more follow (lanes held or emptied meanwhile are
// skipped).
func (s *Store) ListKeys(ctx context.Context, q QueueParams, p ListKeysParams) ([]Key, string, error) {
	state, cursor, limit := p.State, p.Cursor, p.Limit
	if limit <= 0 || limit > MaxKeysPage {
		limit = MaxKeysPage
	}
	res, err := s.run(ctx, lua.Keys, q, append(s.params(lua.Keys, q, 4), "list", string(state), cursor, limit))
	if err != nil {
		return nil, "", err
	}
	a := newReply(lua.Keys, q.Name, res, 2)
	a.want(a.len()%2 == 0, "want lane and state pairs")
	now, next := a.int(0), a.str(1)
	out := make([]Key, 0, max(a.len()-2, 0)/2)
	for i := 2; i+1 < a.len(); i += 2 {
		fk, packed := a.str(i), a.str(i+1)
		if err := a.err(); err != nil {
			return nil, "", err
		}
		k, err := decodeKey(q, now, fk, packed)
		if err != nil {
			return nil, "", err
		}
		out = append(out, k)
	}
	if err := a.err(); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// decodeKey reads lanes.lua's packed lane state
// (nw|nf|na|held|until|probe|pass|at|atv|w|conc|rmax|reason), judging
// its hold on Redis' clock (now, ms).
func decodeKey(q QueueParams, now int64, fk, packed string) (Key, error) {
	f := strings.SplitN(packed, "|", 13)
	if len(f) != 13 {
		return Key{}, fmt.Errorf("lane %q of queue %s: unexpected state %q", fk, q.Name, packed)
	}
	n := func(i int) int64 {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return v
	}
	k := Key{FlowKey: fk, Counts: Counts{Pending: n(0), Processing: n(1), AwaitingAck: n(2)},
		Concurrency: q.FlowKeys.Concurrency, RateLimitMax: q.FlowKeys.RateLimitMax, Weight: 1}
	k.Hold.State = HoldOpen
	if f[3] == "1" {
		until := n(4)
		k.Hold.State = HoldProbing
		if now < until {
			k.Hold.State = HoldHeld
		}
		t := time.UnixMilli(until).UTC()
		k.Hold.Until = &t
		if f[5] != "" {
			p := f[5]
			k.Hold.ProbeJobID = &p
		}
		if f[12] != "" {
			r := f[12]
			k.Hold.Reason = &r
		}
	}
	over := func(i int, dst *int) *int {
		if f[i] == "" {
			return nil
		}
		v := int(n(i))
		*dst = v
		return &v
	}
	k.Overridden.Weight = over(9, &k.Weight)
	k.Overridden.Concurrency = over(10, &k.Concurrency)
	k.Overridden.RateLimitMax = over(11, &k.RateLimitMax)
	return k, nil
}
