package dispatch_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

// stdVectorBody is api.md's known-answer body; stdVectorSecret is
// "whsec_" + base64 of the bytes 0..31, a secret in the Standard Webhooks
// form. The expected values were computed independently, with Python's
// hmac and with the standardwebhooks npm library's Webhook.sign.
const (
	stdVectorBody   = `{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`
	stdVectorSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	stdVectorTS     = 1767225600 // 2026-01-01T00:00:00Z
)

func TestSignStandardKnownAnswer(t *testing.T) {
	t.Parallel()
	id := dispatch.StandardID("job_123", 1)
	require.Equal(t, "job_123:1", id)
	require.Equal(t, "v1,dmmR85C6Gx5UbTuL8A2ssn0tqTzFyNnxaZfxPJJkzWA=",
		dispatch.SignStandard([]string{stdVectorSecret}, id, stdVectorTS, []byte(stdVectorBody)))
	// api.md's vector secret is not valid base64 after whsec_, so its
	// bytes are the key, whole.
	require.Equal(t, "v1,s+iY/w2a9oApFu/ArRDKxYsntOvLrWKUdp3LazTnYWA=",
		dispatch.SignStandard([]string{"whsec_test_secret"}, id, stdVectorTS, []byte(stdVectorBody)))
	// Several secrets: one entry each, in order, space-separated.
	require.Equal(t, "v1,dmmR85C6Gx5UbTuL8A2ssn0tqTzFyNnxaZfxPJJkzWA= v1,s+iY/w2a9oApFu/ArRDKxYsntOvLrWKUdp3LazTnYWA=",
		dispatch.SignStandard([]string{stdVectorSecret, "whsec_test_secret"}, id, stdVectorTS, []byte(stdVectorBody)))
}

// TestStandardKey pins which secrets are decoded: only "whsec_" followed by
// padded, standard base64. Everything else is its own bytes.
func TestStandardKey(t *testing.T) {
	t.Parallel()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	require.Equal(t, key, dispatch.StandardKey(stdVectorSecret))
	require.Equal(t, []byte{0xb5, 0xeb, 0x2d}, dispatch.StandardKey("whsec_test"), "whsec_ + valid base64 decodes")
	require.Equal(t, []byte("test"), dispatch.StandardKey("whsec_dGVzdB=="), "non-zero padding bits decode, as the libraries do")
	for _, raw := range []string{
		"whsec_test_secret", // '_' is not standard base64
		"whsec_",            // nothing after the prefix
		"whsec_abc",         // unpadded length
		"whsec_dGVzdA",      // padding missing
		"whsec_dGVzdA==\n",  // a line break the decoder would skip
		"whsec_dGV zdA==",   // a space
		"whsec_-_-_",        // URL-safe alphabet
		"dGVzdA==",          // base64 without the prefix: raw, as SimpleQ's
		"s3cret",
	} {
		require.Equal(t, []byte(raw), dispatch.StandardKey(raw), "%q is used as raw bytes", raw)
	}
}

// TestDeliveryCarriesStandardHeaders: a delivery signs x-simpleq-signature
// with the first secret only, and webhook-signature with every secret,
// over webhook-id (job id and attempt) and webhook-timestamp (now).
func TestDeliveryCarriesStandardHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(hook.Close)
	d := dispatch.NewDeliverer("simpleqd/test")
	j := testJob()
	j.Attempt = 2
	body := dispatch.Envelope("q", 3, j)

	for _, secrets := range [][]string{{stdVectorSecret, "old-raw-secret"}, {stdVectorSecret}} {
		q := testQueue(hook.URL)
		q.SigningSecret, q.SigningSecrets = secrets[0], secrets
		before := time.Now().Unix()
		require.Equal(t, store.OutcomeOK, d.Deliver(context.Background(), q, j).Kind)
		h := <-got
		after := time.Now().Unix()

		require.Equal(t, dispatch.Sign(stdVectorSecret, body), h.Get("X-Simpleq-Signature"), "the first secret signs x-simpleq-signature")
		require.Equal(t, j.ID+":2", h.Get("Webhook-Id"))
		ts, err := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64)
		require.NoError(t, err)
		require.True(t, ts >= before && ts <= after, "webhook-timestamp %d is the attempt's time", ts)
		require.Equal(t, dispatch.SignStandard(secrets, j.ID+":2", ts, body), h.Get("Webhook-Signature"))
		require.Len(t, strings.Fields(h.Get("Webhook-Signature")), len(secrets), "one v1 entry per active secret")
		// The Go SDK's verifier (its own copy of the key rule) accepts the
		// delivery with any one of the secrets.
		for _, s := range secrets {
			require.NoError(t, (&webhook.Verifier{Secrets: []string{s}}).Verify(h, body), "verified with %q alone", s)
		}
	}

	// A Queue built in code with only SigningSecret signs both headers with it.
	q := testQueue(hook.URL)
	require.Equal(t, store.OutcomeOK, d.Deliver(context.Background(), q, j).Kind)
	h := <-got
	ts, err := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64)
	require.NoError(t, err)
	require.Equal(t, dispatch.Sign("s", body), h.Get("X-Simpleq-Signature"))
	require.Equal(t, dispatch.SignStandard([]string{"s"}, j.ID+":2", ts, body), h.Get("Webhook-Signature"))
}

// TestStandardKeyAgreesWithSDK: the daemon and the Go SDK read every
// secret form alike (client/webhook keeps its own copy of the rule so it
// depends on the standard library only).
func TestStandardKeyAgreesWithSDK(t *testing.T) {
	t.Parallel()
	body := []byte(stdVectorBody)
	for _, s := range []string{stdVectorSecret, "whsec_test", "whsec_dGVzdB==", "whsec_test_secret", "whsec_",
		"whsec_abc", "whsec_dGVzdA", "whsec_dGVzdA==\n", "whsec_dGV zdA==", "whsec_-_-_", "dGVzdA==", "s3cret"} {
		sig := dispatch.SignStandard([]string{s}, "job_1_q:1", stdVectorTS, body)
		require.Equal(t, webhook.SignStandard([]string{s}, "job_1_q:1", time.Unix(stdVectorTS, 0), body), sig, "%q", s)
	}
}
