package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Standard Webhooks known answers (the same as dispatch's): api.md's
// body, webhook-id job_123:1 at 2026-01-01T00:00:00Z, under a secret in the
// whsec_<base64> form (the bytes 0..31) and under api.md's secret, which is
// not base64 after its prefix and so is used as raw bytes.
const (
	swSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	swID     = "job_123:1"
	swTS     = 1767225600
	swSig    = "v1,dmmR85C6Gx5UbTuL8A2ssn0tqTzFyNnxaZfxPJJkzWA="
	swRawSig = "v1,s+iY/w2a9oApFu/ArRDKxYsntOvLrWKUdp3LazTnYWA="
)

func TestSignStandardKnownAnswer(t *testing.T) {
	t.Parallel()
	at := time.Unix(swTS, 0)
	require.Equal(t, swSig, SignStandard([]string{swSecret}, swID, at, []byte(kaBody)))
	require.Equal(t, swRawSig, SignStandard([]string{kaSecret}, swID, at, []byte(kaBody)))
	require.Equal(t, swSig+" "+swRawSig, SignStandard([]string{swSecret, kaSecret}, swID, at, []byte(kaBody)))
	require.NoError(t, VerifyStandard([]string{swSecret}, swID, strconv.Itoa(swTS), swSig, []byte(kaBody), 0, at))
}

// delivery is a request's headers as simpleqd signs them at ts.
func delivery(secrets []string, ts time.Time, body string) http.Header {
	h := http.Header{}
	signBoth(h, secrets, "job_01abc_emails:2", ts, []byte(body))
	return h
}

// TestVerifierRotation: a delivery signed with [new, old] verifies with
// either secret alone, and with both; one signed with the old secret only
// (before the daemon learnt the new one) verifies with [new, old].
func TestVerifierRotation(t *testing.T) {
	t.Parallel()
	now := time.Now()
	newS, oldS := "whsec_bmV3LXNlY3JldC1ieXRlcy0wMTIzNDU2Nzg5", "old-raw-secret"
	rotating := delivery([]string{newS, oldS}, now, kaBody)
	for _, accept := range [][]string{{newS}, {oldS}, {newS, oldS}, {oldS, newS}} {
		v := Verifier{Secrets: accept}
		require.NoError(t, v.Verify(rotating, []byte(kaBody)), "accepting %v", accept)
	}
	before := delivery([]string{oldS}, now, kaBody)
	require.NoError(t, (&Verifier{Secrets: []string{newS, oldS}}).Verify(before, []byte(kaBody)))
	require.ErrorIs(t, (&Verifier{Secrets: []string{newS}}).Verify(before, []byte(kaBody)), ErrBadSignature)
	require.ErrorIs(t, (&Verifier{Secrets: []string{"whsec_other"}}).Verify(rotating, []byte(kaBody)), ErrBadSignature)
}

// TestVerifierRefusesReplays: a genuine delivery whose timestamp is beyond
// the tolerance is refused with ErrTimestamp; moving the timestamp forward
// breaks the signature instead.
func TestVerifierRefusesReplays(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) http.Header { return delivery([]string{kaSecret}, now.Add(d), kaBody) }
	v := Verifier{Secrets: []string{kaSecret}, Now: func() time.Time { return now }}
	require.NoError(t, v.Verify(at(-4*time.Minute), []byte(kaBody)))
	require.NoError(t, v.Verify(at(4*time.Minute), []byte(kaBody)), "a receiver's clock may be behind")
	require.NoError(t, v.Verify(at(-DefaultTolerance), []byte(kaBody)), "the tolerance is inclusive")
	err := v.Verify(at(-6*time.Minute), []byte(kaBody))
	require.ErrorIs(t, err, ErrTimestamp)
	require.Contains(t, err.Error(), "6m0s")
	require.ErrorIs(t, v.Verify(at(6*time.Minute), []byte(kaBody)), ErrTimestamp)

	v.Tolerance = 10 * time.Minute
	require.NoError(t, v.Verify(at(-6*time.Minute), []byte(kaBody)), "the tolerance is configurable")
	v.Tolerance = time.Second
	require.ErrorIs(t, v.Verify(at(-2*time.Second), []byte(kaBody)), ErrTimestamp)

	// A replayer who refreshes the timestamp invalidates the signature.
	replay := at(-time.Hour)
	replay.Set(TimestampHeader, strconv.FormatInt(now.Unix(), 10))
	require.ErrorIs(t, v.Verify(replay, []byte(kaBody)), ErrBadSignature)
	// And one who drops the Standard Webhooks headers is refused too.
	replay = at(-time.Hour)
	for _, k := range []string{IDHeader, TimestampHeader, StandardSignatureHeader} {
		replay.Del(k)
	}
	require.ErrorIs(t, v.Verify(replay, []byte(kaBody)), ErrUntimestamped)
}

