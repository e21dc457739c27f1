package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/internal/lua"
)

// MaxPublishBatch is the most jobs one publish script call takes (Lua's
// unpack limit leaves room for 1000 at 4 values each); Publish splits larger
// batches into several calls, each atomic per job as always.
const MaxPublishBatch = 1000

// NewID mints a job id for queue (see id.go for its shape).
func (s *Store) NewID(queue string) string { return s.ids.New(queue) }

// Publish stores jobs in one script call; per job it reports whether the job
// is new or an idempotent repeat of a retained one.
func (s *Store) Publish(ctx context.Context, q QueueParams, jobs []NewJob) ([]Published, error) {
	if len(jobs) > MaxPublishBatch {
		out := make([]Published, 0, len(jobs))
		for len(jobs) > 0 {
			n := min(len(jobs), MaxPublishBatch)
			res, err := s.Publish(ctx, q, jobs[:n])
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
			jobs = jobs[n:]
		}
		return out, nil
	}
	args := s.params(lua.Publish, q, 1+7*len(jobs))
	args = append(args, len(jobs))
	ids := make([]string, len(jobs))
	traced := 0
	for i, j := range jobs {
		ids[i] = s.NewID(q.Name)
		args = append(args, ids[i], j.IdempotencyKey, ms(j.Delay), j.Priority, j.ReplaceKey, j.FlowKey, []byte(j.Payload))
		if j.TraceParent != "" {
			traced++
		}
	}
	// Trace contexts follow the jobs (lua/publish.lua), only for the jobs
	// that have one: a publish without traces sends no more than before.
	if traced > 0 {
		for i, j := range jobs {
			if j.TraceParent != "" {
				args = append(args, i+1, j.TraceParent, j.TraceState)
			}
		}
	}
	res, err := s.run(ctx, lua.Publish, q, args)
	if err != nil {
		return nil, err
	}
	return parsePublished(q, ids, res)
}

// parsePublished reads publish.lua's reply for the jobs of ids.
func parsePublished(q QueueParams, ids []string, res any) ([]Published, error) {
	jobs := ids
	a := newReply(lua.Publish, q.Name, res, 1+len(jobs))
	a.want(a.len() == 1+len(jobs), "want one value per job")
	now := fromMS(a.int(0))
	out := make([]Published, len(jobs))
	for i := range jobs {
		r := a.optStr(1 + i)
		if r == "" {
			out[i] = Published{ID: ids[i], CreatedAt: now, Status: StatusPending}
			continue
		}
		// "<word>|<id>|<createdAt ms>|<state>"; ids and states hold no "|".
		// NEW: this call ran before (a retry after a lost reply), DUP: an
		// idempotent repeat, REP: a replaced payload (lua/publish.lua).
		f := strings.SplitN(r, "|", 4)
		if len(f) != 4 || (f[0] != "NEW" && f[0] != "DUP" && f[0] != "REP") {
			a.fail("job %d: %q", i+1, r)
			break
		}
		c, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			a.fail("job %d: created %q", i+1, f[2])
			break
		}
		out[i] = Published{ID: f[1], CreatedAt: fromMS(c), Status: apiStatus(f[3]), Duplicate: f[0] == "DUP",
			Replaced: f[0] == "REP"}
	}
	if err := a.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ClaimWord says what a claim found.
type ClaimWord string

// Claim outcomes; see lua/claim.lua.
const (
	Claimed ClaimWord = "CLAIMED"
	Empty   ClaimWord = "EMPTY"
	Paused  ClaimWord = "PAUSED"
	Held    ClaimWord = "HELD"
	Probing ClaimWord = "PROBING"
	Busy    ClaimWord = "BUSY"
	Rate    ClaimWord = "RATE"
)

// ClaimedJob is one job handed to this daemon for delivery, under a lease.
type ClaimedJob struct {
	ID         string
	Attempt    int
	DeferCount int
	CreatedAt  time.Time
	// Token fences this delivery: outcomes settled with a stale token are ignored.
	Token string
	// Probe marks the probe of a held queue; LaneProbe the probe of a held
	// lane (keys.md §3), which reopens only that lane.
	Probe     bool
	LaneProbe bool
	// ProbeAt is when a probe was taken, on Redis' clock (zero for a job
	// that is not a probe): the time its event shows, whatever this
	// daemon's clock says.
	ProbeAt time.Time
	// FlowKey is the job's flow key ("" for none), sent as the
	// x-simpleq-flow-key header (keys.md §1).
	FlowKey string
	Payload []byte
	// TraceParent and TraceState are the W3C trace context the job was
	// published with ("" for none): the parent of the delivery's span, or,
	// with tracing off, what the webhook is handed unchanged.
	TraceParent string
	TraceState  string
}

