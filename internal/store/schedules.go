package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simpleq/simpleqd/internal/cronspec"
	"github.com/simpleq/simpleqd/internal/lua"
)

// Schedules (runtime.md §4). A queue's schedules live on the queue's own
// slot (schedule.lua: definitions, run state, the due index and what a
// firing needs, prepared when a schedule is written), so a firing publishes
// its job, records the run and stores the next tick in one atomic call. An
// @every schedule's ticks are computed by the script itself; a cron
// schedule's by package schedule (robfig/cron). A fleet-wide index on its
// own slot (schedindex.lua) tells daemons when to look at which queue; it
// may be early, never late.

// Sources of a schedule: declared in the config file, or created over the API.
const (
	ScheduleSourceFile = "file"
	ScheduleSourceAPI  = "api"
)

// Errors of schedule writes, mapped to status codes by the API.
var (
	// ErrScheduleNotFound: no schedule with that id.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrFileSchedule: the schedule is declared in the config file and the
	// API may not change or delete it.
	ErrFileSchedule = errors.New("schedule is managed by the config file")
	// ErrScheduleTaken: a file schedule's id is held by an API schedule.
	ErrScheduleTaken = errors.New("schedule id is held by a schedule created over the API")
)

// ScheduleIDElsewhereError: the id names a schedule of another queue (ids
// are unique fleet-wide).
type ScheduleIDElsewhereError struct{ Queue string }

func (e *ScheduleIDElsewhereError) Error() string {
	return fmt.Sprintf("schedule id is in use on queue %q", e.Queue)
}

// Schedule is one schedule as the API reports it.
type Schedule struct {
	ID       string
	Queue    string
	Cron     string
	Timezone string
	// Payload is the raw JSON object every job of the schedule carries.
	Payload json.RawMessage
	// Priority (0-9) is carried to every job (lua/schedule.lua). FlowKey is
	// stored and returned; it is carried to the jobs once flow keys exist.
	FlowKey   *string
	Priority  int
	Paused    bool
	NextRunAt time.Time
	LastRunAt *time.Time
	LastJobID *string
	Source    string
}

// Spec is the schedule's cron and time zone as schedule.lua keeps them to
// tell a changed timing from an unchanged one.
func (sc Schedule) Spec() string { return sc.Cron + "\t" + sc.Timezone }

// scheduleDef is the stored definition's meta. Source comes first:
// schedule.lua reads it from the record's first bytes.
type scheduleDef struct {
	Source   string  `json:"source"`
	ID       string  `json:"id"`
	Queue    string  `json:"queue"`
	Cron     string  `json:"cron"`
	Timezone string  `json:"timezone"`
	FlowKey  *string `json:"flowKey"`
	Priority int     `json:"priority"`
}

// scheduleRun is schedule.lua's run state ("<p>|<n>|<l>|<j>").
type scheduleRun struct {
	Paused bool
	Next   int64
	Last   int64
	Job    string
}

func decodeRun(raw string) (scheduleRun, error) {
	var r scheduleRun
	parts := strings.SplitN(raw, "|", 4)
	if len(parts) != 4 {
		return r, fmt.Errorf("run state %q: want p|n|l|j", raw)
	}
	var err1, err2 error
	r.Paused = parts[0] == "1"
	r.Next, err1 = strconv.ParseInt(parts[1], 10, 64)
	r.Last, err2 = strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("run state %q: %w", raw, err)
	}
	r.Job = parts[3]
	return r, nil
}

// scheduleKeys are the queue keys of lib.lua followed by schedule.lua's own
// four (the script takes them from the end).
func (s *Store) scheduleKeys(queue string) []string {
	base := s.opts.Prefix + ":{" + queue + "}:"
	return s.Keys(queue).List(base+"schedules", base+"sched_run", base+"sched_due", base+"sched_fire")
}

// indexKeys are schedindex.lua's keys, on a slot of their own.
func (s *Store) indexKeys() []string {
	base := s.opts.Prefix + ":{~sched}:"
	return []string{base + "due", base + "ver", base + "ids"}
}

