package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Paging bounds of ListDead. They bound the work one request can ask of Redis
// (one ZSET range, a size check and two HMGETs of at most MaxDeadPage fields).
const (
	DefaultDeadPage = 50
	MaxDeadPage     = 1000
	// MaxDeadPageBytes bounds a page by what it carries, not only by count:
	// records hold whole payloads (up to http.maxPayloadBytes, 1 MiB by
	// default), so 1,000 of them could be a gigabyte read, decoded and
	// encoded for one request, and the console polls the list (review
	// finding 11). A page ends before the job whose stored record and
	// history would take the page past this many bytes; the first job is
	// always included, so paging always moves on.
	MaxDeadPageBytes = 4 << 20
)

// InvalidCursorError is returned by ListDead for a cursor it did not issue
// (or one issued for another queue). It is a client mistake, not a Redis
// problem, so the API answers 400 with a field error on "cursor" instead of
// a 500 or a silently restarted listing.
type InvalidCursorError struct {
	Cursor string
	Reason string
}

func (e *InvalidCursorError) Error() string {
	return "invalid cursor: " + e.Reason
}

// deadCursor is the position after the last job of a page: the death time
// (the dead ZSET's score) and the job id (its member). Both are needed
// because many jobs can die in the same millisecond, and Redis orders equal
// scores by member, so (score, member) is a total order that new deaths (which
// always score later) and removals (replay, purge) cannot reshuffle.
type deadCursor struct {
	score  int64
	member string
}

// encode renders the cursor as an opaque URL-safe token: clients must not
// build or edit cursors, and a query string carries it without escaping.
func (c deadCursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.score, 10) + "." + c.member))
}

// decodeDeadCursor parses a cursor ListDead issued for queue.
func decodeDeadCursor(queue, s string) (deadCursor, error) {
	bad := func(reason string) (deadCursor, error) {
		return deadCursor{}, &InvalidCursorError{Cursor: s, Reason: reason}
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not a cursor returned by this endpoint")
	}
	scoreText, member, ok := strings.Cut(string(raw), ".")
	if !ok {
		return bad("not a cursor returned by this endpoint")
	}
	score, err := strconv.ParseInt(scoreText, 10, 64)
	if err != nil || score < 0 {
		return bad("not a cursor returned by this endpoint")
	}
	if q, ok := QueueOfJob(member); !ok || q != queue {
		return bad("cursor belongs to another queue")
	}
	return deadCursor{score: score, member: member}, nil
}

// ListDeadParams choose one page of ListDead.
type ListDeadParams struct {
	// Limit is the page size: <= 0 is DefaultDeadPage, above MaxDeadPage
	// it is capped.
	Limit int
	// Cursor is "" for the first page, else the cursor a page returned.
	Cursor string
}

