package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
	"github.com/simpleq/simpleqd/internal/store"
)

// listAll pages through a status list with limit per page and returns the
// ids in order, failing after too many pages.
func listAll(t *testing.T, s *store.Store, q store.QueueParams, st store.Status, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; pages < 100; pages++ {
		jobs, next, err := s.ListJobs(context.Background(), q, store.ListJobsParams{Status: st, Limit: limit, Cursor: cursor})
		require.NoError(t, err)
		require.LessOrEqual(t, len(jobs), limit)
		for _, j := range jobs {
			require.Equal(t, st, j.Status, "job %s listed as %s", j.ID, st)
			ids = append(ids, j.ID)
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
	t.Fatalf("more than 100 pages of %s", st)
	return nil
}

// TestListJobsByStatus: every status lists exactly its jobs, in the
// documented order, whatever the page size.
func TestListJobsByStatus(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lists")
		q.MaxAttempts = 1
		var ids []string
		for i := 0; i < 9; i++ {
			ids = append(ids, publish(t, s, q, fmt.Sprintf(`{"n":%d}`, i)))
			b.advance(2 * time.Millisecond) // distinct due times: FIFO is by due time
		}
		// Claim 6: complete 2, fail 1 (dead: one attempt), defer none, keep 3 in flight.
		c, err := s.Claim(ctx, q, 6)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 6)
		out := []store.Outcome{
			{ID: c.Jobs[0].ID, Token: c.Jobs[0].Token, Kind: store.OutcomeOK, StatusCode: 200},
			{ID: c.Jobs[1].ID, Token: c.Jobs[1].Token, Kind: store.OutcomeOK, StatusCode: 200},
			{ID: c.Jobs[2].ID, Token: c.Jobs[2].Token, Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"},
		}
		_, err = s.Settle(ctx, q, out)
		require.NoError(t, err)

		for _, limit := range []int{1, 2, 100} {
			require.Equal(t, ids[6:], listAll(t, s, q, store.StatusPending, limit), "pending in delivery order, limit %d", limit)
			require.ElementsMatch(t, ids[3:6], listAll(t, s, q, store.StatusProcessing, limit))
			require.Empty(t, listAll(t, s, q, store.StatusAwaitingAck, limit))
			require.ElementsMatch(t, ids[0:2], listAll(t, s, q, store.StatusCompleted, limit))
			require.Equal(t, []string{ids[2]}, listAll(t, s, q, store.StatusDead, limit))
		}

		// A failed delivery with attempts left waits again: processing,
		// listed after the ones in flight.
		q2 := queue("lists2")
		a := publish(t, s, q2, `{}`)
		bID := publish(t, s, q2, `{}`)
		c, err = s.Claim(ctx, q2, 2)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		_, err = s.Settle(ctx, q2, []store.Outcome{{ID: a, Token: c.Jobs[0].Token, Kind: store.OutcomeFail, StatusCode: 500}})
		require.NoError(t, err)
		require.Equal(t, []string{bID, a}, listAll(t, s, q2, store.StatusProcessing, 1))
		require.Empty(t, listAll(t, s, q2, store.StatusPending, 10))
		jobs, _, err := s.ListJobs(ctx, q2, store.ListJobsParams{Status: store.StatusProcessing, Limit: 10, Cursor: ""})
		require.NoError(t, err)
		require.Equal(t, 1, jobs[1].Attempts)
		require.Len(t, jobs[1].History, 1)
	})
}

// TestListJobsCursorSurvivesMoves: a cursor whose job was claimed since
// still continues after it, not from the start, and skips nothing.
func TestListJobsCursorSurvivesMoves(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("moves")
		var ids []string
		for i := 0; i < 6; i++ {
			ids = append(ids, publish(t, s, q, `{}`)) // many share a millisecond: the tie-break is the id
		}
		page, next, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 2, Cursor: ""})
		require.NoError(t, err)
		require.Len(t, page, 2)
		require.NotEmpty(t, next)
		// The first two are claimed: the cursor's job has left the set.
		c, err := s.Claim(ctx, q, 2)
		require.NoError(t, err)
		require.Equal(t, page[0].ID, c.Jobs[0].ID)
		require.Equal(t, page[1].ID, c.Jobs[1].ID)
		rest, next, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 10, Cursor: next})
		require.NoError(t, err)
		require.Empty(t, next)
		got := []string{}
		for _, j := range rest {
			got = append(got, j.ID)
		}
		require.Equal(t, ids[2:], got)
	})
}

