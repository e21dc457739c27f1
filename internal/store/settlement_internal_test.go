package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// parseHold reads every item the scripts report, and fails loudly on one
// it does not know.
func TestParseHold(t *testing.T) {
	var s Settled
	require.NoError(t, parseHold(&s, "breaker|2000 hold|start|2000|1000 probe"))
	require.Equal(t, time.UnixMilli(2000).UTC(), s.BreakerUntil)
	require.Equal(t, QueueHold{Change: HoldStarted, Until: time.UnixMilli(2000).UTC(), At: time.UnixMilli(1000).UTC()}, s.Hold)
	require.True(t, s.ProbeEnded)
	s = Settled{}
	require.NoError(t, parseHold(&s, "probe reopen|1500"))
	require.Equal(t, time.UnixMilli(1500).UTC(), s.ReopenedAt)
	require.NoError(t, parseHold(&s, ""))
	for _, bad := range []string{"hold|soon|1|2", "hold|start|x|2", "queue|1", "probe|1", "key|"} {
		require.True(t, errors.Is(parseHold(&Settled{}, bad), ErrUnexpectedWord), bad)
	}
}
