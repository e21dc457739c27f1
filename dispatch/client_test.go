package dispatch_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/dispatch"
)

// TestHTTPClientPolicy: the delivery client ignores environment proxies (a
// proxy would see every payload and signature) and never follows redirects
// (a 3xx is a failure; following could send a signed payload elsewhere).
// test/reliability_security_test.go checks both against a real daemon.
func TestHTTPClientPolicy(t *testing.T) {
	t.Parallel()
	c := dispatch.NewHTTPClient()
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok)
	require.Nil(t, tr.Proxy, "environment proxies must be ignored")
	require.NotNil(t, c.CheckRedirect)
	require.ErrorIs(t, c.CheckRedirect(nil, nil), http.ErrUseLastResponse)
}
