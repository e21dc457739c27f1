package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

func TestSignatureKnownAnswer(t *testing.T) {
	t.Parallel()
	body := `{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`
	require.Equal(t, "sha256=121657c98dd43e360bc676dcaeee0cff0b7cc878de6c6b872021236080e366f9",
		dispatch.Sign("whsec_test_secret", []byte(body)))
}

func TestEnvelopeByteForByte(t *testing.T) {
	t.Parallel()
	j := store.ClaimedJob{ID: "job_123", Attempt: 1, Payload: []byte(`{"to":"a@b.com"}`),
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.Equal(t,
		`{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`,
		string(dispatch.Envelope("emails", 3, j)))
	j.Payload = []byte(`{"z":1, "a":  123456789012345678901234567890}`)
	require.Contains(t, string(dispatch.Envelope("q", 3, j)), `"payload":{"z":1, "a":  123456789012345678901234567890},`)
}
