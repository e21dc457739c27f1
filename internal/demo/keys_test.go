package demo

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestKeysSummaryLine(t *testing.T) {
	s := KeysSummary{Limited: TenantSummary{Limited: 12, FirstRound: 8, Rounds: 5}, FlowingWhileLimited: 1234}
	require.Equal(t, "flow keys: acme's lane was held 5 times (12 429s: 8 in flight when its limit hit, then one probe per round) "+
		"while globex delivered 1,234 jobs meanwhile; the queue itself was never held.", s.Line())
	s.QueueHeldSeen = true
	require.Contains(t, s.Line(), "the queue itself was held too.")
}

func TestTenantRounds(t *testing.T) {
	o := DefaultKeysOptions()
	p := newTenantProvider(o)
	t0 := p.tenants[LimitedTenant]
	now := time.Now()
	for _, ms := range []int{0, 2, 5, 1600, 3200} {
		t0.limitedAt = append(t0.limitedAt, now.Add(time.Duration(ms)*time.Millisecond))
	}
	t0.limited = len(t0.limitedAt)
	s := p.tenant(LimitedTenant)
	require.Equal(t, 3, s.Rounds)
	require.Equal(t, 3, s.FirstRound)
}

func TestMainRejectsBadPart(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, Main(context.Background(), []string{"--part", "lanes"}, &out, &errb))
	require.Contains(t, errb.String(), "--part must be queue, keys or both")
	require.Equal(t, 2, Main(context.Background(), []string{"--tenant-jobs", "0"}, &out, &errb))
}
