package store

import (
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestNewFailsWithoutRandomness: when crypto/rand fails, New returns its
// error instead of a Store whose lease tokens all start with the same zero
// node id. Not parallel: it swaps the package's cryptoRead, which every New
// reads; parallel tests resume only after the sequential ones have ended.
func TestNewFailsWithoutRandomness(t *testing.T) {
	broken := errors.New("entropy source unavailable")
	saved := cryptoRead
	t.Cleanup(func() { cryptoRead = saved })
	cryptoRead = func([]byte) (int, error) { return 0, broken }

	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Options{})
	require.ErrorIs(t, err, broken)
	require.ErrorContains(t, err, "random node id")
	require.Nil(t, s)

	cryptoRead = saved
	s, err = New(rdb, Options{})
	require.NoError(t, err)
	require.Len(t, s.node, 12)
	require.NotEqual(t, "000000000000", s.node)
}
