package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// A lane's virtual time grows by 1,000,000 per start (lanes.lua's stride),
// so after 100 starts its K_LREADY score is 1e8. Redis answers it as
// "100000000"; the embedded store (miniredis) as "1e+8", which gopher-lua's
// tonumber does not read. Claims must go on past it on both (the embedded
// store is what `simpleqd demo` and development mode run on).
func TestLanesRoundScoresParse(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b backend, s *store.Store) {
		ctx := context.Background()
		q := queue("lanes-scores")
		q.Concurrency = 1000
		publishKeyed(t, s, q, "A", 250)
		publishKeyed(t, s, q, "B", 5)
		got := map[string]int{}
		for i := 0; i < 30; i++ {
			c, err := s.Claim(ctx, q, 10)
			require.NoError(t, err, "claim %d", i)
			for k, n := range lanesOf(c.Jobs) {
				got[k] += n
			}
			settleAll(t, s, q, c.Jobs, store.OutcomeOK, 200, 0)
		}
		require.Equal(t, map[string]int{"A": 250, "B": 5}, got)
	})
}
