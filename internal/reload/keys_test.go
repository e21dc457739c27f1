package reload

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiffSeesKeysWithAReach: a reload that changes an auth.keys entry's
// key, role or reach is reported as a key change (apiKeysChanged in the
// log), never with the key itself.
func TestDiffSeesKeysWithAReach(t *testing.T) {
	file := func(key, role, glob string) string {
		return queueFile(1, fmt.Sprintf("auth:\n  keys:\n    - {key: %s, role: %s, queues: [%q]}\n", key, role, glob))
	}
	old, err := loadString(t, file("sk_one", "publisher", "a-*"))
	require.NoError(t, err)
	require.True(t, Diff(old, old).Empty())
	for _, next := range []string{file("sk_two", "publisher", "a-*"), file("sk_one", "admin", "a-*"), file("sk_one", "publisher", "b-*")} {
		n, err := loadString(t, next)
		require.NoError(t, err)
		ch := Diff(old, n)
		require.True(t, ch.APIKeys, next)
		require.NotContains(t, fmt.Sprint(ch), "sk_")
	}
}

// TestDiffSeesFlowKeys: a reload that changes a queue's flowKeys settings
// (keys.md §2) says so in queuesChanged, old→new, like every other limit.
func TestDiffSeesFlowKeys(t *testing.T) {
	old, err := loadString(t, queueFile(1, "    flowKeys: {concurrency: 1}\n"))
	require.NoError(t, err)
	next, err := loadString(t, queueFile(1, "    flowKeys: {concurrency: 3, rateLimitMax: 5, rateLimitWindow: 2s, holdScope: queue}\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"emails: flowKeys.concurrency 1→3, flowKeys.rateLimitMax 0→5, flowKeys.rateLimitWindow 1s→2s, flowKeys.holdScope key→queue"},
		Diff(old, next).ChangedLines())
}
