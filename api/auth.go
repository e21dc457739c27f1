package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// publicPaths need no API key: probes, metrics scrapers and readers of the
// API's description (openapi.go) carry no secrets.
// Every other path, including unknown ones, requires a key when keys are
// configured (deny by default, so a route added later cannot be left open).
var publicPaths = map[string]bool{
	"/healthz":  true,
	"/readyz":   true,
	"/metrics":  true,
	openAPIPath: true,
}

// requireAuth rejects requests without a valid Bearer key with 401.
func (s *Server) requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] || s.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "unauthorized")
	})
}

// authorized reports whether r carries one of the configured keys, or no key
// is configured at all. The presented token is compared with every key, always
// all of them, as SHA-256 digests with subtle.ConstantTimeCompare: hashing
// first makes the comparison independent of key lengths, and not stopping at
// the first match hides which key (and how many keys) there are.
func (s *Server) authorized(r *http.Request) bool {
	var keys []string
	if s.apiKeys != nil {
		keys = s.apiKeys()
	}
	token, hasToken := bearerToken(r.Header.Get("Authorization"))
	presented := sha256.Sum256([]byte(token))
	configured := false
	match := 0
	for _, key := range keys {
		if key == "" {
			continue // an empty key would let an empty token in; never a valid key
		}
		configured = true
		want := sha256.Sum256([]byte(key))
		match |= subtle.ConstantTimeCompare(presented[:], want[:])
	}
	if !configured {
		return true
	}
	return hasToken && match == 1
}

// bearerToken extracts the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