func TestVerifierRefusesBadDeliveries(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(kaBody)
	v := Verifier{Secrets: []string{kaSecret}}
	good := func() http.Header { return delivery([]string{kaSecret}, now, kaBody) }
	require.NoError(t, v.Verify(good(), body))

	cases := []struct {
		name string
		edit func(http.Header)
		want error
	}{
		{"no headers", func(h http.Header) { h.Del(SignatureHeader); h.Del(StandardSignatureHeader) }, ErrNoSignature},
		{"x-simpleq-signature only", func(h http.Header) { h.Del(StandardSignatureHeader) }, ErrUntimestamped},
		{"other id", func(h http.Header) { h.Set(IDHeader, "job_01abc_emails:3") }, ErrBadSignature},
		{"no id", func(h http.Header) { h.Del(IDHeader) }, ErrBadSignature},
		{"no timestamp", func(h http.Header) { h.Del(TimestampHeader) }, ErrBadSignature},
		{"timestamp not canonical", func(h http.Header) { h.Set(TimestampHeader, "+"+h.Get(TimestampHeader)) }, ErrBadSignature},
		{"timestamp in ms", func(h http.Header) { h.Set(TimestampHeader, h.Get(TimestampHeader)+"000") }, ErrBadSignature},
		{"other version only", func(h http.Header) {
			h.Set(StandardSignatureHeader, strings.Replace(h.Get(StandardSignatureHeader), "v1,", "v1a,", 1))
		}, ErrBadSignature},
		{"truncated MAC", func(h http.Header) {
			s := h.Get(StandardSignatureHeader)
			h.Set(StandardSignatureHeader, s[:len(s)-4])
		}, ErrBadSignature},
	}
	for _, c := range cases {
		h := good()
		c.edit(h)
		require.ErrorIs(t, v.Verify(h, body), c.want, c.name)
	}
	require.ErrorIs(t, v.Verify(good(), []byte(strings.Replace(kaBody, "a@b.com", "a@b.org", 1))), ErrBadSignature, "altered body")

	// webhook-signature alone decides: x-simpleq-signature is the current
	// secret's only, which a receiver holding the old one cannot match.
	h := good()
	h.Set(SignatureHeader, Sign("whsec_other", body))
	require.NoError(t, v.Verify(h, body))

	// Entries of other schemes and garbage are skipped; one good entry is enough.
	h = good()
	h.Set(StandardSignatureHeader, "v1a,AAAA garbage v1,!!! "+h.Get(StandardSignatureHeader)+" v2,x")
	require.NoError(t, v.Verify(h, body))

	// Opting in to un-timestamped deliveries (SimpleQ's hosted service).
	legacy := Verifier{Secrets: []string{kaSecret}, AllowUntimestamped: true}
	h = http.Header{SignatureHeader: {kaSig}}
	require.NoError(t, legacy.Verify(h, body))
	h.Set(SignatureHeader, Sign("whsec_other", body))
	require.ErrorIs(t, legacy.Verify(h, body), ErrBadSignature)
	require.NoError(t, legacy.Verify(good(), body), "the timestamped scheme still applies when present")

	// Empty secrets never verify anything.
	empty := Verifier{Secrets: []string{""}}
	h = http.Header{}
	signBoth(h, []string{""}, "id:1", now, body)
	require.ErrorIs(t, empty.Verify(h, body), ErrBadSignature)
}

// TestStandardKeyForms pins the secret forms, the same list as dispatch's
// TestStandardKey: only whsec_ + padded standard base64 is decoded.
func TestStandardKeyForms(t *testing.T) {
	t.Parallel()
	require.Len(t, standardKey(swSecret), 32)
	require.Equal(t, []byte("test"), standardKey("whsec_dGVzdA=="))
	require.Equal(t, []byte("test"), standardKey("whsec_dGVzdB=="))
	for _, raw := range []string{"whsec_test_secret", "whsec_", "whsec_abc", "whsec_dGVzdA", "whsec_dGVzdA==\n",
		"whsec_dGV zdA==", "whsec_-_-_", "dGVzdA==", "s3cret"} {
		require.Equal(t, []byte(raw), standardKey(raw), "%q is used as raw bytes", raw)
	}
}

// TestHandlerRefusesReplayWithReason: the Handler answers a stale delivery
// 401 and says why, which the daemon records as the attempt's error.
func TestHandlerRefusesReplayWithReason(t *testing.T) {
	t.Parallel()
	called := false
	h := Verifier{Secrets: []string{kaSecret}, Tolerance: time.Minute}.Handler(
		func(context.Context, *Job, http.ResponseWriter, *http.Request) error { called = true; return nil })
	req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(kaBody))
	signBoth(req.Header, []string{kaSecret}, "job_123:1", time.Now().Add(-2*time.Minute), []byte(kaBody))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Contains(t, rec.Body.String(), "timestamp outside tolerance")
	require.NotContains(t, rec.Body.String(), kaSecret)
	require.False(t, called)
}