// ScheduleWakeChannel is the pub/sub channel on which a schedule change that
// may bring a tick forward wakes every daemon's scheduler.
func (s *Store) ScheduleWakeChannel() string { return s.opts.Prefix + ":schedules:wake" }

// NewScheduleID mints an id for a schedule created without one: "sch_"
// and a time-ordered ULID.
func (s *Store) NewScheduleID() string {
	id := s.ids.New("")
	return "sch_" + id[len(idPrefix):len(idPrefix)+ulidChars]
}

func (s *Store) schedule(ctx context.Context, q QueueParams, args ...any) (*reply, error) {
	res, err := s.runKeys(ctx, lua.Schedule, q, s.scheduleKeys(q.Name), append(s.params(lua.Schedule, q, len(args)), args...))
	if err != nil {
		return nil, err
	}
	a := newReply(lua.Schedule, q.Name, res, 0)
	return a, a.err()
}

func (s *Store) index(ctx context.Context, args ...any) (any, error) {
	return s.runKeys(ctx, lua.SchedIndex, QueueParams{Name: "~sched"}, s.indexKeys(), args)
}

// RedisTime is Redis' clock, from which a new schedule's first tick is
// computed (the one clock every daemon agrees on).
func (s *Store) RedisTime(ctx context.Context) (time.Time, error) {
	t, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, wrap(fmt.Errorf("redis time: %w", err))
	}
	return t, nil
}

// PutSchedule creates sc, or replaces the schedule of that id and source
// (keeping its run state, and its next tick when cron and time zone are
// unchanged). next is the first tick after now, computed by the caller on
// Redis' clock. It returns whether it created the schedule, and the
// schedule as stored. An API write to a file schedule is ErrFileSchedule; a
// file schedule whose id an API schedule holds is ErrScheduleTaken; an id
// of another queue's schedule is a *ScheduleIDElsewhereError.
func (s *Store) PutSchedule(ctx context.Context, q QueueParams, sc Schedule, next time.Time) (bool, *Schedule, error) {
	if err := s.claimScheduleID(ctx, sc.ID, q.Name); err != nil {
		return false, nil, err
	}
	// The index first: a crash after it leaves it early, never late.
	if _, err := s.index(ctx, "lower", q.Name, next.UnixMilli()); err != nil {
		return false, nil, err
	}
	def, err := json.Marshal(scheduleDef{Source: sc.Source, ID: sc.ID, Queue: q.Name, Cron: sc.Cron,
		Timezone: sc.Timezone, FlowKey: sc.FlowKey, Priority: sc.Priority})
	if err != nil {
		return false, nil, fmt.Errorf("encode schedule %s: %w", sc.ID, err)
	}
	tm, err := cronspec.Parse(sc.Cron, sc.Timezone)
	if err != nil {
		return false, nil, fmt.Errorf("schedule %s: cron %q: %w", sc.ID, sc.Cron, err)
	}
	rec := append(append(def, '\n'), sc.Payload...)
	a, err := s.schedule(ctx, q, "put", sc.ID, rec, sc.Source, next.UnixMilli(), tm.Every().Milliseconds())
	if err != nil {
		return false, nil, err
	}
	switch a.str(0) {
	case "FILE":
		return false, nil, ErrFileSchedule
	case "TAKEN":
		return false, nil, ErrScheduleTaken
	}
	if err := a.err(); err != nil {
		return false, nil, err
	}
	s.wakeSchedulers(ctx)
	out, err := decodeSchedule(string(rec), a.str(1))
	if err != nil {
		return false, nil, err
	}
	return a.str(0) == "CREATED", out, nil
}

