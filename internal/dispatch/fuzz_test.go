package dispatch_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

var sigFormat = regexp.MustCompile(`^sha256=[0-9a-f]{64}$`)

// FuzzSignVerify: for any secret and body, Sign is the lowercase-hex
// HMAC-SHA256 that api.md specifies (checked against an independent
// computation), Verify accepts exactly that value and nothing else (a forged
// header, a flipped body byte, another secret). Seeds: testdata/fuzz.
func FuzzSignVerify(f *testing.F) {
	f.Add("whsec_test_secret", []byte(`{"id":"job_123","queue":"emails","payload":{"to":"a@b.com"},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`),
		"sha256=121657c98dd43e360bc676dcaeee0cff0b7cc878de6c6b872021236080e366f9")
	f.Add("", []byte{}, "")
	f.Add("s", []byte("x"), "sha256=")
	f.Add("s\x00", []byte{0xff, 0}, "SHA256=ABC")
	f.Fuzz(func(t *testing.T, secret string, body []byte, forged string) {
		sig := dispatch.Sign(secret, body)
		if !sigFormat.MatchString(sig) {
			t.Fatalf("signature %q is not sha256=<64 lowercase hex>", sig)
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(body)
		if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); sig != want {
			t.Fatalf("Sign = %s, want %s", sig, want)
		}
		if !dispatch.Verify(secret, body, sig) {
			t.Fatal("Verify rejects the correct signature")
		}
		if got, want := dispatch.Verify(secret, body, forged), forged == sig; got != want {
			t.Fatalf("Verify(%q) = %v, want %v", forged, got, want)
		}
		if dispatch.Verify(secret+"x", body, sig) {
			t.Fatal("Verify accepts a signature made with another secret")
		}
		if len(body) > 0 {
			flipped := append([]byte(nil), body...)
			flipped[len(flipped)/2] ^= 0x01
			if dispatch.Verify(secret, flipped, sig) {
				t.Fatal("Verify accepts a signature over a different body")
			}
		}
	})
}

// FuzzEnvelope: for any payload the API can accept (a JSON object), the
// envelope is valid JSON that carries the payload byte for byte (the API
// stores a member's bytes without the whitespace around them).
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte(`{"to":"a@b.com"}`), 1, 0)
	f.Add([]byte(`{"n":123456789012345678901234567890, "z" : [1,{"\u00e9":"\ud83d\ude00"}]}`), 3, 7)
	f.Fuzz(func(t *testing.T, payload []byte, attempt, defers int) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(payload, &obj) != nil {
			return // the API refuses it; never stored, never delivered
		}
		j := store.ClaimedJob{ID: "job_01abcdefghjkmnpqrstvwxyz01_q.x-1", Attempt: attempt, DeferCount: defers,
			CreatedAt: time.Unix(1767225600, 0), Payload: payload}
		env := dispatch.Envelope("q.x-1", 5, j)
		var got struct {
			ID      string          `json:"id"`
			Queue   string          `json:"queue"`
			Payload json.RawMessage `json:"payload"`
			Attempt int             `json:"attempt"`
		}
		if err := json.Unmarshal(env, &got); err != nil {
			t.Fatalf("envelope is not valid JSON: %v\n%s", err, env)
		}
		if got.ID != j.ID || got.Queue != "q.x-1" || got.Attempt != attempt || string(got.Payload) != string(bytes.TrimSpace(payload)) {
			t.Fatalf("envelope lost data: %+v", got)
		}
	})
}
