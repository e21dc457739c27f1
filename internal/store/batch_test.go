package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// A settle batch with one outcome the script cannot apply fails as a
// whole before writing anything: the failure reported for the other job
// before it (a general-path outcome, written as it is applied) is not
// applied either, and both jobs are still in flight under their leases.
func TestSettleBadOutcomeWritesNothing(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, _ backend, s *store.Store) {
		ctx := context.Background()
		q := queue("batch")
		a, b := publish(t, s, q, `{"n":1}`), publish(t, s, q, `{"n":2}`)
		c, err := s.Claim(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, c.Jobs, 2)
		tok := map[string]string{c.Jobs[0].ID: c.Jobs[0].Token, c.Jobs[1].ID: c.Jobs[1].Token}
		fail := store.Outcome{ID: a, Token: tok[a], Kind: store.OutcomeFail, StatusCode: 500, Error: "boom"}
		bad := store.Outcome{ID: b, Token: tok[b], Kind: store.OutcomeKind("bogus")}
		_, err = s.Settle(ctx, q, []store.Outcome{fail, bad})
		require.Error(t, err)
		for _, id := range []string{a, b} {
			j, err := s.GetJob(ctx, q, id)
			require.NoError(t, err)
			require.Equal(t, store.StatusProcessing, j.Status, "nothing of the batch was written")
			require.Empty(t, j.History, "nothing of the batch was written")
			require.Zero(t, j.Attempts)
		}
		r, err := s.Settle(ctx, q, []store.Outcome{fail, {ID: b, Token: tok[b], Kind: store.OutcomeOK, StatusCode: 200}})
		require.NoError(t, err)
		require.Equal(t, store.Retry, r[0].Word)
		require.Equal(t, store.Completed, r[1].Word)
	})
}
