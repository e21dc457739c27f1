package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/simpleq/simpleqd/internal/config"
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

// requireAuth rejects requests without a valid Bearer key with 401. A
// request made with an auth.keys key goes on carrying it, for the reach
// checks (reach.go); a full-access key carries nothing.
func (s *Server) requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		ok, scoped := s.authorized(r)
		if ok {
			if scoped != nil {
				r = withScopedKey(r, scoped)
			}
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "unauthorized")
	})
}

// authorized reports whether r carries one of the configured keys, or no key
// is configured at all, and which auth.keys entry it is (nil for an
// auth.apiKeys key: full access). The presented token is compared with
// every key, always all of them, as SHA-256 digests with
// subtle.ConstantTimeCompare: hashing first makes the comparison independent
// of key lengths, and not stopping at the first match hides which key (and
// how many keys) there are. The matching index is picked with
// subtle.ConstantTimeSelect for the same reason: no branch depends on which
// key matched until every key has been compared.
func (s *Server) authorized(r *http.Request) (bool, *config.Key) {
	kr := s.keyring()
	if len(kr.digests) == 0 {
		return true, nil
	}
	token, hasToken := bearerToken(r.Header.Get("Authorization"))
	presented := sha256.Sum256([]byte(token))
	match, at := 0, 0
	for i := range kr.digests {
		eq := subtle.ConstantTimeCompare(presented[:], kr.digests[i][:])
		match |= eq
		at = subtle.ConstantTimeSelect(eq, i, at)
	}
	if !hasToken || match != 1 {
		return false, nil
	}
	return true, kr.scoped[at]
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
