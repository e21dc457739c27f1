// Package events keeps a short, bounded memory of what happened to each
// queue on this daemon — deliveries, backpressure holds, probes, reopenings,
// dead letters, callbacks and operator actions — so that an operator can see
// a queue's recent story (GET /v1/queues/{queue}/events, the web console's
// timeline) without reading logs.
//
// Why it is shaped this way:
//
//   - In memory, per daemon, bounded. Each queue has a fixed-size ring
//     (Capacity events); the oldest event is overwritten. Nothing is written to
//     Redis, so recording costs no round trip on the delivery path and cannot
//     fail or fill Redis. The price is that a daemon sees only its own events:
//     in a fleet, each daemon's timeline shows the deliveries it made and the
//     callbacks and operator calls its API received, and a restart forgets
//     everything. Durable facts (a job's history, the dead-letter list, the
//     queue's hold state) stay in Redis and are read from there.
//   - Fed from where the facts are known: the dispatcher's one outcome
//     pipeline (Log is its Observer: Claimed, Settled for deliveries and
//     ack-mode callbacks alike, Reaped) and the admin endpoints (Record).
//   - Derived events are explicit. One settled delivery can yield several
//     events: the delivery itself, and the hold it started, the reopening it
//     caused, or the dead letter it produced. A timeline then reads as a list
//     without interpreting settle words in the browser.
package events

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/simpleq/simpleqd/internal/store"
)

// Kinds of events.
const (
	// KindDelivery: a webhook delivery's outcome was recorded (any result).
	KindDelivery = "delivery"
	// KindProbe: a probe delivery started (the one job sent after a hold ends).
	KindProbe = "probe"
	// KindHold: a queue-scope defer (a 429/503/529 answer or a defer callback)
	// or a breaker trip held the queue, or extended or kept its hold. Until
	// is the queue's release time after it (the latest any defer asked
	// for), and Time when it happened, both on Redis' clock as the script
	// reported them.
	KindHold = "hold"
	// KindReopen: a probe succeeded (or was acked) and the queue reopened.
	KindReopen = "reopen"
	// KindDead: a job was dead-lettered; Reason is the dead reason.
	KindDead = "dead"
	// KindCallback: an ack-mode ack, nack or defer was applied (Outcome).
	KindCallback = "callback"
	// KindPause, KindResume, KindReplay: operator actions over the API.
	KindPause  = "pause"
	KindResume = "resume"
	KindReplay = "replay"
	// KindReaped: Redis housekeeping moved a job no daemon was watching:
	// Outcome is lease_expired, ack_timeout or lifetime; Result retry or dead.
	KindReaped = "reaped"
)

// DefaultCapacity is how many events a queue's ring keeps: enough for a
// screenful of recent history at a glance, small enough that a daemon with
// hundreds of queues holds only a few megabytes.
const DefaultCapacity = 256

// maxPending bounds the claimed-but-unsettled jobs remembered for their
// attempt number; a settle that never arrives (Redis gone for minutes) must
// not grow the map forever.
const maxPending = 100_000

// Event is one thing that happened to a queue, as this daemon saw it.
// Zero-valued fields do not apply to the event's kind.
type Event struct {
	// Seq orders events of this daemon (all queues), starting at 1; the
	// browser uses it as a row key.
	Seq uint64
	// Time is when this daemon recorded the event (its own clock), except
	// for hold and reopen events: Redis' time of the transition.
	Time time.Time
	// Kind is one of the Kind constants.
	Kind string
	// JobID is the job concerned, if any.
	JobID string
	// Attempt is the delivery's attempt number (1-based), when known.
	Attempt int
	// Probe marks a probe delivery and the events it caused.
	Probe bool
	// Result is what Redis did with an outcome, lower-cased settle word:
	// completed, reopened, awaiting, retry, dead, deferred, released, stale.
	Result string
	// Outcome is the delivery's outcome kind (ok, delivered, fail, defer,
	// release) or the callback kind (ack, nack, defer).
	Outcome string
	// StatusCode is the webhook's HTTP status, 0 when there was no answer.
	StatusCode int
	// Error is the delivery error or nack reason text.
	Error string
	// RetryAfter is the backpressure wait asked for.
	RetryAfter time.Duration
	// Until is the queue's release time (a hold) or a retry's due time
	// (Redis' clock).
	Until time.Time
	// Reason is a dead reason, a defer reason or a pause reason.
	Reason string
	// Count is how many jobs an operator's replay moved back to pending.
	Count int
}

