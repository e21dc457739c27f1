package daemon

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestHTTPServerLimits: the API server bounds every phase of a request, so a
// slow or stuck client cannot hold a connection forever (issue #8). The
// slowloris behaviour itself is tested end to end in
// test/reliability_test.go (TestReliabilitySlowlorisCutOff).
func TestHTTPServerLimits(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(http.NotFoundHandler(), zap.NewNop())
	require.Positive(t, srv.ReadHeaderTimeout)
	require.LessOrEqual(t, srv.ReadHeaderTimeout, 10*time.Second, "headers must arrive quickly")
	require.Positive(t, srv.ReadTimeout)
	require.LessOrEqual(t, srv.ReadTimeout, time.Minute, "a whole request (≤ maxPayloadBytes) must arrive within a minute")
	require.Positive(t, srv.WriteTimeout)
	require.Positive(t, srv.IdleTimeout)
	require.LessOrEqual(t, srv.IdleTimeout, 5*time.Minute)
	require.Positive(t, srv.MaxHeaderBytes)
	require.LessOrEqual(t, srv.MaxHeaderBytes, 1<<20)
	require.NotNil(t, srv.ErrorLog, "connection errors go to the log, not stderr")
}
