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
// test/reliability_security_test.go (TestReliabilitySlowlorisCutOff), and
// the limits' answers in package fastserve.
func TestHTTPServerLimits(t *testing.T) {
	t.Parallel()
	l := newHTTPServer(http.NotFoundHandler(), 0, zap.NewNop()).Limits()
	require.Positive(t, l.HeaderTimeout)
	require.LessOrEqual(t, l.HeaderTimeout, 10*time.Second, "headers must arrive quickly")
	require.Positive(t, l.BodyTimeout)
	require.LessOrEqual(t, l.BodyTimeout, time.Minute, "a whole request (≤ maxPayloadBytes) must arrive within a minute")
	require.Positive(t, l.WriteTimeout)
	require.Positive(t, l.IdleTimeout)
	require.LessOrEqual(t, l.IdleTimeout, 5*time.Minute)
	require.GreaterOrEqual(t, l.MaxHeaderBytes, 8<<10, "a browser's cookies and long API keys fit")
	require.LessOrEqual(t, l.MaxHeaderBytes, 64<<10, "each request being read pins this much")
	require.EqualValues(t, 1<<20, l.MaxBodyBytes, "the body bound defaults to http.maxPayloadBytes' default")
}