// ring is one queue's last events, oldest overwritten first.
type ring struct {
	buf  []Event
	next int
	full bool
}

func (r *ring) add(e Event) {
	r.buf[r.next] = e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// newest returns up to limit events, newest first.
func (r *ring) newest(limit int) []Event {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	if limit > n {
		limit = n
	}
	out := make([]Event, 0, limit)
	for i := 1; i <= limit; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

type pendingJob struct {
	attempt int
	probe   bool
}

// Log is this daemon's event memory: one ring per queue. All methods are safe
// for concurrent use, and a nil *Log records nothing and returns nothing, so
// callers need no checks.
type Log struct {
	capacity int
	now      func() time.Time

	mu      sync.Mutex
	seq     uint64
	rings   map[string]*ring
	pending map[string]pendingJob // job id → attempt being delivered
}

// New returns a Log keeping capacity events per queue (<= 0: DefaultCapacity).
func New(capacity int) *Log {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Log{capacity: capacity, now: time.Now, rings: map[string]*ring{}, pending: map[string]pendingJob{}}
}

// Capacity is how many events each queue keeps.
func (l *Log) Capacity() int {
	if l == nil {
		return 0
	}
	return l.capacity
}

// Record adds e to queue's ring, stamping Seq and (when zero) Time.
func (l *Log) Record(queue string, e Event) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(queue, e)
}

func (l *Log) recordLocked(queue string, e Event) {
	l.seq++
	e.Seq = l.seq
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	r := l.rings[queue]
	if r == nil {
		r = &ring{buf: make([]Event, l.capacity)}
		l.rings[queue] = r
	}
	r.add(e)
}

// Recent returns up to limit of queue's events, newest first.
func (l *Log) Recent(queue string, limit int) []Event {
	if l == nil || limit <= 0 {
		return []Event{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rings[queue]
	if r == nil {
		return []Event{}
	}
	return r.newest(limit)
}

// Claimed is called by the dispatcher for every job it takes. It remembers
// the attempt number for the delivery event, and records a probe's start.
func (l *Log) Claimed(queue string, j store.ClaimedJob) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) >= maxPending {
		clear(l.pending) // settles lost for good; attempt numbers are cosmetic
	}
	l.pending[j.ID] = pendingJob{attempt: j.Attempt, probe: j.Probe}
	if j.Probe {
		// Redis' time of the probe, like every other hold event's.
		l.recordLocked(queue, Event{Kind: KindProbe, Time: j.ProbeAt, JobID: j.ID, Attempt: j.Attempt, Probe: true})
	}
}

// Settled is called by the dispatcher for every applied outcome: a
// delivery's (the delivery itself) or an ack-mode callback's (the
// callback), each with the hold, reopening or dead letter it caused.
func (l *Log) Settled(s store.Settlement) {
	if l == nil || s.Result.Word == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := s.Result
	if s.Source == store.FromCallback {
		cb := s.Callback
		base := Event{JobID: s.JobID, Attempt: cb.Attempt}
		e := base
		e.Kind = KindCallback
		e.Outcome = string(cb.Kind)
		e.Result = lower(string(r.Word))
		e.RetryAfter = cb.RetryAfter
		e.Reason = cb.Reason
		if r.Word == store.Retry {
			e.Until = msTime(r.Detail)
		}
		l.recordLocked(s.Queue, e)
		l.derivedLocked(s.Queue, base, r, cb.RetryAfter, cb.Reason)
		return
	}
	o := s.Outcome
	p := l.pending[s.JobID]
	delete(l.pending, s.JobID)
	base := Event{JobID: s.JobID, Attempt: p.attempt, Probe: p.probe}
	d := base
	d.Kind = KindDelivery
	d.Result = lower(string(r.Word))
	d.Outcome = string(o.Kind)
	d.StatusCode = o.StatusCode
	d.Error = o.Error
	d.RetryAfter = o.RetryAfter
	if r.Word == store.Retry {
		d.Until = msTime(r.Detail)
	}
	l.recordLocked(s.Queue, d)
	l.derivedLocked(s.Queue, base, r, o.RetryAfter, o.Reason)
	if !r.BreakerUntil.IsZero() {
		// The failure tripped the breaker (or, past it, held the queue
		// again): the queue's release after it, on Redis' clock.
		h := base
		h.Kind = KindHold
		h.Time = r.Hold.At
		h.Until = r.BreakerUntil
		if !r.Hold.Until.IsZero() {
			h.Until = r.Hold.Until
		}
		h.Reason = "breaker: " + o.Error
		l.recordLocked(s.Queue, h)
	}
}

// Reaped records a job that housekeeping moved on (a lost delivery, an ack
// timeout, a lifetime that ended while it waited), and its dead letter.
func (l *Log) Reaped(queue string, r store.Reaped) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, r.ID)
	e := Event{Kind: KindReaped, JobID: r.ID, Outcome: r.Kind, Result: lower(string(r.Word))}
	if r.Word == store.Retry {
		e.Until = msTime(r.Detail)
	}
	l.recordLocked(queue, e)
	if r.Word == store.Dead {
		l.recordLocked(queue, Event{Kind: KindDead, JobID: r.ID, Reason: r.Detail})
	}
}

