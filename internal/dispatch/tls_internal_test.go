package dispatch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// TestDeliveryOverTLS: an https webhook URL is delivered over TLS through
// the deliverer's own dialer (the connection tracking that lets shutdown
// cut deliveries wraps the TCP connection under TLS). Production uses the
// system's roots; the test trusts its server's certificate instead.
func TestDeliveryOverTLS(t *testing.T) {
	t.Parallel()
	var sawTLS bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawTLS = r.TLS != nil
		w.WriteHeader(200)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := NewDeliverer("t")
	d.client.TLSConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}

	q := config.Queue{Name: "q", WebhookURL: srv.URL + "/hook", SigningSecret: "s",
		QueueSettings: config.QueueSettings{Mode: "standard", MaxAttempts: 1, Timeout: 5 * time.Second}}
	out := d.Deliver(context.Background(), q, store.ClaimedJob{ID: "job_1_q", Attempt: 1, Token: "t", Payload: []byte(`{}`)})
	require.Equal(t, store.OutcomeOK, out.Kind, out.Error)
	require.True(t, sawTLS)

	// An untrusted certificate is a connection error, never a silent success.
	d2 := NewDeliverer("t")
	out = d2.Deliver(context.Background(), q, store.ClaimedJob{ID: "job_1_q", Attempt: 1, Token: "t", Payload: []byte(`{}`)})
	require.Equal(t, store.OutcomeFail, out.Kind)
	require.Contains(t, out.Error, "connection error")
}
