package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Cancelled is what cancelling one job did (control.md §1).
type Cancelled struct {
	// Was is the status the job had: pending, processing or awaiting_ack.
	Was Status
	// Token, when not empty, is the lease token of the delivery that was
	// under way: the daemon holding it must abort the request (Abort). Its
	// slot stays taken until that delivery's outcome is settled (STALE).
	Token string
}

// Status is Was, for logs.
func (c Cancelled) Status() Status { return c.Was }

// Abort names a delivery under way of a job that was cancelled: the daemon
// holding it aborts the request when it hears of it (package wakeup).
type Abort struct {
	ID    string
	Token string
}

// CancelError is the lastError a cancel writes: "cancelled: <reason>", or
// "cancelled" without one.
func CancelError(reason string) string {
	if reason == "" {
		return "cancelled"
	}
	return "cancelled: " + reason
}

// CancelParams name the job a cancel takes and the reason it records.
type CancelParams struct {
	// ID is the job's id.
	ID string
	// Reason, when set, is written into lastError (CancelError).
	Reason string
}

// Cancel makes one job dead / cancelled in one script call. It returns
// ErrNotFound for an unknown (or purged) job and ErrConflict for one that
// is already completed or dead.
func (s *Store) Cancel(ctx context.Context, q QueueParams, p CancelParams) (Cancelled, error) {
	id, reason := p.ID, p.Reason
	res, err := s.run(ctx, lua.Cancel, q, append(s.params(lua.Cancel, q, 3), "one", id, CancelError(reason)))
	if err != nil {
		return Cancelled{}, err
	}
	a := newReply(lua.Cancel, q.Name, res, 3)
	word, detail, token := a.str(0), a.str(1), a.str(2)
	if err := a.err(); err != nil {
		return Cancelled{}, fmt.Errorf("cancel %s: %w", id, err)
	}
	switch word {
	case "NOTFOUND":
		return Cancelled{}, ErrNotFound
	case "TERMINAL":
		return Cancelled{}, fmt.Errorf("%w: job is %s", ErrConflict, apiStatus(detail))
	case "CANCELLED":
		return Cancelled{Was: Status(detail), Token: token}, nil
	}
	a.unknown(0)
	return Cancelled{}, fmt.Errorf("cancel %s: %w", id, a.err())
}

// CancelFilter chooses the jobs a bulk cancel takes: every condition set
// must hold. A zero filter matches every job that is not terminal.
type CancelFilter struct {
	// Statuses: pending, processing, awaiting_ack (none: any).
	Statuses []Status
	// CreatedBefore, when not zero, takes only jobs created before it.
	CreatedBefore time.Time
	// FlowKey, when set, takes only jobs of that flow key (keys.md): its
	// waiting jobs are walked as its lane's range of the keyed waiting set.
	FlowKey *string
}

// CancelLimits bound one bulk cancel script call (one step): it looks at
// no more than Look members of the set it walks, matching or not, and
// stops once Budget of Redis' clock has passed (checked after each chunk of
// 16 members, the chunk's writes included), whichever comes first.
type CancelLimits struct {
	Look   int
	Budget time.Duration
}

// DefaultCancelLimits are the limits of the API's bulk cancel. On the
// benchmark VM a step then takes about 1.5-2.5 ms of Redis' CPU, whatever
// the backlog or the filter (docs/performance.md measures it): calls stay
// within a few milliseconds, and claims and settles run between them.
var DefaultCancelLimits = CancelLimits{Look: 500, Budget: 1500 * time.Microsecond}

// CancelCursor is where a bulk cancel goes on: the set being walked ("w"
// the waiting jobs, "f" the in-flight set; "" when done, "start" to go on
// from the cursor Redis keeps for the same filter) and the position in it
// (opaque: the last member left behind, as cancel.lua writes it).
type CancelCursor struct {
	Phase    string
	Position string
}

// Done reports whether the scan has covered everything.
func (c CancelCursor) Done() bool { return c.Phase == "" }

// StartCancel is the cursor of the first step of a bulk cancel request. It
// goes on from where the last request with the same filter stopped when
// that one answered done: false less than a minute ago (the cursor Redis
// keeps; any daemon), and from the start otherwise: so a filter that
// leaves most jobs alone is walked once, not once per request.
var StartCancel = CancelCursor{Phase: "start"}

