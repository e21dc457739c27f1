package store_test

import (
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// Job ids are "job_" + a lowercase ULID + "_" + the queue, strictly
// increasing within a process (many share a millisecond here), and carry
// their queue back out.
func TestJobIDs(t *testing.T) {
	t.Parallel()
	var g store.IDGen
	prev := ""
	for range 10000 {
		id := g.New("or.ders-1")
		require.Greater(t, id, prev, "ids keep the order they were minted in")
		prev = id
		body, ok := strings.CutPrefix(id, "job_")
		require.True(t, ok, id)
		require.Equal(t, strings.ToLower(body[:26]), body[:26], "lowercase")
		_, err := ulid.ParseStrict(body[:26])
		require.NoError(t, err, id)
		q, ok := store.QueueOfJob(id)
		require.True(t, ok, id)
		require.Equal(t, "or.ders-1", q)
	}
	_, ok := store.QueueOfJob("job_" + strings.Repeat("u", 26) + "_q") // u is not Crockford
	require.False(t, ok)
}
