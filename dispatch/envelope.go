package dispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"

	"github.com/simpleq/simpleqd/internal/wiretime"
	"github.com/simpleq/simpleqd/store"
)

// Envelope builds the delivery body byte for byte as api.md specifies. The
// payload is spliced in raw — never decoded and re-encoded — so key order and
// number precision survive. Job ids and queue names use only characters that
// need no JSON escaping ([A-Za-z0-9._-]), so they are written as they are.
func Envelope(queue string, maxAttempts int, j store.ClaimedJob) []byte {
	b := make([]byte, 0, 160+len(j.ID)+len(queue)+len(j.Payload))
	b = append(b, `{"id":"`...)
	b = append(b, j.ID...)
	b = append(b, `","queue":"`...)
	b = append(b, queue...)
	b = append(b, `","payload":`...)
	b = append(b, j.Payload...)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"maxAttempts":`...)
	b = strconv.AppendInt(b, int64(maxAttempts), 10)
	b = append(b, `,"deferCount":`...)
	b = strconv.AppendInt(b, int64(j.DeferCount), 10)
	b = append(b, `,"createdAt":"`...)
	b = wiretime.Append(b, j.CreatedAt)
	b = append(b, `"}`...)
	return b
}

// Sign returns the x-simpleq-signature value: "sha256=" + lowercase hex
// HMAC-SHA256 of the raw body, keyed with the queue's signing secret.
func Sign(secret string, body []byte) string {
	return signWith(hmac.New(sha256.New, []byte(secret)), body)
}

// signWith formats the signature of body with m, an HMAC-SHA256 keyed with
// the signing secret (fresh, or reset from a pool).
func signWith(m hash.Hash, body []byte) string {
	m.Write(body)
	var sum [sha256.Size]byte
	var out [len("sha256=") + 2*sha256.Size]byte
	copy(out[:], "sha256=")
	hex.Encode(out[len("sha256="):], m.Sum(sum[:0]))
	return string(out[:])
}

// Verify reports whether signature (an x-simpleq-signature header value) is
// Sign(secret, body). The comparison is constant-time (hmac.Equal), so a
// webhook written in Go can check deliveries without a timing oracle.
func Verify(secret string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}
