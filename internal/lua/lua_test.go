package lua_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/lua"
)

// Every script is embedded, comes with the shared prelude, and opens with its
// header contract (KEYS, ARGV, reply), the convention package store relies on.
func TestEveryScriptHasItsContract(t *testing.T) {
	t.Parallel()
	for _, name := range lua.All {
		src, err := lua.Source(name)
		require.NoError(t, err, name)
		require.Contains(t, src, "-- lib.lua — shared prelude", "%s carries the prelude", name)
		body := src[strings.LastIndex(src, "-- "+name+".lua"):]
		var header strings.Builder // the leading comment block
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		for _, part := range []string{"KEYS:", "ARGV", "Returns"} {
			require.Contains(t, header.String(), part, "%s.lua header names %s", name, part)
		}
	}
	_, err := lua.Source("nope")
	require.Error(t, err)
}
