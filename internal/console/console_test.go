package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func serveReq(t *testing.T, h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func mounted() http.Handler {
	mux := http.NewServeMux()
	Mount(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "api", http.StatusUnauthorized) })
	return mux
}

func TestIndexAndRedirect(t *testing.T) {
	h := mounted()
	w := serveReq(t, h, http.MethodGet, "/console")
	require.Equal(t, http.StatusMovedPermanently, w.Code)
	require.Equal(t, "/console/", w.Header().Get("Location"))
	w = serveReq(t, h, http.MethodGet, "/console?x=1")
	require.Equal(t, "/console/?x=1", w.Header().Get("Location"))

	w = serveReq(t, h, http.MethodGet, "/console/")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	require.Contains(t, w.Body.String(), `<script type="module" src="js/app.js">`)
	require.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, w.Header().Get("Content-Security-Policy"), "form-action 'none'")
	require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	require.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))
	require.Equal(t, "no-cache", w.Header().Get("Cache-Control"))

	// Neighbours of the prefix are not the console's.
	require.Equal(t, http.StatusUnauthorized, serveReq(t, h, http.MethodGet, "/consoles").Code)
	require.Equal(t, http.StatusUnauthorized, serveReq(t, h, http.MethodGet, "/v1/queues").Code)
}

func TestAssetsAndRevalidation(t *testing.T) {
	h := Handler()
	for path, ct := range map[string]string{
		"/console/js/app.js":   "text/javascript; charset=utf-8",
		"/console/console.css": "text/css; charset=utf-8",
		"/console/index.html":  "text/html; charset=utf-8",
	} {
		w := serveReq(t, h, http.MethodGet, path)
		require.Equal(t, http.StatusOK, w.Code, path)
		require.Equal(t, ct, w.Header().Get("Content-Type"), path)
		etag := w.Header().Get("ETag")
		require.Regexp(t, `^"[0-9a-f]{24}"$`, etag)
		w = serveReq(t, h, http.MethodGet, path, "If-None-Match", etag)
		require.Equal(t, http.StatusNotModified, w.Code, path)
	}
	w := serveReq(t, h, http.MethodHead, "/console/js/app.js")
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Body.String())

	require.Equal(t, http.StatusNotFound, serveReq(t, h, http.MethodGet, "/console/nope.js").Code)
	require.Equal(t, http.StatusNotFound, serveReq(t, h, http.MethodGet, "/console/js/").Code)
	require.Equal(t, http.StatusNotFound, serveReq(t, h, http.MethodGet, "/console/../go.mod").Code)
	w = serveReq(t, h, http.MethodPost, "/console/")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
}

// Every module the page imports is embedded: a missing file would be a blank
// console, found only in a browser.
func TestImportsResolve(t *testing.T) {
	importRe := regexp.MustCompile(`(?m)^import .* from '(\.[^']+)';$`)
	refRe := regexp.MustCompile(`(?:src|href)="([^":#]+)"`)
	var missing []string
	for _, m := range refRe.FindAllStringSubmatch(string(assets["index.html"].body), -1) {
		if _, ok := assets[m[1]]; !ok {
			missing = append(missing, "index.html → "+m[1])
		}
	}
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		dir := name[:strings.LastIndex(name, "/")+1]
		for _, m := range importRe.FindAllStringSubmatch(string(a.body), -1) {
			target := resolve(dir, m[1])
			if _, ok := assets[target]; !ok {
				missing = append(missing, name+" → "+m[1])
			}
		}
	}
	require.Empty(t, missing)
	require.Contains(t, assets, "js/app.js")
}

// Data reaches the page only as text: no script assigns HTML.
func TestNoHTMLInjectionSinks(t *testing.T) {
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, sink := range []string{"innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			require.NotContains(t, string(a.body), sink, name)
		}
	}
}

func resolve(dir, rel string) string {
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if dir == "" {
		parts = nil
	}
	for _, p := range strings.Split(rel, "/") {
		switch p {
		case ".":
		case "..":
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		default:
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "/")
}
