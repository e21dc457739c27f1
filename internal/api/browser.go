package api

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
)

// msgForbidden is the 403 body's message: a request a keyless daemon refuses
// because it did not come from this machine's own pages (see keylessGuard),
// or one outside its key's reach (reach.go). One message for both, and for
// a queue that exists and one that does not.
const msgForbidden = "forbidden"

// The API's defences against web pages (review finding 6). A daemon without
// API keys listens on loopback only (config refuses anything else), but a
// page the operator visits runs on the same machine and can still reach it:
//
//   - CSRF: a cross-site "simple" request (a form, or fetch with text/plain,
//     a form type or no body) needs no CORS preflight. With an empty body
//     once accepted whatever its type, any page could pause, resume, ack or
//     nack. requireJSON closes that: every state-changing request must say
//     content-type: application/json, which a browser sends cross-site only
//     after a preflight that this API never answers with CORS headers.
//     keylessGuard also refuses an Origin that is not this host.
//   - DNS rebinding: a page on attacker.example whose name is re-pointed at
//     127.0.0.1 is "same-origin" to the browser and may read the whole API,
//     but its requests carry Host: attacker.example. keylessGuard accepts
//     only loopback Host values.
//
// With API keys configured the key protects the API (a browser cannot add
// the Authorization header cross-site without a preflight), so Host and
// Origin are not checked: proxies and load balancers send their own names.
// requireJSON applies either way, so the rule is one rule: every POST is
// JSON. SimpleQ's SDKs, ours, the CLI, the console and the examples all send
// content-type: application/json on every call.

// keylessGuard refuses, on a daemon without API keys, requests not addressed
// to a loopback name or sent by another origin's page, with 403. Probes,
// /metrics and the API description (publicPaths) carry no data a page could
// abuse and stay reachable under any name. The keys are read per request, so
// a reload that adds or removes them takes effect at once.
func (s *Server) keylessGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] || s.keysConfigured() {
			next.ServeHTTP(w, r)
			return
		}
		if !loopbackHost(r.Host) || !sameOrigin(r.Header.Get("Origin"), r.Host) {
			s.log.Debug("keyless daemon refused a request from outside this host",
				zap.String("host", r.Host), zap.String("origin", r.Header.Get("Origin")))
			writeError(w, http.StatusForbidden, msgForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON answers 415 to a state-changing request (any method but GET
// and HEAD) whose content type is not JSON, even when its body is empty: a
// bodiless POST …/pause is exactly what a cross-site form or no-cors fetch
// can send without asking. It runs before routing, so it also covers routes
// added later.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if changesState(r.Method) && !isJSONContentType(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, msgNotJSON)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keysConfigured reports whether at least one non-empty API key (of either
// kind) is configured, the same test authorized makes (an empty key is
// never valid).
func (s *Server) keysConfigured() bool {
	return len(s.keyring().digests) > 0
}

// changesState reports whether a request of this method may change state:
// every method but the safe reads. OPTIONS is counted as a change too, since
// no route serves it; it gets the content-type rule and then the mux's 405.
func changesState(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}

// loopbackHost reports whether a Host header names this machine: localhost
// or a *.localhost name (RFC 6761: resolvers and browsers keep them on
// loopback, and no public DNS can serve them), or a loopback IP address
// (127.0.0.0/8, ::1), with any port or none.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether an Origin header is absent or names the host the
// request was sent to (host and port; a scheme's default port may be left
// out on either side). "null" (sandboxed frames, file: pages) and anything
// unparsable are foreign.
func sameOrigin(origin, hostport string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	return stripPort(u.Host, def) == stripPort(hostport, def)
}

// stripPort lowercases hostport and drops its port when it is def.
func stripPort(hostport, def string) string {
	hostport = strings.ToLower(hostport)
	if h, p, err := net.SplitHostPort(hostport); err == nil && p == def {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return hostport
}
