package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/lua"
	"github.com/simpleq/simpleqd/internal/redistest"
)

// TestPublishScriptRunTwice: go-redis retries a command whose reply it lost
// (a dropped connection, a read timeout), so a publish script can run twice
// with the same arguments, and a claim can run in between. The second run
// must report the same job and write nothing: the job stays where the claim
// put it (in flight, not also waiting), the counters stay right.
func TestPublishScriptRunTwice(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s, err := New(srv.Client(t), Options{Prefix: "t", LeaseMargin: time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Load(ctx))
	q := QueueParams{Name: "rerun",
		Mode: "standard", Concurrency: 10, RateLimitWindow: time.Second, MaxAttempts: 3, MaxDefers: 5,
		Timeout: time.Second, AckTimeout: time.Second, AckTimeoutAction: "retry",
		Backoff:     Backoff{Type: "fixed", Base: time.Second, Max: time.Second},
		JobLifetime: time.Hour, Retention: time.Hour,
	}
	for _, key := range []string{"", "idem-1"} {
		id := s.NewID(q.Name)
		args := append(s.params(lua.Publish, q, 7), 1, id, key, 0, 0, "", "", []byte(`{"k":1}`))
		first, err := s.run(ctx, lua.Publish, q, args)
		require.NoError(t, err)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 1)
		require.Equal(t, id, c.Jobs[0].ID)

		again, err := s.run(ctx, lua.Publish, q, args) // the retry
		require.NoError(t, err)
		a, b := first.([]any), again.([]any)
		require.Equal(t, "", a[1], "key %q: stored now", key)
		// NEW|id|createdAt|state: the same job, created at the first run, in flight.
		require.Equal(t, fmt.Sprintf("NEW|%s|%d|f", id, a[0]), b[1],
			"key %q: a retried publish reports the job stored then, not a new one", key)
		pub, err := parsePublished(q, []string{id}, again)
		require.NoError(t, err, "key %q: the store reads NEW as the job stored then", key)
		require.Equal(t, []Published{{ID: id, CreatedAt: fromMS(a[0].(int64)), Status: StatusProcessing}}, pub)

		st, err := s.QueueStatus(ctx, q)
		require.NoError(t, err)
		require.Equal(t, Counts{Processing: 1}, st.Counts, "key %q: one job, in flight only", key)
		none, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Empty(t, none.Jobs, "key %q: the job is not waiting as well", key)
		r, err := s.Settle(ctx, q, []Outcome{{ID: id, Token: c.Jobs[0].Token, Kind: OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, Completed, r[0].Word, "key %q: the delivery's lease survived the retry", key)
	}
}

// readClaimMeta agrees with encoding/json on every meta shape the scripts
// write, and on odd ones (free text that looks like members, escapes).
func TestReadClaimMeta(t *testing.T) {
	t.Parallel()
	for _, meta := range []string{
		`{"c":1764493484123,"s":1764493484123,"x":1764579884123,"st":"p"}`,
		`{"c":1,"s":1,"x":2,"st":"r","a":3,"d":2,"o":1,"k":"x,\"a\":9","e":"\"d\":7}"}`,
		`{"c":5,"s":5,"x":9,"st":"p","k":"\u0022a\u0022:4"}`,
		`{"st":"p","d":1,"c":7,"a":2}`,
		`{"c":1.5e3,"a":1}`,
	} {
		var want claimMeta
		require.NoError(t, json.Unmarshal([]byte(meta), &want), meta)
		got, err := readClaimMeta(meta)
		require.NoError(t, err, meta)
		require.Equal(t, want, got, meta)
	}
	_, err := readClaimMeta(`{"c":"x"`)
	require.Error(t, err)
}
