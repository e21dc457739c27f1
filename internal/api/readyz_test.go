package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/store"
)

// /readyz says how the daemon reaches Redis, ready or not (production.md
// §1), and only the mode: it needs no key.
func TestReadyzShowsRedisMode(t *testing.T) {
	t.Parallel()
	mode := func(o *Options) { o.Redis = &RedisMode{Mode: "sentinel", TLS: "mutual", Durability: "replicated"} }
	h := newHarness(t, mode)
	w := h.get(t, "/readyz")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"ok","redis":{"mode":"sentinel","tls":"mutual","durability":"replicated"}}`, w.Body.String())

	h = newHarness(t, mode)
	h.backend.pingErr = fmt.Errorf("ping: %w", store.ErrUnavailable)
	w = h.get(t, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.JSONEq(t, `{"status":"unavailable","error":"not ready","redis":{"mode":"sentinel","tls":"mutual","durability":"replicated"}}`, w.Body.String())
}