// claimScheduleID records id as q's in the fleet-wide id map. An id that
// names another queue's schedule is refused; an entry whose schedule is
// gone (a crash between a delete and its map update) is taken over.
func (s *Store) claimScheduleID(ctx context.Context, id, queue string) error {
	res, err := s.index(ctx, "claimid", id, queue)
	if err != nil {
		return err
	}
	other, ok := res.(string)
	if !ok {
		return fmt.Errorf("%w: script %s: want a string, got %T", ErrUnexpectedReply, lua.SchedIndex, res)
	}
	if other == "OK" {
		return nil
	}
	if _, err := s.getSchedule(ctx, QueueParams{Name: other}, id); err == nil {
		return &ScheduleIDElsewhereError{Queue: other}
	} else if !errors.Is(err, ErrScheduleNotFound) {
		return err
	}
	res, err = s.index(ctx, "claimid", id, queue, other)
	if err != nil {
		return err
	}
	if o, ok := res.(string); !ok {
		return fmt.Errorf("%w: script %s: want a string, got %T", ErrUnexpectedReply, lua.SchedIndex, res)
	} else if o != "OK" {
		return &ScheduleIDElsewhereError{Queue: o}
	}
	return nil
}

// ScheduleQueue returns the queue of the schedule called id ("", false when
// no schedule has that id).
func (s *Store) ScheduleQueue(ctx context.Context, id string) (string, bool, error) {
	q, err := s.rdb.HGet(ctx, s.indexKeys()[2], id).Result()
	if err != nil {
		if isNil(err) {
			return "", false, nil
		}
		return "", false, wrap(fmt.Errorf("schedule %s: %w", id, err))
	}
	return q, true, nil
}

// GetSchedule returns the schedule id of queue q, or ErrScheduleNotFound.
func (s *Store) GetSchedule(ctx context.Context, q QueueParams, id string) (*Schedule, error) {
	return s.getSchedule(ctx, q, id)
}

func (s *Store) getSchedule(ctx context.Context, q QueueParams, id string) (*Schedule, error) {
	a, err := s.schedule(ctx, q, "get", id)
	if err != nil {
		return nil, err
	}
	if a.len() < 2 {
		return nil, ErrScheduleNotFound
	}
	def, ver := a.str(0), a.str(1)
	if err := a.err(); err != nil {
		return nil, err
	}
	return decodeSchedule(def, ver)
}