// ClaimResult is what one claim call returned.
type ClaimResult struct {
	Word ClaimWord
	// WakeIn is how long until the queue next needs a claim (Redis' clock);
	// negative when only a wake-up message can change anything.
	WakeIn time.Duration
	Jobs   []ClaimedJob
	// Reaped lists what the claim's housekeeping did to jobs no daemon was
	// watching, so the daemon can log and count it.
	Reaped []Reaped
}

// Reaped is one job that housekeeping moved on: its lease expired (a lost
// delivery), its ack timed out, or its lifetime ended while it waited.
type Reaped struct {
	// Kind is "lease_expired", "ack_timeout" or "lifetime".
	Kind string
	ID   string
	// Word is Retry or Dead; Detail the retry's due time in ms or the dead reason.
	Word   SettleWord
	Detail string
}

// NewCall names one claim or settle call. Sending a call again under the
// same name, after an error that may have hidden its reply (a read timeout
// while Redis stalled), returns what the first run did instead of claiming
// more: its leases are never left belonging to nobody.
func (s *Store) NewCall() string { return s.token() }

// Claim takes up to max due jobs for delivery, enforcing hold, probe,
// concurrency and rate limit fleet-wide.
func (s *Store) Claim(ctx context.Context, q QueueParams, max int) (ClaimResult, error) {
	return s.ClaimCall(ctx, q, ClaimParams{Max: max, Call: s.NewCall()})
}

// ClaimParams are what one claim call takes.
type ClaimParams struct {
	// Max is the most jobs it takes.
	Max int
	// Call is the call's name from NewCall: a failed call is sent again
	// under the same name.
	Call string
}

// ClaimCall is Claim under a call name from NewCall: the caller sends a
// failed call again with the same name (see NewCall).
func (s *Store) ClaimCall(ctx context.Context, q QueueParams, p ClaimParams) (ClaimResult, error) {
	max, call := p.Max, p.Call
	args := append(s.params(lua.Claim, q, 2), max, call)
	res, err := s.runCall(ctx, lua.Claim, q, call, args)
	if err != nil {
		return ClaimResult{}, err
	}
	arr, _ := res.([]any)
	return parseClaim(q, arr)
}

// probeFlag reads a claimed job's flag (lib.lua claim_jobs): "0", or "1"
// (the queue's probe) or "k" (a lane's), each followed by ":" and the
// time it was taken in ms. A bare "1" (a call answered again from its log,
// lib.lua call_replay) has no time: its event takes the daemon's.
func probeFlag(v string) (flag string, at time.Time) {
	f, t, ok := strings.Cut(v, ":")
	if ok {
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			at = fromMS(n)
		}
	}
	return f, at
}

func parseClaim(q QueueParams, arr []any) (ClaimResult, error) {
	r := newReply(lua.Claim, q.Name, arr, 3)
	if err := r.err(); err != nil {
		return ClaimResult{}, err
	}
	word, err := claimWord(arr[0])
	if err != nil {
		return ClaimResult{}, fmt.Errorf("claim on queue %s: %w", q.Name, err)
	}
	out := ClaimResult{Word: word, WakeIn: -1}
	if w := r.int(1); w >= 0 {
		out.WakeIn = time.Duration(w) * time.Millisecond
	}
	n := int(r.int(2))
	rest := arr[3:]
	if n < 0 || len(rest) < 4*n || (len(rest)-4*n)%4 != 0 {
		r.fail("%d reaped and %d more values", n, len(rest))
	}
	if err := r.err(); err != nil {
		return ClaimResult{}, err
	}
	for i := 0; i < 4*n; i += 4 {
		w, err := settleWord(rest[i+2], reapedWords)
		if err != nil {
			return ClaimResult{}, fmt.Errorf("claim on queue %s: housekeeping: %w", q.Name, err)
		}
		out.Reaped = append(out.Reaped, Reaped{Kind: r.str(3 + i), ID: r.str(4 + i),
			Word: w, Detail: r.str(6 + i)})
	}
	for b := 3 + 4*n; b < len(arr); b += 4 {
		id, rec := r.str(b), r.str(b+3)
		if err := r.err(); err != nil {
			return ClaimResult{}, err
		}
		m, err := readClaimedRecord(rec)
		if err != nil {
			return ClaimResult{}, fmt.Errorf("claim on queue %s: job %s: %w", q.Name, id, err)
		}
		flag, probeAt := probeFlag(r.str(b + 2))
		out.Jobs = append(out.Jobs, ClaimedJob{
			ID:          id,
			Attempt:     m.A + 1,
			DeferCount:  m.D,
			CreatedAt:   fromMS(int64(m.C)),
			Token:       r.str(b + 1),
			Probe:       flag == "1",
			LaneProbe:   flag == "k",
			ProbeAt:     probeAt,
			FlowKey:     m.FlowKey,
			Payload:     m.Payload,
			TraceParent: m.TraceParent,
			TraceState:  m.TraceState,
		})
	}
	if err := r.err(); err != nil {
		return ClaimResult{}, err
	}
	return out, nil
}

