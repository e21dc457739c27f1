package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

const (
	tpA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tpB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	// A tracestate value may hold quotes, backslashes and slashes (W3C
	// Trace Context allows any printable character but "," and "=").
	tsOdd = `congo=t61rcWkgMzE,odd=a"b\c/d`
)

// A job's trace context travels with it: the claim hands it over, and every
// rewrite of the record (a retry, a defer, a replay, the completion fast
// path) keeps it, while a job published without one carries none.
func TestTraceContextTravelsWithTheJob(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("traced")
		res, err := s.Publish(ctx, q, []store.NewJob{
			{Payload: json.RawMessage(`{"n":1}`), TraceParent: tpA, TraceState: tsOdd},
			{Payload: json.RawMessage(`{"n":2}`)},
			{Payload: json.RawMessage(`{"n":3}`), TraceParent: tpB, IdempotencyKey: "k3"},
		})
		require.NoError(t, err)
		ids := []string{res[0].ID, res[1].ID, res[2].ID}
		rec := func(id string) string {
			v, err := b.rdb.HGet(ctx, s.Keys(q.Name).List()[2], id).Result()
			require.NoError(t, err)
			return v
		}
		// The layout claim.lua relies on is kept; the members follow st.
		require.True(t, strings.HasPrefix(rec(ids[0]), `{"c":`))
		require.Contains(t, rec(ids[0]), `"st":"p","tp":"`+tpA+`","ts":`)
		require.NotContains(t, rec(ids[1]), `"tp"`)
		require.Contains(t, rec(ids[2]), `"st":"p","tp":"`+tpB+`","k":"k3"}`)

		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 3)
		byID := map[string]store.ClaimedJob{}
		for _, j := range c.Jobs {
			byID[j.ID] = j
		}
		require.Equal(t, tpA, byID[ids[0]].TraceParent)
		require.Equal(t, tsOdd, byID[ids[0]].TraceState)
		require.Equal(t, `{"n":1}`, string(byID[ids[0]].Payload))
		require.Empty(t, byID[ids[1]].TraceParent)
		require.Empty(t, byID[ids[1]].TraceState)
		require.Equal(t, tpB, byID[ids[2]].TraceParent)
		require.Empty(t, byID[ids[2]].TraceState)

		// Job 1 fails (encode_meta rewrites it), job 2 and 3 complete
		// (the fast path edits the record as a string).
		r, err := s.Settle(ctx, q, []store.Outcome{
			{ID: ids[0], Token: byID[ids[0]].Token, Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"},
			{ID: ids[1], Token: byID[ids[1]].Token, Kind: store.OutcomeOK, StatusCode: 200},
			{ID: ids[2], Token: byID[ids[2]].Token, Kind: store.OutcomeOK, StatusCode: 200},
		})
		require.NoError(t, err)
		require.Equal(t, store.Retry, r[0].Word)
		require.Equal(t, store.Completed, r[2].Word)
		require.Contains(t, rec(ids[2]), `"tp":"`+tpB+`"`)
		j, err := s.GetJob(ctx, q, ids[2])
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, j.Status)

		b.advance(q.Backoff.Base * 2)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, 2, c.Jobs[0].Attempt)
		require.Equal(t, tpA, c.Jobs[0].TraceParent)
		require.Equal(t, tsOdd, c.Jobs[0].TraceState)

		// A defer, then death by attempts and a replay: still there.
		r, err = s.Settle(ctx, q, []store.Outcome{{ID: ids[0], Token: c.Jobs[0].Token, Kind: store.OutcomeDefer,
			StatusCode: 429, RetryAfter: q.Backoff.Base}})
		require.NoError(t, err)
		require.Equal(t, store.Deferred, r[0].Word)
		for _, word := range []store.SettleWord{store.Retry, store.Dead} {
			b.advance(q.Backoff.Base * 2)
			c, err = s.Claim(ctx, q, 10)
			require.NoError(t, err)
			require.Len(t, c.Jobs, 1)
			require.Equal(t, tpA, c.Jobs[0].TraceParent)
			require.Equal(t, tsOdd, c.Jobs[0].TraceState)
			r, err = s.Settle(ctx, q, []store.Outcome{{ID: ids[0], Token: c.Jobs[0].Token, Kind: store.OutcomeFail, StatusCode: 500}})
			require.NoError(t, err)
			require.Equal(t, word, r[0].Word)
		}
		n, err := s.Replay(ctx, q, []string{ids[0]})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		c, err = s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, 1, c.Jobs[0].Attempt)
		require.Equal(t, tpA, c.Jobs[0].TraceParent)
		require.Equal(t, tsOdd, c.Jobs[0].TraceState)
		j, err = s.GetJob(ctx, q, ids[0])
		require.NoError(t, err)
		require.Len(t, j.History, 4) // fail, defer, fail, fail
	})
}

// Delayed and keyed jobs keep their trace too, and a traceparent of the
// wrong shape (never sent by package api) is kept out of the record.
func TestTraceContextWithDelayAndBadValues(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("traced2")
		res, err := s.Publish(ctx, q, []store.NewJob{
			{Payload: json.RawMessage(`{}`), TraceParent: tpA, Delay: q.Backoff.Base, IdempotencyKey: `a"key`},
			{Payload: json.RawMessage(`{}`), TraceParent: `00-x"}` + "\n" + `{-y-01`},
		})
		require.NoError(t, err)
		recs, err := b.rdb.HMGet(ctx, s.Keys(q.Name).List()[2], res[0].ID, res[1].ID).Result()
		require.NoError(t, err)
		require.Contains(t, recs[0].(string), `,"tp":"`+tpA+`","k":"a\"key"}`)
		require.NotContains(t, recs[1].(string), `"tp"`)
		b.advance(q.Backoff.Base * 2)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		for _, j := range c.Jobs {
			if j.ID == res[0].ID {
				require.Equal(t, tpA, j.TraceParent)
			} else {
				require.Empty(t, j.TraceParent)
			}
		}
	})
}