// ListSchedules returns every schedule of queue q, in no particular order.
func (s *Store) ListSchedules(ctx context.Context, q QueueParams) ([]*Schedule, error) {
	a, err := s.schedule(ctx, q, "list")
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, 0, a.len()/3)
	for i := 0; i+2 < a.len(); i += 3 {
		def, ver := a.str(i+1), a.str(i+2)
		if err := a.err(); err != nil {
			return nil, err
		}
		sc, err := decodeSchedule(def, ver)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// ScheduleQueues lists the queues that hold schedules, from the fleet-wide
// id map (GET /v1/schedules without a queue).
func (s *Store) ScheduleQueues(ctx context.Context) ([]string, error) {
	vals, err := s.rdb.HVals(ctx, s.indexKeys()[2]).Result()
	if err != nil {
		return nil, wrap(fmt.Errorf("schedule queues: %w", err))
	}
	seen := map[string]bool{}
	out := []string{}
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// DeleteSchedule deletes the schedule id of queue q. source "api" refuses a
// file schedule (ErrFileSchedule); ScheduleSourceFile deletes either.
func (s *Store) DeleteSchedule(ctx context.Context, q QueueParams, id, source string) error {
	a, err := s.schedule(ctx, q, "del", id, source)
	if err != nil {
		return err
	}
	if a.want(a.len() >= 1, "want a word"); a.err() != nil {
		return a.err()
	}
	switch a.str(0) {
	case "FILE":
		return ErrFileSchedule
	case "NONE":
		return ErrScheduleNotFound
	}
	// Best effort: a stale entry is taken over by the next create of the id.
	_, _ = s.index(ctx, "dropid", id, q.Name)
	return nil
}

// DeleteQueueSchedules deletes every schedule of queue (runtime.md §4: a
// schedule on a deleted queue is deleted with it) and reports how many.
// The queue's other settings are not needed: call it when deleting a queue.
func (s *Store) DeleteQueueSchedules(ctx context.Context, queue string) (int, error) {
	q := QueueParams{Name: queue}
	list, err := s.ListSchedules(ctx, q)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sc := range list {
		if err := s.DeleteSchedule(ctx, q, sc.ID, "any"); err != nil && !errors.Is(err, ErrScheduleNotFound) {
			return n, fmt.Errorf("delete schedule %s of queue %s: %w", sc.ID, queue, err)
		}
		n++
	}
	return n, nil
}

// PauseSchedule stops the schedule's ticks until ResumeSchedule.
func (s *Store) PauseSchedule(ctx context.Context, q QueueParams, id string) (*Schedule, error) {
	return s.pauseResume(ctx, q, id, "pause", time.Time{})
}

// ResumeSchedule restarts a paused schedule at next, its first tick after
// now (computed by the caller on Redis' clock): ticks that fell while it
// was paused are skipped, not caught up. Resuming a running schedule
// changes nothing.
func (s *Store) ResumeSchedule(ctx context.Context, q QueueParams, id string, next time.Time) (*Schedule, error) {
	if _, err := s.index(ctx, "lower", q.Name, next.UnixMilli()); err != nil {
		return nil, err
	}
	sc, err := s.pauseResume(ctx, q, id, "resume", next)
	if err == nil {
		s.wakeSchedulers(ctx)
	}
	return sc, err
}

func (s *Store) pauseResume(ctx context.Context, q QueueParams, id, op string, next time.Time) (*Schedule, error) {
	a, err := s.schedule(ctx, q, op, id, next.UnixMilli())
	if err != nil {
		return nil, err
	}
	if w := a.str(0); a.err() != nil {
		return nil, a.err()
	} else if w != "OK" {
		return nil, ErrScheduleNotFound
	}
	return s.getSchedule(ctx, q, id)
}

// wakeSchedulers tells every daemon's scheduler that a tick may have come
// forward. A lost message only delays the tick to the scheduler's safety
// timer: the index already holds it.
func (s *Store) wakeSchedulers(ctx context.Context) {
	_ = s.rdb.Publish(ctx, s.ScheduleWakeChannel(), "1").Err()
}

func decodeSchedule(rec, run string) (*Schedule, error) {
	i := strings.IndexByte(rec, '\n')
	if i < 0 {
		return nil, errors.New("schedule: corrupt record")
	}
	var d scheduleDef
	if err := json.Unmarshal([]byte(rec[:i]), &d); err != nil {
		return nil, fmt.Errorf("schedule: decode definition: %w", err)
	}
	r, err := decodeRun(run)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", d.ID, err)
	}
	sc := &Schedule{ID: d.ID, Queue: d.Queue, Cron: d.Cron, Timezone: d.Timezone, Payload: json.RawMessage(rec[i+1:]),
		FlowKey: d.FlowKey, Priority: d.Priority, Paused: r.Paused, NextRunAt: fromMS(r.Next), Source: d.Source}
	if r.Last > 0 {
		t := fromMS(r.Last)
		sc.LastRunAt = &t
	}
	if r.Job != "" {
		j := r.Job
		sc.LastJobID = &j
	}
	return sc, nil
}

// IndexedQueue is a queue the fleet-wide index says is due, taken by this
// daemon for a lease, with the index version it was taken at.
type IndexedQueue struct {
	Queue   string
	Version string
}

// TakeScheduleQueues takes up to max queues whose schedules are due by
// Redis' clock, each for lease: another daemon takes it only once the
// lease ends (this one died). wake is how long until the index's next entry
// is due (-1: the index is empty).
func (s *Store) TakeScheduleQueues(ctx context.Context, lease time.Duration, max int) (time.Duration, []IndexedQueue, error) {
	res, err := s.index(ctx, "take", ms(lease), max)
	if err != nil {
		return 0, nil, err
	}
	a := newReply(lua.SchedIndex, "~sched", res, 1)
	if err := a.err(); err != nil {
		return 0, nil, err
	}
	w := a.int(0)
	wake := time.Duration(w) * time.Millisecond
	if w < 0 {
		wake = -1
	}
	out := make([]IndexedQueue, 0, (a.len()-1)/2)
	for i := 1; i+1 < a.len(); i += 2 {
		out = append(out, IndexedQueue{Queue: a.str(i), Version: a.str(i + 1)})
	}
	return wake, out, a.err()
}

// IndexSettle is one queue's entry of SettleScheduleIndexes: its earliest
// tick ("" for none) after a firing round that took it at Version. Version
// "-" is a queue the daemon does not know; Earliest is then a delay in ms
// until the fleet looks at it again.
type IndexSettle struct {
	Queue, Version, Earliest string
}

// SettleScheduleIndex records the queue's earliest tick ("" for none) in
// the fleet-wide index after a firing round that took it at version.
func (s *Store) SettleScheduleIndex(ctx context.Context, queue, version, earliest string) error {
	return s.SettleScheduleIndexes(ctx, []IndexSettle{{Queue: queue, Version: version, Earliest: earliest}})
}

// SettleScheduleIndexes settles the queues of a firing round in one call.
func (s *Store) SettleScheduleIndexes(ctx context.Context, settles []IndexSettle) error {
	if len(settles) == 0 {
		return nil
	}
	args := make([]any, 0, 1+3*len(settles))
	args = append(args, "settle")
	for _, st := range settles {
		args = append(args, st.Queue, st.Version, st.Earliest)
	}
	_, err := s.index(ctx, args...)
	return err
}

// DueSchedule is a cron schedule whose next tick is due, for the caller to
// compute the tick to fire (TickSchedules).
type DueSchedule struct {
	ID   string
	Next time.Time
	// Spec is the cron and time zone of its definition (Schedule.Spec).
	Spec string
}

// Ticked is what TickSchedules did with one batch of a queue's due
// schedules.
type Ticked struct {
	// Now is Redis' time of the call, when the jobs were published.
	Now time.Time
	// Fired are the @every ticks it fired (Word FIRED or DUP).
	Fired []Fired
	// Cron are the due cron schedules, for FireSchedules.
	Cron []DueSchedule
	// Taken is how many due schedules it read: max means there may be more.
	Taken int
	// Earliest is the queue's earliest tick afterwards ("" for none).
	Earliest string
}

// TickSchedules takes up to max schedules of q whose next tick is due by
// Redis' clock, in one atomic call: each @every one publishes the job of
// its latest due tick (missed ticks caught up as one) and moves on to the
// tick after it, with no work per tick in Go; the cron ones are returned
// for the caller to compute their tick and fire them (FireSchedules).
func (s *Store) TickSchedules(ctx context.Context, q QueueParams, max int) (Ticked, error) {
	a, err := s.schedule(ctx, q, s.tickArgs(q, max)...)
	if err != nil {
		return Ticked{}, err
	}
	return parseTicked(a)
}

// TickQueues is TickSchedules for several queues in one round trip (a
// pipeline; on a cluster, one per node): Redis runs the calls back to back,
// whatever the daemon is doing meanwhile. Each queue's call is atomic on
// its own; errs[i] is queue i's error.
func (s *Store) TickQueues(ctx context.Context, qs []QueueParams, max int) (out []Ticked, errs []error) {
	out, errs = make([]Ticked, len(qs)), make([]error, len(qs))
	if len(qs) == 1 {
		out[0], errs[0] = s.TickSchedules(ctx, qs[0], max)
		return out, errs
	}
	began := time.Now()
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(qs))
	for i, q := range qs {
		if errs[i] = s.ensureConf(ctx, q); errs[i] != nil {
			continue // its settings could not be written: no tick for it this time
		}
		args := s.tickArgs(q, max)
		cmds[i] = s.sc.queue(ctx, pipe, lua.Schedule, s.scheduleKeys(q.Name), append(s.params(lua.Schedule, q, len(args)), args...))
	}
	_, _ = pipe.Exec(ctx)
	took := time.Since(began)
	for i, q := range qs {
		if cmds[i] == nil {
			continue
		}
		res, err := cmds[i].Result()
		if missing(err) || isNoConf(err) {
			// Redis lost its script cache or library (a restart) or the
			// queue's settings: this call loads or writes them.
			out[i], errs[i] = s.TickSchedules(ctx, q, max)
			continue
		}
		if s.opts.OnScript != nil {
			s.opts.OnScript(lua.Schedule, took, err)
		}
		if err != nil {
			errs[i] = wrap(fmt.Errorf("script %s on queue %s: %w", lua.Schedule, q.Name, err))
			continue
		}
		out[i], errs[i] = parseTicked(newReply(lua.Schedule, q.Name, res, 0))
	}
	return out, errs
}

