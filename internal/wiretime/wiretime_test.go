package wiretime

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAppendMatchesTimeFormat(t *testing.T) {
	cases := []time.Time{
		{},
		time.Unix(0, 0),
		time.Date(2026, 11, 30, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 1_000_000, time.FixedZone("x", -7*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(999, 3, 4, 5, 6, 7, 89_000_000, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		cases = append(cases, time.Unix(r.Int64N(300_000_000_000)-62_000_000_000, r.Int64N(1e9)).In(time.FixedZone("z", int(r.Int64N(50_000))-25_000)))
	}
	for _, c := range cases {
		want := c.UTC().Format(Layout)
		require.Equal(t, want, Format(c))
		require.Equal(t, "x"+want, string(Append([]byte("x"), c)))
	}
}

func BenchmarkFormat(b *testing.B) {
	t := time.Now()
	for b.Loop() {
		_ = Format(t)
	}
}

func BenchmarkTimeFormat(b *testing.B) {
	t := time.Now()
	for b.Loop() {
		_ = t.UTC().Format(Layout)
	}
}