// BulkStep is what one bulk cancel script call did.
type BulkStep struct {
	// Cancelled is how many jobs it cancelled.
	Cancelled int
	// Looked is how many set members it looked at (the work it did).
	Looked int
	// Next is where the next step goes on.
	Next CancelCursor
	// Aborts are the deliveries under way it cancelled: the daemons
	// holding them abort their requests.
	Aborts []Abort
}

// cancelCursorKey is the key of the cursor a bulk cancel keeps for filter f
// (cancel.lua): per queue (its hash tag) and per filter, so that two
// different filters never share a scan.
func (s *Store) cancelCursorKey(queue string, statuses []string, before, flowKey string) string {
	sorted := slices.Clone(statuses)
	slices.Sort(sorted)
	sum := sha256.Sum256([]byte(strings.Join(sorted, ",") + "\n" + before + "\n" + flowKey))
	return s.opts.Prefix + ":{" + queue + "}:cancelcur:" + hex.EncodeToString(sum[:12])
}

// BulkCancelParams are what one bulk cancel step (BulkCancelStep) or a
// whole bulk cancel (CancelBulk) works with.
type BulkCancelParams struct {
	// Filter chooses the jobs.
	Filter CancelFilter
	// Reason, when set, is written into each job's lastError (CancelError).
	Reason string
	// Cursor is where the step goes on: StartCancel for a first step (the
	// zero cursor is Done). CancelBulk always starts at StartCancel.
	Cursor CancelCursor
	// Limits bound each script call; zero is DefaultCancelLimits.
	Limits CancelLimits
}

// BulkCancelStep runs one bulk cancel script call from p.Cursor, within
// p.Limits. A cursor that is Done does nothing.
func (s *Store) BulkCancelStep(ctx context.Context, q QueueParams, p BulkCancelParams) (BulkStep, error) {
	f, reason, cur, lim := p.Filter, p.Reason, p.Cursor, p.Limits
	if cur.Done() {
		return BulkStep{}, nil
	}
	if lim == (CancelLimits{}) {
		lim = DefaultCancelLimits
	}
	flowKey := ""
	if f.FlowKey != nil {
		flowKey = *f.FlowKey
	}
	statuses := make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		statuses[i] = string(st)
	}
	before := ""
	if !f.CreatedBefore.IsZero() {
		before = strconv.FormatInt(f.CreatedBefore.UnixMilli(), 10)
	}
	args := append(s.params(lua.Cancel, q, 9), "bulk", CancelError(reason), cur.Phase, cur.Position, max(lim.Look, 1),
		lim.Budget.Microseconds(), strings.Join(statuses, ","), before, flowKey)
	keys := s.Keys(q.Name).List(s.cancelCursorKey(q.Name, statuses, before, flowKey))
	res, err := s.runKeys(ctx, lua.Cancel, q, keys, args)
	if err != nil {
		return BulkStep{Next: cur}, err
	}
	a := newReply(lua.Cancel, q.Name, res, 4)
	a.want((a.len()-4)%2 == 0, "want id and token pairs after 4 values")
	step := BulkStep{
		Cancelled: int(a.int(0)),
		Looked:    int(a.int(3)),
		Next:      CancelCursor{Phase: a.str(1), Position: a.str(2)},
	}
	for i := 4; i+1 < a.len(); i += 2 {
		step.Aborts = append(step.Aborts, Abort{ID: a.str(i), Token: a.str(i + 1)})
	}
	if err := a.err(); err != nil {
		return BulkStep{Next: cur}, err
	}
	return step, nil
}

// CancelBulk cancels every job of q that f matches, one bounded script call
// after another, until the scan is done or until has passed. onAbort (may be
// nil) is told after each call about the deliveries under way it cancelled.
// done is false when until came first: more may match, and the same call
// goes on.
func (s *Store) CancelBulk(ctx context.Context, q QueueParams, p BulkCancelParams, until time.Time,
	onAbort func([]Abort)) (cancelled int, done bool, err error) {
	p.Cursor = StartCancel
	for !p.Cursor.Done() {
		if time.Now().After(until) {
			return cancelled, false, nil
		}
		step, err := s.BulkCancelStep(ctx, q, p)
		if err != nil {
			return cancelled, false, err
		}
		cancelled += step.Cancelled
		if len(step.Aborts) > 0 && onAbort != nil {
			onAbort(step.Aborts)
		}
		p.Cursor = step.Next
	}
	return cancelled, true, nil
}
