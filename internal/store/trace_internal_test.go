package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadTrace(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for meta, want := range map[string][2]string{
		`{"c":1,"s":1,"x":2,"st":"p"}`:                                       {"", ""},
		`{"c":1,"s":1,"x":2,"st":"p","tp":"` + tp + `"}`:                     {tp, ""},
		`{"c":1,"s":1,"x":2,"st":"r","tp":"` + tp + `","a":1}`:               {tp, ""},
		`{"c":1,"s":1,"x":2,"st":"p","tp":"` + tp + `","ts":"a=b,c=d"}`:      {tp, "a=b,c=d"},
		`{"c":1,"s":1,"x":2,"st":"p","tp":"` + tp + `","ts":"a=\"\\\/"}`:     {tp, `a="\/`},
		`{"c":1,"s":1,"x":2,"st":"p","tp":"` + tp + `","ts":"a=\"","k":"x"}`: {tp, `a="`},
		// An idempotency key or an error that spells a member is escaped text.
		`{"c":1,"s":1,"x":2,"st":"p","k":"\",\"tp\":\"x"}`: {"", ""},
		// Truncated (never written so): nothing rather than garbage.
		`{"c":1,"s":1,"x":2,"st":"p","tp":"00-4b`:                        {"", ""},
		`{"c":1,"s":1,"x":2,"st":"p","tp":"` + tp + `","ts":"a=b`:        {tp, ""},
		`{"c":1,"s":1,"x":2,"st":"p","tp":"` + tp + `","ts":"a=\u00zz"}`: {tp, ""},
	} {
		p, s := readTrace(meta)
		require.Equal(t, want[0], p, meta)
		require.Equal(t, want[1], s, meta)
	}
}

// A job published without a trace costs the claim a search and nothing more.
func TestReadTraceAllocatesNothingWithoutATrace(t *testing.T) {
	meta := `{"c":1764620000000,"s":1764620000000,"x":1764706400000,"st":"p","k":"order-1"}`
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = readTrace(meta) }))
}
