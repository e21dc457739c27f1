package lint_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/simpleq/simpleqd/internal/lint"
)

func TestImportRules(t *testing.T) {
	t.Parallel()
	analysistest.Run(t, analysistest.TestData(), lint.Analyzers()[0],
		"github.com/simpleq/simpleqd/internal/store", "github.com/simpleq/simpleqd/client")
}

func TestTestSleep(t *testing.T) {
	t.Parallel()
	analysistest.Run(t, analysistest.TestData(), lint.Analyzers()[1], "sleepy")
}

// TestRulesAreChecked: a misspelt or incomplete rule is an error, never a
// rule that silently checks nothing.
func TestRulesAreChecked(t *testing.T) {
	t.Parallel()
	_, err := lint.Load([]byte("imports:\n  - name: x\n    package: [a]\n    deny: [b]\n"))
	require.ErrorContains(t, err, "field package not found")
	_, err = lint.Load([]byte("imports:\n  - name: x\n    deny: [b]\n"))
	require.ErrorContains(t, err, "needs a name, packages and deny")
	_, err = lint.Load([]byte("testsleep:\n  - func: Sleep\n    why: no\n"))
	require.ErrorContains(t, err, "needs pkg.Name")
}
