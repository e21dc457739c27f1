package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Security properties of the API (issue #8): every body is size-limited and
// API keys are compared in constant time.

// bodyRoutes finds every route that takes a request body by reading the
// route registrations in this package's source, so a route added later is
// covered without anyone remembering to list it here.
func bodyRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	re := regexp.MustCompile(`"((?:POST|PUT|PATCH|DELETE) /[^"]*)"`)
	var routes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			routes = append(routes, m[1])
		}
	}
	require.GreaterOrEqual(t, len(routes), 8, "publish, batch, ack, nack, defer, replay, pause, resume at least: %v", routes)
	return routes
}

// endlessBody is a request body that never ends, counting what is read.
type endlessBody struct{ read atomic.Int64 }

func (b *endlessBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	b.read.Add(int64(len(p)))
	return len(p), nil
}

func (b *endlessBody) Close() error { return nil }

// TestEveryBodyIsSizeLimited: on every route with a body, a body over
// maxPayloadBytes is refused with 413 {"error":"Payload too large"} whether
// its length is declared or not, without reading more than the limit, and the
// backend is never called.
func TestEveryBodyIsSizeLimited(t *testing.T) {
	t.Parallel()
	const limit = 4096 // newHarness's MaxPayloadBytes
	for _, route := range bodyRoutes(t) {
		method, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(path, "{queue}", "tasks")
		path = strings.ReplaceAll(path, "{id}", newID("tasks"))
		big := `{"payload":{"x":"` + strings.Repeat("a", limit) + `"}}`
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			// Declared length over the limit.
			w := h.do(t, req{method: method, path: path, body: big})
			requireError(t, w, http.StatusRequestEntityTooLarge, "Payload too large")
			// Unknown length (chunked), and a body that never ends.
			body := &endlessBody{}
			r := httptest.NewRequest(method, path, body)
			r.ContentLength = -1
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+testKey)
			w = serve(h, r)
			requireError(t, w, http.StatusRequestEntityTooLarge, "Payload too large")
			require.LessOrEqual(t, body.read.Load(), int64(2*limit), "read far past the limit")
			require.Empty(t, h.backend.publishCalls())
			require.Empty(t, h.backend.callbackCalls())
			require.Empty(t, h.backend.adminCalls())
		})
	}
}

// TestAuthRejectsNearMisses: only an exact key passes; prefixes, extensions,
// case changes and the other scheme spellings of a key do not.
func TestAuthRejectsNearMisses(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, auth := range []string{
		"Bearer " + testKey[:len(testKey)-1], "Bearer " + testKey + "x", "Bearer " + strings.ToUpper(testKey),
		"Bearer x" + testKey, "Basic " + testKey, testKey, "Bearer", "Bearer  ", "",
	} {
		w := h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str(auth)})
		requireError(t, w, http.StatusUnauthorized, "unauthorized")
	}
	require.Equal(t, http.StatusOK, h.do(t, req{method: http.MethodGet, path: "/v1/queues", auth: str("bearer " + testKey)}).Code)
}

// TestAuthComparesInConstantTime reads auth.go: the key check must go through
// subtle.ConstantTimeCompare, and no ==, != or equality helper may compare
// two non-constant values there (a plain string comparison returns at the
// first differing byte and leaks, through timing, how much of a guess was
// right). Comparisons with a literal (key == "", match == 1, nil, the
// scheme name) reveal nothing secret and are allowed.
func TestAuthComparesInConstantTime(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "auth.go", nil, 0)
	require.NoError(t, err)
	usesCT := false
	isLit := func(e ast.Expr) bool {
		if id, ok := e.(*ast.Ident); ok {
			return id.Name == "nil" || id.Name == "true" || id.Name == "false"
		}
		_, ok := e.(*ast.BasicLit)
		return ok
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BinaryExpr:
			if (x.Op == token.EQL || x.Op == token.NEQ) && !isLit(x.X) && !isLit(x.Y) {
				t.Errorf("%s: variable-time comparison %s", fset.Position(x.Pos()), x.Op)
			}
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			if pkg == nil {
				return true
			}
			name := pkg.Name + "." + sel.Sel.Name
			switch name {
			case "subtle.ConstantTimeCompare":
				usesCT = true
			case "strings.EqualFold", "strings.Compare", "bytes.Equal", "bytes.Compare", "strings.HasPrefix", "reflect.DeepEqual":
				lit := false
				for _, a := range x.Args {
					lit = lit || isLit(a)
				}
				if !lit {
					t.Errorf("%s: variable-time comparison %s", fset.Position(x.Pos()), name)
				}
			}
		}
		return true
	})
	require.True(t, usesCT, "auth.go must compare keys with subtle.ConstantTimeCompare")
}