// OutcomeKind is how a delivery ended, as the dispatcher classified it.
type OutcomeKind string

// Outcome kinds; see lua/settle.lua.
const (
	OutcomeOK        OutcomeKind = "ok"
	OutcomeDelivered OutcomeKind = "delivered"
	OutcomeFail      OutcomeKind = "fail"
	OutcomeDefer     OutcomeKind = "defer"
	OutcomeRelease   OutcomeKind = "release"
)

// Outcome is the result of one delivery, to be recorded under its lease token.
type Outcome struct {
	ID         string
	Token      string
	Kind       OutcomeKind
	StatusCode int // 0: no HTTP response
	Error      string
	RetryAfter time.Duration
	// RetryAt, when not zero, is an absolute release time (a Retry-After
	// HTTP-date): the script turns it into a wait on Redis' clock, so the
	// daemon's own clock never enters a release time. It overrides RetryAfter.
	RetryAt time.Time
	Reason  string
}

// Settled is what recording one outcome did.
type Settled struct {
	// Word is Completed, Reopened, Awaiting, Retry, Dead, Deferred, Released
	// or Stale; for a callback also Acked (a repeated ack) or Repeated (a
	// nack or defer sent again after its reply was lost: applied once, 2xx).
	Word SettleWord
	// Detail is the dead reason for DEAD, a time in ms for RETRY/DEFERRED/AWAITING.
	Detail string
	// BreakerUntil, when not zero, is the release time of the breaker hold
	// (semantics.md §4b) that this outcome started or extended.
	BreakerUntil time.Time
	// LaneUntil, when not zero, is the release this outcome (a 429/503/529
	// or a defer of a keyed job) asked of its lane's hold (keys.md §3): a
	// DEFERRED or DEAD with it held the lane, not the queue.
	LaneUntil time.Time
	// Hold is what the outcome (a queue-scope defer, a breaker trip) did
	// to the queue's hold, with Redis' times; zero when nothing.
	Hold QueueHold
	// ProbeEnded: the outcome ended the queue's probe (its success, its
	// failure or backpressure, or its hand-back).
	ProbeEnded bool
	// ReopenedAt is Redis' time when the outcome (Reopened) reopened the queue.
	ReopenedAt time.Time
}

// Settle records outcomes of this daemon's deliveries in one script call.
func (s *Store) Settle(ctx context.Context, q QueueParams, outcomes []Outcome) ([]Settled, error) {
	res, _, err := s.SettleAndClaim(ctx, q, outcomes, Refill{})
	return res, err
}

// Refill is what a settle call claims, in the same script call, for the
// slots its outcomes freed.
type Refill struct {
	// Max is the most jobs to claim; 0 claims nothing.
	Max int
	// SkipHousekeeping leaves out the claim's bounded housekeeping (expired
	// leases, ack timeouts, ended lifetimes, retention purges). A busy
	// daemon settles hundreds of times a second and housekeeping costs
	// Redis about 30 µs per call, so the dispatcher runs it only every few
	// milliseconds; a plain Claim always runs it.
	SkipHousekeeping bool
	// Call names the call (NewCall); "" makes a new name. A caller that
	// sends a failed settle again passes the same name, so the call's
	// outcomes and claims are answered from its first run if it had one.
	Call string
}

