package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the console is served under. The assets refer to each
// other by relative URLs, so /console (no slash) redirects here.
const Prefix = "/console/"

// securityHeaders go on every console response. The CSP lets the page load
// scripts and styles only from itself and talk only to its own origin (the
// API); inline script is never allowed, so text from a payload cannot run.
// form-action 'none' makes sure the login form can never submit the key in a
// URL, even if the script failed to load.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
}

//go:embed assets
var embedded embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// assets maps a path below Prefix ("index.html", "js/app.js") to its file.
var assets = loadAssets()

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

func loadAssets() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(embedded, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := contentTypes[path.Ext(p)]
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "assets/")] = asset{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		panic("console: reading embedded assets: " + err.Error()) // cannot happen: the files are compiled in
	}
	return out
}

// Handler serves the console's files below Prefix, and redirects the bare
// prefix (/console) to it. It needs no API key: the files hold no data, and
// the page asks for a key before it fetches any. Responses carry a content
// hash as ETag and Cache-Control: no-cache, so a browser revalidates (a cheap
// 304) and never runs a console older than the daemon it talks to.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

// Mount registers Handler on mux for /console and everything below it.
func Mount(mux *http.ServeMux) {
	h := Handler()
	mux.Handle(strings.TrimSuffix(Prefix, "/"), h)
	mux.Handle(Prefix, h)
}

func serve(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		target := Prefix
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	a, ok := assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