// derivedLocked records what an outcome did to the queue or the job beyond
// the delivery itself. Callers hold l.mu.
func (l *Log) derivedLocked(queue string, base Event, s store.Settled, retryAfter time.Duration, reason string) {
	// A queue-scope defer held the queue, extended or kept its hold: as the
	// script reported it, on Redis' clock (a breaker trip is told apart).
	if s.Hold.Change != "" && s.BreakerUntil.IsZero() {
		h := base
		h.Kind = KindHold
		h.Time = s.Hold.At
		h.RetryAfter = retryAfter
		h.Reason = reason
		h.Until = s.Hold.Until
		l.recordLocked(queue, h)
	}
	switch s.Word {
	case store.Reopened:
		r := base
		r.Kind = KindReopen
		r.Time = s.ReopenedAt
		r.Probe = true
		l.recordLocked(queue, r)
	case store.Dead:
		d := base
		d.Kind = KindDead
		d.Reason = s.Detail
		l.recordLocked(queue, d)
	}
}

// Observer is what the dispatcher reports to (dispatch.Observer, the same
// methods): claims, applied outcomes and housekeeping. Spelled here so
// that this package needs nothing of the dispatcher.
type Observer interface {
	Claimed(queue string, j store.ClaimedJob)
	Settled(s store.Settlement)
	Reaped(queue string, r store.Reaped)
}

// Observers fans dispatcher reports out to several observers (metrics and
// the event log), in order; nil entries are skipped.
func Observers(obs ...Observer) Observer {
	out := make(multi, 0, len(obs))
	for _, o := range obs {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

type multi []Observer

func (m multi) Claimed(queue string, j store.ClaimedJob) {
	for _, o := range m {
		o.Claimed(queue, j)
	}
}

func (m multi) Settled(s store.Settlement) {
	for _, ob := range m {
		ob.Settled(s)
	}
}

func (m multi) Reaped(queue string, r store.Reaped) {
	for _, o := range m {
		o.Reaped(queue, r)
	}
}

// lower renders a settle word the way the API's JSON spells states.
func lower(word string) string { return strings.ToLower(word) }

// msTime parses a settle detail in Unix milliseconds; zero when it is not one.
func msTime(detail string) time.Time {
	ms, err := strconv.ParseInt(detail, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
