package dispatch_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/dispatch"
)

func TestVerifyKnownAnswer(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`)
	good := "sha256=121657c98dd43e360bc676dcaeee0cff0b7cc878de6c6b872021236080e366f9"
	require.True(t, dispatch.Verify("whsec_test_secret", body, good))
	for _, bad := range []string{"", "sha256=", good[:len(good)-1], good + "0",
		"sha256=121657C98DD43E360BC676DCAEEE0CFF0B7CC878DE6C6B872021236080E366F9",
		"sha256=021657c98dd43e360bc676dcaeee0cff0b7cc878de6c6b872021236080e366f9"} {
		require.False(t, dispatch.Verify("whsec_test_secret", body, bad), bad)
	}
	require.False(t, dispatch.Verify("whsec_other", body, good))
}

// TestVerifyIsConstantTime reads envelope.go: Verify compares with
// hmac.Equal and never with == (which stops at the first differing byte and
// so tells an attacker, through timing, how much of a forged MAC is right).
func TestVerifyIsConstantTime(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "envelope.go", nil, 0)
	require.NoError(t, err)
	found := false
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "Verify" {
			continue
		}
		found = true
		usesEqual := false
		ast.Inspect(fn, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if x.Op == token.EQL || x.Op == token.NEQ {
					t.Errorf("%s: Verify compares with %s", fset.Position(x.Pos()), x.Op)
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "hmac" && x.Sel.Name == "Equal" {
					usesEqual = true
				}
			}
			return true
		})
		require.True(t, usesEqual, "Verify must use hmac.Equal")
	}
	require.True(t, found, "dispatch.Verify not found in envelope.go")
}
