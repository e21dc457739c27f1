package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/config"
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

// Cancel makes one job dead / cancelled in one script call. It returns
// ErrNotFound for an unknown (or purged) job and ErrConflict for one that
// is already completed or dead.
func (s *Store) Cancel(ctx context.Context, q config.Queue, id, reason string) (Cancelled, error) {
	res, err := s.run(ctx, lua.Cancel, q, append(s.params(q, 3), "one", id, CancelError(reason)))
	if err != nil {
		return Cancelled{}, err
	}
	arr, _ := res.([]any)
	if len(arr) != 3 {
		return Cancelled{}, fmt.Errorf("cancel %s on queue %s: unexpected reply of %d values", id, q.Name, len(arr))
	}
	switch toStr(arr[0]) {
	case "NOTFOUND":
		return Cancelled{}, ErrNotFound
	case "TERMINAL":
		return Cancelled{}, fmt.Errorf("%w: job is %s", ErrConflict, apiStatus(toStr(arr[1])))
	case "CANCELLED":
		return Cancelled{Was: Status(toStr(arr[1])), Token: toStr(arr[2])}, nil
	}
	return Cancelled{}, fmt.Errorf("cancel %s on queue %s: unexpected reply %q", id, q.Name, toStr(arr[0]))
}

// CancelFilter chooses the jobs a bulk cancel takes: every condition set
// must hold. A zero filter matches every job that is not terminal.
type CancelFilter struct {
	// Statuses: pending, processing, awaiting_ack (none: any).
	Statuses []Status
	// CreatedBefore, when not zero, takes only jobs created before it.
	CreatedBefore time.Time
	// FlowKey, when set, takes only jobs of that flow key. Jobs carry no
	// flow key yet (keys.md is not built), so a flow key filter matches
	// nothing.
	FlowKey *string
}

// CancelBatch is the ZSCAN COUNT of one bulk cancel script call: about that
// many jobs looked at and cancelled per call. At 100 a call holds Redis for
// about a millisecond or two (docs/performance.md measures it).
var CancelBatch = 100

// CancelCursor is where a bulk cancel goes on: the set being scanned ("w"
// the waiting jobs, "f" the in-flight set; "" when done) and its ZSCAN
// cursor.
type CancelCursor struct {
	Phase  string
	Cursor string
}

// Done reports whether the scan has covered everything.
func (c CancelCursor) Done() bool { return c.Phase == "" }

// StartCancel is the cursor of a bulk cancel's first step.
var StartCancel = CancelCursor{Phase: "w", Cursor: "0"}

// CancelStep runs one bounded bulk cancel script call from cur. It returns
// how many jobs it cancelled, where to go on, and the deliveries under way
// it cancelled (to abort).
func (s *Store) CancelStep(ctx context.Context, q config.Queue, f CancelFilter, reason string, cur CancelCursor) (int, CancelCursor, []Abort, error) {
	if f.FlowKey != nil || cur.Done() {
		return 0, CancelCursor{}, nil, nil
	}
	statuses := make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		statuses[i] = string(st)
	}
	before := ""
	if !f.CreatedBefore.IsZero() {
		before = strconv.FormatInt(f.CreatedBefore.UnixMilli(), 10)
	}
	args := append(s.params(q, 7), "bulk", CancelError(reason), cur.Phase, cur.Cursor, CancelBatch,
		strings.Join(statuses, ","), before)
	res, err := s.run(ctx, lua.Cancel, q, args)
	if err != nil {
		return 0, cur, nil, err
	}
	arr, _ := res.([]any)
	if len(arr) < 3 || (len(arr)-3)%2 != 0 {
		return 0, cur, nil, fmt.Errorf("bulk cancel on queue %s: unexpected reply of %d values", q.Name, len(arr))
	}
	var aborts []Abort
	for i := 3; i < len(arr); i += 2 {
		aborts = append(aborts, Abort{ID: toStr(arr[i]), Token: toStr(arr[i+1])})
	}
	return int(toInt(arr[0])), CancelCursor{Phase: toStr(arr[1]), Cursor: toStr(arr[2])}, aborts, nil
}

// CancelBulk cancels every job of q that f matches, one bounded script call
// after another, until the scan is done or until has passed. onAbort (may be
// nil) is told after each call about the deliveries under way it cancelled.
// done is false when until came first: more may match, and the same call
// goes on.
func (s *Store) CancelBulk(ctx context.Context, q config.Queue, f CancelFilter, reason string, until time.Time,
	onAbort func([]Abort)) (cancelled int, done bool, err error) {
	cur := StartCancel
	for !cur.Done() {
		if time.Now().After(until) {
			return cancelled, false, nil
		}
		n, next, aborts, err := s.CancelStep(ctx, q, f, reason, cur)
		if err != nil {
			return cancelled, false, err
		}
		cancelled += n
		if len(aborts) > 0 && onAbort != nil {
			onAbort(aborts)
		}
		cur = next
	}
	return cancelled, true, nil
}
