package lua

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pruneUnused blanks exactly the functions nothing reaches, cascading,
// and keeps every line where it was.
func TestPruneUnused(t *testing.T) {
	t.Parallel()
	src := strings.Join([]string{
		"local function used(x)",              // 0: called by the body
		"  return helper(x)",                  // 1
		"end",                                 // 2
		"local function helper(x)",            // 3: called by used only
		"  return x",                          // 4
		"end",                                 // 5
		"local function dead()",               // 6: nothing calls it
		"  return chain()",                    // 7
		"end",                                 // 8
		"local function chain() return 1 end", // 9: called by dead only: goes too
		"-- a comment naming lonely() keeps nothing", // 10
		"local function lonely() return 2 end",       // 11
		"local function quoted() return 3 end",       // 12: named in a string
		"return used(1) .. 'quoted'",                 // 13
	}, "\n")
	got := strings.Split(pruneUnused(src), "\n")
	require.Len(t, got, 14, "line numbers stay")
	for _, i := range []int{0, 1, 2, 3, 4, 5, 10, 12, 13} {
		require.NotEmpty(t, got[i], "line %d kept", i)
	}
	for _, i := range []int{6, 7, 8, 9, 11} {
		require.Empty(t, got[i], "line %d pruned", i)
	}
}

// Every script's own body and the functions it reaches survive: a script
// that names a prelude function finds it defined.
func TestPrunedScriptsKeepWhatTheyCall(t *testing.T) {
	t.Parallel()
	for _, name := range All {
		src, err := Source(name)
		require.NoError(t, err)
		for _, line := range strings.Split(src, "\n") {
			rest, ok := strings.CutPrefix(line, "local function ")
			if !ok {
				continue
			}
			fn, _, _ := strings.Cut(rest, "(")
			uses := 0
			for _, l := range strings.Split(src, "\n") {
				if !strings.HasPrefix(strings.TrimLeft(l, " \t"), "--") && hasWord(l, fn) {
					uses++
				}
			}
			require.Greater(t, uses, 1, "%s: %s is defined but nothing names it", name, fn)
		}
	}
}

// hasWord reports whether w occurs in l as a whole name.
func hasWord(l, w string) bool {
	for off := 0; ; {
		i := strings.Index(l[off:], w)
		if i < 0 {
			return false
		}
		i += off
		before := i == 0 || !isNameByte(l[i-1])
		after := i+len(w) == len(l) || !isNameByte(l[i+len(w)])
		if before && after {
			return true
		}
		off = i + 1
	}
}