// SettleAndClaim records outcomes and, in the same script call, claims jobs
// for the slots those outcomes freed (see Refill): a busy daemon refills its
// slots with one call and one round trip instead of two.
func (s *Store) SettleAndClaim(ctx context.Context, q QueueParams, outcomes []Outcome, refill Refill) ([]Settled, ClaimResult, error) {
	max := refill.Max
	call := refill.Call
	if call == "" {
		call = s.NewCall()
	}
	args := s.params(lua.Settle, q, 4+7*len(outcomes))
	args = append(args, len(outcomes))
	for _, o := range outcomes {
		code := ""
		if o.StatusCode > 0 {
			code = strconv.Itoa(o.StatusCode)
		}
		var retry any = ms(o.RetryAfter)
		if !o.RetryAt.IsZero() {
			retry = "@" + strconv.FormatInt(o.RetryAt.UnixMilli(), 10)
		}
		args = append(args, o.ID, o.Token, string(o.Kind), code, o.Error, retry, o.Reason)
	}
	if max > 0 {
		args = append(args, max, call)
		if refill.SkipHousekeeping {
			args = append(args, "0")
		}
	}
	res, err := s.runCall(ctx, lua.Settle, q, call, args)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	if err := newReply(lua.Settle, q.Name, res, 3*len(outcomes)).err(); err != nil {
		return nil, ClaimResult{}, err
	}
	arr := res.([]any)
	out := make([]Settled, len(outcomes))
	for i := range outcomes {
		w, err := settleWord(arr[3*i], settleWords)
		if err != nil {
			return nil, ClaimResult{}, fmt.Errorf("settle on queue %s: %w", q.Name, err)
		}
		out[i] = Settled{Word: w, Detail: toStr(arr[3*i+1])}
		if err := parseHold(&out[i], arr[3*i+2]); err != nil {
			return nil, ClaimResult{}, fmt.Errorf("settle on queue %s: %w", q.Name, err)
		}
	}
	var claim ClaimResult
	if max > 0 {
		if claim, err = parseClaim(q, arr[3*len(outcomes):]); err != nil {
			return nil, ClaimResult{}, err
		}
	}
	return out, claim, nil
}

// Callback applies an ack-mode worker's ack, nack or defer. It returns the
// settle word of what happened (Completed, Reopened, Retry, Dead, Deferred,
// Acked for a repeated ack, Repeated) or ErrNotFound, ErrConflict,
// ErrStaleAttempt.
func (s *Store) Callback(ctx context.Context, q QueueParams, cb Callback) (Settled, error) {
	attempt := ""
	if cb.Attempt > 0 {
		attempt = strconv.Itoa(cb.Attempt)
	}
	retryable := "0"
	if cb.Retryable {
		retryable = "1"
	}
	scope := cb.Scope // ScopeDefault ("") is resolved by the script (keys.md §3)
	args := append(s.params(lua.Callback, q, 7), cb.JobID, string(cb.Kind), attempt, retryable,
		ms(cb.RetryAfter), string(scope), cb.Reason)
	res, err := s.runKeys(ctx, lua.Callback, q, s.Keys(q.Name).List(s.statsKey(q.Name)), args)
	if err != nil {
		return Settled{}, err
	}
	if err := newReply(lua.Callback, q.Name, res, 3).err(); err != nil {
		return Settled{}, err
	}
	arr := res.([]any)
	w, err := settleWord(arr[0], callbackWords)
	if err != nil {
		return Settled{}, fmt.Errorf("callback on queue %s: %w", q.Name, err)
	}
	r := Settled{Word: w, Detail: toStr(arr[1])}
	if err := parseHold(&r, arr[2]); err != nil {
		return Settled{}, fmt.Errorf("callback on queue %s: %w", q.Name, err)
	}
	switch r.Word {
	case NotFound:
		return r, ErrNotFound
	case Conflict:
		return r, fmt.Errorf("%w: job is %s", ErrConflict, apiStatus(r.Detail))
	case Stale:
		return r, fmt.Errorf("%w: current attempt is %s", ErrStaleAttempt, r.Detail)
	}
	return r, nil
}