// tickArgs are schedule.lua's "tick max job1..jobmax" for q.
func (s *Store) tickArgs(q QueueParams, max int) []any {
	args := make([]any, 0, 2+max)
	args = append(args, "tick", max)
	for range max {
		args = append(args, s.ids.New(q.Name))
	}
	return args
}

func parseTicked(a *reply) (Ticked, error) {
	if a.want(a.len() >= 4, "want at least 4 values"); a.err() != nil {
		return Ticked{}, a.err()
	}
	t := Ticked{Now: fromMS(a.int(0)), Earliest: a.str(1), Taken: int(a.int(2))}
	nf := int(a.int(3))
	i := 4
	t.Fired = make([]Fired, 0, nf)
	for k := 0; k < nf && i+3 < a.len(); k, i = k+1, i+4 {
		t.Fired = append(t.Fired, Fired{Word: a.str(i), ID: a.str(i + 1), JobID: a.str(i + 2), Tick: fromMS(a.int(i + 3))})
	}
	for ; i+2 < a.len(); i += 3 {
		var d scheduleDef
		if err := json.Unmarshal([]byte(a.str(i+2)), &d); err != nil {
			return t, fmt.Errorf("schedule %s: decode definition: %w", a.str(i), err)
		}
		t.Cron = append(t.Cron, DueSchedule{ID: a.str(i), Next: fromMS(a.int(i + 1)),
			Spec: Schedule{Cron: d.Cron, Timezone: d.Timezone}.Spec()})
	}
	return t, a.err()
}