// ListDead returns a page of the queue's dead-letter list, newest death first,
// and the cursor of the next page ("" when this page is the last).
//
// limit <= 0 means DefaultDeadPage; above MaxDeadPage it is capped. cursor is
// "" for the first page, else a nextCursor from an earlier call on the same
// queue; anything else is an *InvalidCursorError.
//
// Paging is stable: jobs dying meanwhile score later than any cursor and so
// only appear on a fresh first page; jobs sharing the cursor's millisecond are
// neither skipped nor repeated (the cursor carries the job id, the tie-break
// Redis itself uses). A page may hold fewer than limit jobs while more follow
// (a non-empty cursor): a job replayed or purged between the range read and
// the record read is left out, and a page ends early at MaxDeadPageBytes.
//
// It is a plain read, no script: one MULTI (an atomic snapshot of the range),
// one pipeline of HSTRLENs (the records' and histories' sizes, so that only
// what fits the byte bound is read) and one pipelined pair of HMGETs for the
// records and histories.
func (s *Store) ListDead(ctx context.Context, q QueueParams, p ListDeadParams) ([]*Job, string, error) {
	limit, cursor := p.Limit, p.Cursor
	if limit <= 0 {
		limit = DefaultDeadPage
	}
	if limit > MaxDeadPage {
		limit = MaxDeadPage
	}
	var after *deadCursor
	if cursor != "" {
		c, err := decodeDeadCursor(q.Name, cursor)
		if err != nil {
			return nil, "", err
		}
		after = &c
	}
	keys := s.Keys(q.Name)
	deadKey := keys.Dead

	entries, err := s.deadRange(ctx, deadKey, after, limit+1)
	if err != nil {
		return nil, "", wrap(fmt.Errorf("list dead of queue %s: %w", q.Name, err))
	}
	next := ""
	if len(entries) > limit {
		entries = entries[:limit]
		last := entries[len(entries)-1]
		next = deadCursor{score: int64(last.Score), member: last.Member.(string)}.encode()
	}
	if len(entries) == 0 {
		return []*Job{}, next, nil
	}

	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.Member.(string)
	}
	fit, err := s.deadPageFit(ctx, keys.Jobs, keys.Hist, ids)
	if err != nil {
		return nil, "", wrap(fmt.Errorf("size dead jobs of queue %s: %w", q.Name, err))
	}
	if fit < len(ids) {
		last := entries[fit-1]
		next = deadCursor{score: int64(last.Score), member: last.Member.(string)}.encode()
		ids = ids[:fit]
	}
	pipe := s.rdb.Pipeline()
	recs := pipe.HMGet(ctx, keys.Jobs, ids...)
	hists := pipe.HMGet(ctx, keys.Hist, ids...)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, "", wrap(fmt.Errorf("read dead jobs of queue %s: %w", q.Name, err))
	}
	recVals, histVals := recs.Val(), hists.Val()
	jobs := make([]*Job, 0, len(ids))
	for i, id := range ids {
		rec, ok := recVals[i].(string)
		if !ok {
			continue // purged since the range read
		}
		hist, _ := histVals[i].(string)
		j, err := decodeJob(q, id, []byte(rec), []byte(hist))
		if err != nil {
			return nil, "", err
		}
		if j.Status != StatusDead {
			continue // replayed since the range read
		}
		jobs = append(jobs, j)
	}
	return jobs, next, nil
}

// deadPageFit returns how many of ids, in order, fit in MaxDeadPageBytes of
// stored record and history (HSTRLEN: Redis reports the sizes without
// sending the values), at least one. A job purged meanwhile counts 0 bytes.
func (s *Store) deadPageFit(ctx context.Context, recKey, histKey string, ids []string) (int, error) {
	pipe := s.rdb.Pipeline()
	recs := make([]*redis.IntCmd, len(ids))
	hists := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		recs[i] = pipe.HStrLen(ctx, recKey, id)
		hists[i] = pipe.HStrLen(ctx, histKey, id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var total int64
	for i := range ids {
		total += recs[i].Val() + hists[i].Val()
		if total > MaxDeadPageBytes && i > 0 {
			return i, nil
		}
	}
	return len(ids), nil
}

// deadRange reads up to n dead-set entries, newest first, strictly after the
// cursor in (score desc, member desc) order.
//
// ZREVRANGEBYSCORE cannot start in the middle of a run of equal scores, so
// with a cursor two ranges are read in one MULTI: every entry of the cursor's
// millisecond (filtered to members after the cursor's) and the first n with
// an older score. The tie read is not bounded by n, but by how many jobs died
// in one millisecond; one script call dead-letters at most a bounded batch,
// so that stays small. MULTI makes both reads one snapshot, so nothing can
// move from one range to the other between them.
func (s *Store) deadRange(ctx context.Context, key string, after *deadCursor, n int) ([]redis.Z, error) {
	if after == nil {
		return s.rdb.ZRevRangeWithScores(ctx, key, 0, int64(n-1)).Result()
	}
	score := strconv.FormatInt(after.score, 10)
	pipe := s.rdb.TxPipeline()
	ties := pipe.ZRevRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Max: score, Min: score})
	older := pipe.ZRevRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Max: "(" + score, Min: "-inf", Count: int64(n)})
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]redis.Z, 0, n)
	for _, z := range ties.Val() {
		// Reverse order within a score is descending member order, as Redis
		// compares members: bytewise, like Go's string comparison.
		if m, _ := z.Member.(string); m < after.member {
			out = append(out, z)
			if len(out) == n {
				return out, nil
			}
		}
	}
	for _, z := range older.Val() {
		out = append(out, z)
		if len(out) == n {
			break
		}
	}
	return out, nil
}
