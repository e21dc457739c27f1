package store_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// deadQueue dead-letters a job at its first failure, so one settle call kills
// a whole batch in the same millisecond of Redis' clock.
func deadQueue(name string) store.QueueParams {
	q := queue(name)
	q.MaxAttempts = 1
	q.Concurrency = 1000
	return q
}

// killBatch publishes n jobs and fails them all in one settle call: n deaths
// sharing one score of the dead set. It returns their ids.
func killBatch(t *testing.T, s *store.Store, q store.QueueParams, n int) []string {
	t.Helper()
	payloads := make([]json.RawMessage, n)
	for i := range payloads {
		payloads[i] = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
	}
	return killPayloads(t, s, q, payloads)
}

// killPayloads is killBatch with the jobs' payloads given.
func killPayloads(t *testing.T, s *store.Store, q store.QueueParams, payloads []json.RawMessage) []string {
	t.Helper()
	ctx := context.Background()
	n := len(payloads)
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{Payload: payloads[i]}
	}
	_, err := s.Publish(ctx, q, jobs)
	require.NoError(t, err)
	c, err := s.Claim(ctx, q, n)
	require.NoError(t, err)
	require.Len(t, c.Jobs, n)
	outs := make([]store.Outcome, n)
	ids := make([]string, n)
	for i, j := range c.Jobs {
		outs[i] = store.Outcome{ID: j.ID, Token: j.Token, Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"}
		ids[i] = j.ID
	}
	res, err := s.Settle(ctx, q, outs)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, store.Dead, r.Word)
	}
	return ids
}

// deadOrder is the dead set as Redis orders it, newest first: the order
// ListDead must reproduce page by page.
func deadOrder(t *testing.T, rdb redis.UniversalClient, s *store.Store, q store.QueueParams) []string {
	t.Helper()
	ids, err := rdb.ZRevRange(context.Background(), s.Keys(q.Name).List()[6], 0, -1).Result()
	require.NoError(t, err)
	return ids
}

// pageAll walks every page with the given limit and returns the ids in order.
func pageAll(t *testing.T, s *store.Store, q store.QueueParams, limit int) []string {
	t.Helper()
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10000, "paging does not end")
		jobs, next, err := s.ListDead(context.Background(), q, store.ListDeadParams{Limit: limit, Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(jobs), limit)
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		if next == "" {
			return out
		}
		require.Len(t, jobs, limit, "a page before the last is full when nothing changed")
		cursor = next
	}
}

func jobIDs(jobs []*store.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestListDeadEmpty(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		jobs, next, err := s.ListDead(context.Background(), deadQueue("q"), store.ListDeadParams{Limit: 10, Cursor: ""})
		require.NoError(t, err)
		require.NotNil(t, jobs)
		require.Empty(t, jobs)
		require.Empty(t, next)
	})
}

func TestListDeadPagesThroughTies(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := deadQueue("q")
		// Three batches, each dying in one millisecond: page boundaries fall
		// inside runs of equal scores for most limits below.
		var all []string
		for _, n := range []int{5, 3, 4} {
			all = append(all, killBatch(t, s, q, n)...)
			b.advance(3 * time.Millisecond)
		}
		want := deadOrder(t, b.rdb, s, q)
		require.ElementsMatch(t, all, want)
		scores, err := b.rdb.ZRangeWithScores(ctx, s.Keys(q.Name).List()[6], 0, -1).Result()
		require.NoError(t, err)
		distinct := map[float64]bool{}
		for _, z := range scores {
			distinct[z.Score] = true
		}
		require.Less(t, len(distinct), len(all), "some jobs must share a death millisecond")

		for limit := 1; limit <= len(all)+1; limit++ {
			require.Equal(t, want, pageAll(t, s, q, limit), "limit %d", limit)
		}

		// The records are the full Job view.
		jobs, next, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: 1, Cursor: ""})
		require.NoError(t, err)
		require.NotEmpty(t, next)
		require.Len(t, jobs, 1)
		j := jobs[0]
		require.Equal(t, want[0], j.ID)
		require.Equal(t, "q", j.Queue)
		require.Equal(t, store.StatusDead, j.Status)
		require.Equal(t, "max_attempts_exhausted", *j.DeadReason)
		require.Equal(t, "boom", *j.LastError)
		require.Equal(t, 1, j.Attempts)
		require.Len(t, j.History, 1)
		require.Equal(t, 500, *j.History[0].WebhookStatusCode)
		require.NotNil(t, j.CompletedAt)
		require.Regexp(t, `^\{"n":\d\}$`, string(j.Payload))
	})
}

func TestListDeadStableWhileJobsDieAndReplay(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := deadQueue("q")
		killBatch(t, s, q, 4)
		b.advance(3 * time.Millisecond)
		killBatch(t, s, q, 4)
		b.advance(3 * time.Millisecond)
		want := deadOrder(t, b.rdb, s, q)

		first, next, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: 3, Cursor: ""})
		require.NoError(t, err)
		require.Equal(t, want[:3], jobIDs(first))

		// Jobs dying now score later than the cursor: they belong to a fresh
		// first page, never to the rest of this walk.
		newer := killBatch(t, s, q, 3)
		// Replaying the cursor's own job removes the cursor's member from the
		// set; replaying a later job removes it from the pages still to come.
		n, err := s.Replay(ctx, q, []string{want[2], want[5]})
		require.NoError(t, err)
		require.Equal(t, 2, n)

		var rest []string
		for next != "" {
			var page []*store.Job
			page, next, err = s.ListDead(ctx, q, store.ListDeadParams{Limit: 3, Cursor: next})
			require.NoError(t, err)
			rest = append(rest, jobIDs(page)...)
		}
		expected := append(append([]string{}, want[3:5]...), want[6:]...)
		require.Equal(t, expected, rest)

		// A fresh walk sees the new deaths first and not the replayed jobs.
		fresh := pageAll(t, s, q, 2)
		require.Equal(t, deadOrder(t, b.rdb, s, q), fresh)
		require.ElementsMatch(t, newer, fresh[:3])
		require.NotContains(t, fresh, want[2])
		require.NotContains(t, fresh, want[5])
	})
}

