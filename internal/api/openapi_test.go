package api

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/docs"
)

// TestOpenAPIServedWithoutKey: the description is public like /healthz, even
// when keys are configured, and is the committed file byte for byte.
func TestOpenAPIServedWithoutKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // keys configured
	for name, auth := range map[string]*string{"no key": str(""), "wrong key": str("Bearer nope"), "key": nil} {
		w := h.do(t, req{method: http.MethodGet, path: "/v1/openapi.json", auth: auth, contentType: str("")})
		require.Equal(t, http.StatusOK, w.Code, name)
		require.Equal(t, "application/json", w.Header().Get("Content-Type"), name)
		require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"), name)
		require.Equal(t, string(docs.OpenAPI()), w.Body.String(), name)
	}
	// Only the exact path is public.
	w := h.do(t, req{method: http.MethodGet, path: "/v1/openapi.json/x", auth: str("")})
	requireError(t, w, http.StatusUnauthorized, "unauthorized")
}

// TestOpenAPIServedUnderLoad: like the probes, the description is never shed.
func TestOpenAPIServedUnderLoad(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxConcurrentRequests = 1 })
	h.srv.slots <- struct{}{} // every slot taken
	w := h.do(t, req{method: http.MethodGet, path: "/v1/openapi.json"})
	require.Equal(t, http.StatusOK, w.Code)
	w = h.get(t, "/v1/queues")
	requireError(t, w, http.StatusTooManyRequests, "API overloaded: too many concurrent requests, retry later")
}

// loadOpenAPI parses and validates docs/openapi.json with kin-openapi.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	return doc
}

// TestOpenAPIDocumentIsValid: an OpenAPI 3.1 document that kin-openapi
// loads and validates, kept in one layout (two-space indentation, one
// trailing newline) so that hand edits stay reviewable diffs.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.True(t, doc.IsOpenAPI31OrLater())
	b := docs.OpenAPI()
	var compact, indented bytes.Buffer
	require.NoError(t, json.Compact(&compact, b))
	require.NoError(t, json.Indent(&indented, compact.Bytes(), "", "  "))
	indented.WriteByte('\n')
	require.Equal(t, indented.String(), string(b), "docs/openapi.json: reformat with two-space indentation")
	onDisk, err := os.ReadFile("../../docs/openapi.json")
	require.NoError(t, err)
	require.Equal(t, string(onDisk), string(b), "the embedded document is docs/openapi.json")
}

// TestOpenAPIDescribesEveryRoute: the document's operations are exactly the
// routes this package registers (every s.mux.HandleFunc pattern in its
// source), plus the daemon's /metrics. A route added without its
// description, or a description left behind, fails here; the end-to-end
// test (test/openapi_test.go) checks the answers themselves.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	var described []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if path == "/metrics" { // served by package daemon, beside the API
				continue
			}
			described = append(described, method+" "+path)
		}
	}
	sort.Strings(described)
	require.Equal(t, described, registeredRoutes(t))
}

// registeredRoutes returns the patterns of every s.mux.HandleFunc call in
// the package's non-test source, each a "METHOD /path" string literal.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var routes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			if recv, ok := sel.X.(*ast.SelectorExpr); !ok || recv.Sel.Name != "mux" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			require.True(t, ok && lit.Kind == token.STRING, "%s: a route pattern that is not a string literal", fset.Position(call.Pos()))
			pattern, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			method, path, found := strings.Cut(pattern, " ")
			require.True(t, found, "%s: route %q has no method", fset.Position(call.Pos()), pattern)
			routes = append(routes, method+" "+path)
			return true
		})
	}
	require.NotEmpty(t, routes)
	sort.Strings(routes)
	return routes
}
