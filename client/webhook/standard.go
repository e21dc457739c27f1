package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks (https://www.standardwebhooks.com) headers simpleqd
// sends with every delivery beside SignatureHeader. Unlike
// x-simpleq-signature they sign a timestamp, so a captured delivery cannot
// be replayed later, and they carry one signature per active secret, so a
// queue's secret rotates without a receiver refusing anything.
const (
	// IDHeader is "<jobId>:<attempt>": unique per attempt, the same on a
	// redelivery after a defer (the same attempt). Record it only for work
	// you finished if you use it to drop duplicates.
	IDHeader = "Webhook-Id"
	// TimestampHeader is the attempt's time, Unix seconds.
	TimestampHeader = "Webhook-Timestamp"
	// StandardSignatureHeader is one "v1,<base64 HMAC-SHA256 of
	// id.timestamp.body>" per active secret, space-separated.
	StandardSignatureHeader = "Webhook-Signature"
)

// DefaultTolerance is how far a delivery's webhook-timestamp may be from
// the receiver's clock, either way, when a Verifier sets none: the
// Standard Webhooks libraries' five minutes, wide enough for ordinary
// clock skew and slow networks, narrow enough that a captured delivery
// soon stops working.
const DefaultTolerance = 5 * time.Minute

// Errors Verifier.Verify returns (wrapped, for errors.Is). Their texts name
// no secret, so a handler may log them or answer with them.
var (
	// ErrNoSignature: the request carries neither signature header.
	ErrNoSignature = errors.New("webhook: no signature")
	// ErrUntimestamped: only x-simpleq-signature, which carries no
	// timestamp and so cannot be told from a replay; see
	// Verifier.AllowUntimestamped.
	ErrUntimestamped = errors.New("webhook: no webhook-signature (x-simpleq-signature alone cannot be told from a replay)")
	// ErrBadSignature: a signature is malformed or matches none of the
	// secrets (a wrong secret, or a forged or altered request).
	ErrBadSignature = errors.New("webhook: signature does not match")
	// ErrTimestamp: the signature is genuine but webhook-timestamp is
	// outside the tolerance: a replay, or a clock off by that much.
	ErrTimestamp = errors.New("webhook: timestamp outside tolerance")
)

// Verifier checks that a delivery comes from the daemon, under either
// signature scheme, before anything in it is trusted.
//
// When a delivery carries webhook-signature (simpleqd always sends it),
// webhook-id, webhook-timestamp and a v1 entry matching one of Secrets are
// required, and the timestamp must be within Tolerance. That check alone
// decides: it covers the body, the id and the time, and x-simpleq-signature
// is signed with the queue's current secret only, so a receiver still
// holding just the old secret during a rotation could not match it. A
// delivery with x-simpleq-signature only (SimpleQ's hosted service, or a
// proxy that dropped the other headers) is refused unless
// AllowUntimestamped, because anyone who once saw a delivery could send it
// again with that header alone.
type Verifier struct {
	// Secrets are the accepted signing secrets, normally the queue's one;
	// list the new and the old while rotating. Empty ones are ignored.
	// A secret is used as simpleqd uses it: whsec_<base64> is decoded for
	// webhook-signature, anything else is its own bytes.
	Secrets []string
	// Tolerance bounds |now - webhook-timestamp|; 0 means DefaultTolerance.
	Tolerance time.Duration
	// AllowUntimestamped accepts a delivery signed with x-simpleq-signature
	// alone, giving up replay protection for it. Set it only to receive
	// from a sender that cannot sign the Standard Webhooks headers.
	AllowUntimestamped bool
	// Now is the receiver's clock; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Verify returns nil when the delivery (its headers and raw body) is
// authentic and fresh, and otherwise an error wrapping ErrNoSignature,
// ErrUntimestamped, ErrBadSignature or ErrTimestamp. Comparisons are
// constant-time and every secret is tried, so timing reveals neither the
// expected MAC nor which secret matched.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	secrets := nonEmpty(v.Secrets)
	std, simpleq := h.Get(StandardSignatureHeader), h.Get(SignatureHeader)
	switch {
	case std == "" && simpleq == "":
		return ErrNoSignature
	case std == "" && !v.AllowUntimestamped:
		return ErrUntimestamped
	case std == "":
		if !Verify(secrets, body, simpleq) {
			return fmt.Errorf("%w (%s)", ErrBadSignature, SignatureHeader)
		}
		return nil
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	return VerifyStandard(secrets, h.Get(IDHeader), h.Get(TimestampHeader), std, body, v.Tolerance, now)
}

// VerifyStandard checks a Standard Webhooks signature: signature (the
// webhook-signature value) must hold a v1 entry that is the HMAC of
// id.timestamp.body under one of secrets, and timestamp (Unix seconds)
// must be within tolerance of now (0 means DefaultTolerance). The
// signature is checked first, so ErrTimestamp always means a genuine
// delivery that is stale (a replay) or a clock that is off.
func VerifyStandard(secrets []string, id, timestamp, signature string, body []byte, tolerance time.Duration, now time.Time) error {
	if id == "" || timestamp == "" {
		return fmt.Errorf("%w: webhook-id and webhook-timestamp are required with webhook-signature", ErrBadSignature)
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || strconv.FormatInt(ts, 10) != timestamp {
		return fmt.Errorf("%w: webhook-timestamp is not Unix seconds", ErrBadSignature)
	}
	var want [][]byte
	for _, s := range nonEmpty(secrets) {
		want = append(want, standardMAC(standardKey(s), id, timestamp, body))
	}
	ok := false
	for _, entry := range strings.Fields(signature) {
		version, sig, found := strings.Cut(entry, ",")
		if !found || version != "v1" {
			continue // another scheme (v1a): not ours to check
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(got) != sha256.Size {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				ok = true
			}
		}
	}
	if !ok {
		return fmt.Errorf("%w (%s)", ErrBadSignature, StandardSignatureHeader)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: webhook-timestamp is %s from this clock, beyond %s (a replay, or a clock that is off)",
			ErrTimestamp, skew.Round(time.Second), tolerance)
	}
	return nil
}

// SignStandard returns the webhook-signature value simpleqd sends: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret, in order,
// space-separated. It is exported for tests and for proxies that re-sign.
func SignStandard(secrets []string, id string, timestamp time.Time, body []byte) string {
	ts := strconv.FormatInt(timestamp.Unix(), 10)
	entries := make([]string, 0, len(secrets))
	for _, s := range secrets {
		entries = append(entries, "v1,"+base64.StdEncoding.EncodeToString(standardMAC(standardKey(s), id, ts, body)))
	}
	return strings.Join(entries, " ")
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// standardKey is the HMAC key a secret stands for in webhook-signature, by
// the daemon's rule (dispatch.StandardKey, repeated here so this package
// needs nothing but the standard library): "whsec_" followed by padded
// standard base64 and nothing else is the decoded bytes; any other secret
// is its own bytes, whole.
func standardKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok && rest != "" &&
		strings.Trim(rest, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == "" {
		if key, err := base64.StdEncoding.DecodeString(rest); err == nil && len(key) > 0 {
			return key
		}
	}
	return []byte(secret)
}

func nonEmpty(secrets []string) []string {
	keep := make([]string, 0, len(secrets))
	for _, s := range secrets {
		if s != "" {
			keep = append(keep, s)
		}
	}
	return keep
}
