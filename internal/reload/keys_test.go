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