// QueueStatus reads a queue's counts and hold state, judged on Redis' clock.
func (s *Store) QueueStatus(ctx context.Context, q QueueParams) (QueueStatus, error) {
	res, err := s.run(ctx, lua.Inspect, q, s.params(lua.Inspect, q, 0))
	if err != nil {
		return QueueStatus{}, err
	}
	a := newReply(lua.Inspect, q.Name, res, 13)
	now := a.int(0)
	waiting, pending, inflight, awaiting := a.int(7), a.int(8), a.int(9), a.int(10)
	st := QueueStatus{Name: q.Name, Counts: Counts{
		Pending:     pending,
		Processing:  waiting - pending + inflight - awaiting,
		AwaitingAck: awaiting,
		Dead:        a.int(11),
		HeldKeys:    a.int(12),
	}}
	st.Hold.State = HoldOpen
	if reason := a.str(6); reason != "" && a.str(3) == "1" {
		st.Hold.Reason = &reason
	}
	if a.str(3) == "1" {
		until := a.int(4)
		if now < until {
			st.Hold.State = HoldHeld
		} else {
			st.Hold.State = HoldProbing
		}
		t := fromMS(until)
		st.Hold.Until = &t
		if p := a.str(5); p != "" {
			st.Hold.ProbeJobID = &p
		}
	}
	if a.str(1) == "1" {
		st.Hold.State = HoldPaused
		if r := a.str(2); r != "" {
			st.Hold.Reason = &r
		} else {
			st.Hold.Reason = nil
		}
	}
	if err := a.err(); err != nil {
		return QueueStatus{}, err
	}
	return st, nil
}

// Pause stops all deliveries of a queue until Resume.
func (s *Store) Pause(ctx context.Context, q QueueParams, reason string) error {
	_, err := s.run(ctx, lua.Control, q, append(s.params(lua.Control, q, 2), "pause", reason))
	return err
}

// Resume ends a pause, and ends a backpressure hold early (the queue probes).
func (s *Store) Resume(ctx context.Context, q QueueParams) error {
	_, err := s.run(ctx, lua.Control, q, append(s.params(lua.Control, q, 2), "resume", ""))
	return err
}

// Replay moves the given dead jobs back to waiting; it returns how many moved.
func (s *Store) Replay(ctx context.Context, q QueueParams, ids []string) (int, error) {
	args := append(s.params(lua.Replay, q, 1+len(ids)), "ids")
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := s.run(ctx, lua.Replay, q, args)
	if err != nil {
		return 0, err
	}
	a := newReply(lua.Replay, q.Name, res, 2)
	return int(a.int(0)), a.err()
}

// ReplayAll moves every dead job of a queue back to waiting, in bounded batches.
func (s *Store) ReplayAll(ctx context.Context, q QueueParams) (int, error) {
	total := 0
	for {
		res, err := s.run(ctx, lua.Replay, q, append(s.params(lua.Replay, q, 2), "all", 500))
		if err != nil {
			return total, err
		}
		a := newReply(lua.Replay, q.Name, res, 2)
		n, left := int(a.int(0)), a.int(1)
		if err := a.err(); err != nil {
			return total, err
		}
		total += n
		if n == 0 || left == 0 {
			return total, nil
		}
	}
}

// GetJob reads a job, its history and whether it is in flight (a plain read:
// three hash fields).
func (s *Store) GetJob(ctx context.Context, q QueueParams, id string) (*Job, error) {
	keys := s.Keys(q.Name)
	pipe := s.rdb.Pipeline()
	recCmd := pipe.HGet(ctx, keys.Jobs, id)
	histCmd := pipe.HGet(ctx, keys.Hist, id)
	leaseCmd := pipe.HExists(ctx, keys.Leases, id)
	_, _ = pipe.Exec(ctx)
	rec, err := recCmd.Bytes()
	if err != nil {
		if isNil(err) {
			return nil, ErrNotFound
		}
		return nil, wrap(fmt.Errorf("get job %s: %w", id, err))
	}
	hist, herr := histCmd.Bytes()
	if herr != nil && !isNil(herr) {
		return nil, wrap(fmt.Errorf("get history of %s: %w", id, herr))
	}
	j, err := decodeJob(q, id, rec, hist)
	if err != nil {
		return nil, err
	}
	// A claim leaves the record as it was (st p or r) and writes a lease.
	if j.Status == StatusPending && leaseCmd.Val() {
		j.Status = StatusProcessing
	}
	return j, nil
}