// Fire is one tick to fire: the schedule's next tick as read (Expected),
// the tick fired (the latest due one: ticks missed are caught up as one)
// and the tick after it.
type Fire struct {
	ID       string
	Expected time.Time
	Tick     time.Time
	After    time.Time
}

// Fired is what a Fire, or a tick of TickSchedules, did.
type Fired struct {
	ID string
	// Word: FIRED, DUP (the tick's job already existed), STALE (the next
	// tick had moved on, or the schedule was paused or deleted) or EARLY.
	Word  string
	JobID string
	Tick  time.Time
}

// FireSchedules fires ticks of queue q in one atomic call: each publishes
// one job (its idempotency key "schedule:<id>:<tick ms>", scheduleId set)
// if the schedule's stored next tick is still Expected and Tick is due by
// Redis' clock, then stores After as the next tick. It returns Redis' time
// of the call, what each tick did, and the queue's earliest tick.
func (s *Store) FireSchedules(ctx context.Context, q QueueParams, fires []Fire) (time.Time, []Fired, string, error) {
	args := make([]any, 0, 2+5*len(fires))
	args = append(args, "fire", len(fires))
	for _, f := range fires {
		args = append(args, f.ID, f.Expected.UnixMilli(), f.Tick.UnixMilli(), f.After.UnixMilli(), s.ids.New(q.Name))
	}
	a, err := s.schedule(ctx, q, args...)
	if err != nil {
		return time.Time{}, nil, "", err
	}
	now := fromMS(a.int(0))
	out := make([]Fired, 0, len(fires))
	for i, f := range fires {
		b := 2 + 3*i
		if b+2 >= a.len() {
			break
		}
		out = append(out, Fired{ID: f.ID, Word: a.str(b), JobID: a.str(b + 1), Tick: fromMS(a.int(b + 2))})
	}
	earliest := a.str(1)
	return now, out, earliest, a.err()
}

// ScheduleTickKey is the idempotency key of a schedule's job for tick.
func ScheduleTickKey(id string, tick time.Time) string {
	return "schedule:" + id + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}
