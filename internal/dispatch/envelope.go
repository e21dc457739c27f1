package dispatch

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"

	"github.com/simpleq/simpleqd/internal/store"
	"github.com/simpleq/simpleqd/internal/wiretime"
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
	var sum [sha256.Size]byte
	return string(appendSign(nil, hmac.New(sha256.New, []byte(secret)), &sum, body))
}

// appendSign appends the x-simpleq-signature of body under m, an
// HMAC-SHA256 keyed with the signing secret (fresh, or reset from a pool),
// to dst. sum is scratch space for the MAC, as in appendStandardSig.
func appendSign(dst []byte, m hash.Hash, sum *[sha256.Size]byte, body []byte) []byte {
	m.Write(body)
	dst = append(dst, "sha256="...)
	return hex.AppendEncode(dst, m.Sum(sum[:0]))
}

// Verify reports whether signature (an x-simpleq-signature header value) is
// Sign(secret, body). The comparison is constant-time (hmac.Equal), so a
// webhook written in Go can check deliveries without a timing oracle.
func Verify(secret string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}

// Standard Webhooks (https://www.standardwebhooks.com) headers. Every
// delivery carries them beside x-simpleq-signature, so a receiver can use
// that specification's libraries, verify with any of a queue's rotating
// secrets, and refuse a replayed delivery by its timestamp, none of which
// x-simpleq-signature (one secret, body only) allows.
const (
	StandardIDHeader        = "Webhook-Id"
	StandardTimestampHeader = "Webhook-Timestamp"
	StandardSignatureHeader = "Webhook-Signature"
)

// standardSecretPrefix marks a secret serialized the Standard Webhooks way:
// the HMAC key, base64-encoded, after this prefix.
const standardSecretPrefix = "whsec_"

// StandardKey returns the HMAC-SHA256 key a signing secret stands for in
// webhook-signature. A secret in the specification's form, "whsec_"
// followed by non-empty padded standard base64 (RFC 4648 §4, nothing
// else, not even a line break), stands for the decoded bytes, as the
// specification's libraries read it (they all accept that form; only some
// accept more, so nothing more is decoded). Any other secret, including
// one that starts with "whsec_" but is not valid base64 after it
// ("whsec_test_secret"), is its own UTF-8 bytes, whole. x-simpleq-signature
// always uses the secret's bytes whole, as SimpleQ does; only
// webhook-signature decodes.
func StandardKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, standardSecretPrefix); ok && rest != "" && isStdBase64(rest) {
		if key, err := base64.StdEncoding.DecodeString(rest); err == nil && len(key) > 0 {
			return key
		}
	}
	return []byte(secret)
}

// isStdBase64 reports whether s uses only the standard base64 alphabet and
// padding, so a line break or space, which the decoder would skip, never
// makes a secret "decoded" that a receiver's library reads otherwise.
func isStdBase64(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// StandardID returns a delivery's webhook-id: the job id and the attempt,
// joined by ":". A failed attempt's retry has a new id, so a receiver that
// records ids of work it finished never mistakes a retry for a duplicate;
// a redelivery after a defer is the same attempt and keeps its id. ":" is
// outside the job id's alphabet, so the two parts split unambiguously, and
// it is not the "." the specification warns against in ids.
func StandardID(jobID string, attempt int) string {
	return string(appendStandardID(nil, jobID, attempt))
}

func appendStandardID(dst []byte, jobID string, attempt int) []byte {
	dst = append(dst, jobID...)
	dst = append(dst, ':')
	return strconv.AppendInt(dst, int64(attempt), 10)
}

// SignStandard returns the webhook-signature value for a delivery: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret, in order,
// separated by spaces, each keyed with StandardKey(secret). timestamp is
// the webhook-timestamp, Unix seconds.
func SignStandard(secrets []string, id string, timestamp int64, body []byte) string {
	ts := strconv.AppendInt(nil, timestamp, 10)
	var out []byte
	var sum [sha256.Size]byte
	for i, s := range secrets {
		if i > 0 {
			out = append(out, ' ')
		}
		out = appendStandardSig(out, hmac.New(sha256.New, StandardKey(s)), &sum, []byte(id), ts, body)
	}
	return string(out)
}

var dot = []byte{'.'}

// appendStandardSig appends "v1," and the base64 HMAC of id.ts.body under
// m (keyed, fresh or reset) to dst. sum is scratch space for the MAC (its
// contents are overwritten); a caller that pools it spares an allocation.
func appendStandardSig(dst []byte, m hash.Hash, sum *[sha256.Size]byte, id, ts, body []byte) []byte {
	m.Write(id)
	m.Write(dot)
	m.Write(ts)
	m.Write(dot)
	m.Write(body)
	dst = append(dst, "v1,"...)
	return base64.StdEncoding.AppendEncode(dst, m.Sum(sum[:0]))
}