// A job dying in the very millisecond of the cursor (possible only while the
// cursor is that fresh) sorts before the cursor and is not slipped into the
// rest of the walk; the jobs after the cursor are still all returned once.
func TestListDeadTieAtCursorMillisecond(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		if b.name != "miniredis" {
			t.Skip("needs Redis' clock pinned to one millisecond")
		}
		ctx := context.Background()
		q := deadQueue("q")
		killBatch(t, s, q, 6) // no advance: everything dies in one millisecond
		want := deadOrder(t, b.rdb, s, q)
		page, next, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: 2, Cursor: ""})
		require.NoError(t, err)
		require.Equal(t, want[:2], jobIDs(page))
		late := killBatch(t, s, q, 2)
		var rest []string
		for next != "" {
			page, next, err = s.ListDead(ctx, q, store.ListDeadParams{Limit: 2, Cursor: next})
			require.NoError(t, err)
			rest = append(rest, jobIDs(page)...)
		}
		require.Equal(t, want[2:], rest)
		require.NotContains(t, rest, late[0])
		require.NotContains(t, rest, late[1])
	})
}

func TestListDeadLimits(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := deadQueue("q")
		killBatch(t, s, q, store.DefaultDeadPage+1)
		jobs, next, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: 0, Cursor: ""})
		require.NoError(t, err)
		require.Len(t, jobs, store.DefaultDeadPage, "limit 0 means the default page")
		require.NotEmpty(t, next)
		jobs, next, err = s.ListDead(ctx, q, store.ListDeadParams{Limit: store.MaxDeadPage + 5000, Cursor: ""})
		require.NoError(t, err)
		require.Len(t, jobs, store.DefaultDeadPage+1)
		require.Empty(t, next)
	})
}

// TestListDeadBoundedInBytes (review finding 11): records carry whole
// payloads, so a page of limit=1000 could be a gigabyte. A page stops before
// the job that would take it past MaxDeadPageBytes, always holds at least
// one job (one bigger than the bound too), and its cursor goes on to the
// rest: every job is listed once, in order.
func TestListDeadBoundedInBytes(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := deadQueue("q")
		big := func(n int) json.RawMessage {
			return json.RawMessage(`{"x":"` + strings.Repeat("a", n) + `"}`)
		}
		var payloads []json.RawMessage
		for range 6 {
			payloads = append(payloads, big(1<<20))
		}
		killPayloads(t, s, q, payloads)
		huge := killPayloads(t, s, q, []json.RawMessage{big(store.MaxDeadPageBytes + 1)})
		want := deadOrder(t, b.rdb, s, q)
		require.Len(t, want, 7)

		// The newest death, bigger than the bound alone: a page of one.
		jobs, next, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: store.MaxDeadPage, Cursor: ""})
		require.NoError(t, err)
		require.Equal(t, huge, jobIDs(jobs))
		require.NotEmpty(t, next, "more follow")

		var got []string
		got = append(got, jobIDs(jobs)...)
		for pages := 1; next != ""; pages++ {
			require.Less(t, pages, 20, "paging does not end")
			jobs, next, err = s.ListDead(ctx, q, store.ListDeadParams{Limit: store.MaxDeadPage, Cursor: next})
			require.NoError(t, err)
			require.NotEmpty(t, jobs)
			bytes := 0
			for _, j := range jobs {
				bytes += len(j.Payload)
			}
			require.LessOrEqual(t, bytes, store.MaxDeadPageBytes, "a page of %d jobs", len(jobs))
			require.Less(t, len(jobs), 6, "1 MiB payloads: a 4 MiB page holds fewer than all six")
			if next != "" {
				require.Greater(t, bytes+(1<<20), store.MaxDeadPageBytes, "a page ends only when the next job does not fit")
			}
			got = append(got, jobIDs(jobs)...)
		}
		require.Equal(t, want, got, "every job once, newest first")
	})
}

func TestListDeadBadCursor(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := deadQueue("q")
		killBatch(t, s, q, 2)
		_, good, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: 1, Cursor: ""})
		require.NoError(t, err)
		require.NotEmpty(t, good)
		_, _, err = s.ListDead(ctx, q, store.ListDeadParams{Limit: 1, Cursor: good})
		require.NoError(t, err)

		enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		var g store.IDGen
		for _, c := range []string{
			"!!!",
			"abc=",
			enc("no-dot"),
			enc("x.") + "",
			enc("12.not-a-job-id"),
			enc("-5." + g.New("q")),
			enc("99999999999999999999." + g.New("q")),
			enc("12." + g.New("other")), // issued for another queue
		} {
			_, _, err := s.ListDead(ctx, q, store.ListDeadParams{Limit: 1, Cursor: c})
			var ce *store.InvalidCursorError
			require.True(t, errors.As(err, &ce), "cursor %q: %v", c, err)
			require.False(t, errors.Is(err, store.ErrUnavailable))
		}
		// The cursor of another queue is refused even though it is well formed.
		other := deadQueue("other")
		killBatch(t, s, other, 2)
		_, otherNext, err := s.ListDead(ctx, other, store.ListDeadParams{Limit: 1, Cursor: ""})
		require.NoError(t, err)
		_, _, err = s.ListDead(ctx, q, store.ListDeadParams{Limit: 1, Cursor: otherNext})
		var ce *store.InvalidCursorError
		require.ErrorAs(t, err, &ce)
	})
}