// TestListJobsBadCursor: cursors not issued for this queue and status are
// an *InvalidCursorError, never a Redis error.
func TestListJobsBadCursor(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q, other := queue("cq"), queue("other")
		publish(t, s, q, `{}`)
		publish(t, s, q, `{}`)
		publish(t, s, other, `{}`)
		publish(t, s, other, `{}`)
		_, next, err := s.ListJobs(ctx, other, store.ListJobsParams{Status: store.StatusPending, Limit: 1, Cursor: ""})
		require.NoError(t, err)
		_, mine, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 1, Cursor: ""})
		require.NoError(t, err)
		for name, c := range map[string]string{"garbage": "%%%", "not base64 of a cursor": "aGVsbG8", "other queue": next} {
			_, _, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 1, Cursor: c})
			var ce *store.InvalidCursorError
			require.True(t, errors.As(err, &ce), "%s: %v", name, err)
		}
		_, _, err = s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusDead, Limit: 1, Cursor: mine})
		var ce *store.InvalidCursorError
		require.True(t, errors.As(err, &ce), "a pending cursor for the dead list: %v", err)
	})
}

// TestListJobsPageCostIsBounded: a page costs the same Redis commands with
// 1,000 or 200,000 waiting jobs, at the start of the list or deep inside
// it (real redis-server: INFO commandstats counts the script's own calls).
func TestListJobsPageCostIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 200,000 jobs")
	}
	if _, err := execLookPath(); err != nil {
		t.Skip("redis-server not installed")
	}
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s := newStore(t, rdb)
	fill := func(q store.QueueParams, n int) {
		batch := make([]store.NewJob, 1000)
		for i := range batch {
			batch[i] = store.NewJob{Payload: json.RawMessage(`{"to":"someone@example.com","n":12345}`)}
		}
		for done := 0; done < n; done += len(batch) {
			_, err := s.Publish(ctx, q, batch)
			require.NoError(t, err)
		}
	}
	small, big := queue("small"), queue("big")
	fill(small, 1000)
	fill(big, 200000)

	// page measures one page: Redis commands run and wall time.
	page := func(q store.QueueParams, cursor string) (int64, time.Duration, string) {
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		began := time.Now()
		jobs, next, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 100, Cursor: cursor})
		took := time.Since(began)
		require.NoError(t, err)
		require.Len(t, jobs, 100)
		return commandCalls(t, rdb), took, next
	}
	deep := func(q store.QueueParams, pages int) string {
		cursor := ""
		for i := 0; i < pages; i++ {
			_, next, err := s.ListJobs(ctx, q, store.ListJobsParams{Status: store.StatusPending, Limit: 1000, Cursor: cursor})
			require.NoError(t, err)
			cursor = next
		}
		return cursor
	}
	// Best of three: the times are logged, the command counts compared.
	best := func(q store.QueueParams, cursor string) (int64, time.Duration) {
		var calls int64
		var least time.Duration
		for i := 0; i < 3; i++ {
			c, took, _ := page(q, cursor)
			calls = c
			if i == 0 || took < least {
				least = took
			}
		}
		return calls, least
	}
	smallFirst, smallTook := best(small, "")
	bigFirst, bigTook := best(big, "")
	_, _, smallNext := page(small, "")
	smallSecond, smallSecondTook := best(small, smallNext)
	bigDeep, bigDeepTook := best(big, deep(big, 150)) // 150,000 jobs in
	t.Logf("page of 100 pending: 1k backlog %d commands %s, second page %d commands %s; 200k backlog %d commands %s, at 150,000 %d commands %s",
		smallFirst, smallTook, smallSecond, smallSecondTook, bigFirst, bigTook, bigDeep, bigDeepTook)
	require.Equal(t, smallFirst, bigFirst, "a first page costs the same commands at 1k and 200k")
	require.Equal(t, smallSecond, bigDeep, "a page from a cursor costs the same commands at 1k and deep in 200k")
	require.Less(t, bigDeepTook, 20*smallSecondTook+20*time.Millisecond, "a deep page of a 200k backlog is not much slower than one of 1k")
}

// commandCalls sums INFO commandstats calls, less the INFO itself.
func commandCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") || strings.HasPrefix(line, "cmdstat_config") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		total += n
	}
	return total
}
