package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/simpleq/simpleqd/client/webhook"
)

// signedDelivery builds the request simpleqd sends for a delivery of body,
// signed with secret.
func signedDelivery(secret, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/emails", strings.NewReader(body))
	id := "emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3:1"
	r.Header.Set(webhook.IDHeader, id)
	now := time.Now()
	r.Header.Set(webhook.TimestampHeader, fmt.Sprint(now.Unix()))
	r.Header.Set(webhook.StandardSignatureHeader, webhook.SignStandard([]string{secret}, id, now, []byte(body)))
	r.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, []byte(body)))
	return r
}

// A webhook endpoint: Handler verifies the delivery before anything in it is
// trusted, decodes the envelope and answers from the handler's error.
func ExampleHandler() {
	const secret = "whsec_ZXhhbXBsZSBzZWNyZXQ="
	h := webhook.Handler([]string{secret}, func(ctx context.Context, job *webhook.Job, w http.ResponseWriter, r *http.Request) error {
		fmt.Printf("job %s attempt %d of %d: %s\n", job.ID, job.Attempt, job.MaxAttempts, job.Payload)
		return nil // 200: done
	})

	body := `{"id":"emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3","queue":"emails","payload":{"to":"ada@example.com"},` +
		`"attempt":1,"maxAttempts":5,"deferCount":0,"createdAt":"2026-01-02T03:04:05.000Z"}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, signedDelivery(secret, body))
	fmt.Println(rec.Code)

	// A delivery signed with another secret never reaches the handler.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, signedDelivery("whsec_c29tZW9uZSBlbHNl", body))
	fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	// Output:
	// job emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3 attempt 1 of 5: {"to":"ada@example.com"}
	// 200
	// 401 webhook: signature does not match (Webhook-Signature)
}

// A handler that hits a provider's rate limit returns a Backpressure: the
// queue waits as long as the provider asked, and the job is not charged an
// attempt.
func ExampleNewBackpressure() {
	rec := httptest.NewRecorder()
	webhook.WriteError(rec, webhook.NewBackpressure(http.StatusTooManyRequests, 2500*time.Millisecond))
	fmt.Println(rec.Code, rec.Header().Get("Retry-After"))
	// Output:
	// 429 2.5
}

// Sign and Verify are the x-simpleq-signature scheme, for proxies that
// re-sign and for tests.
func ExampleVerify() {
	body := []byte(`{"id":"emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3"}`)
	sig := webhook.Sign("whsec_old", body)
	// While rotating, accept the new secret and the old.
	fmt.Println(webhook.Verify([]string{"whsec_new", "whsec_old"}, body, sig))
	fmt.Println(webhook.Verify([]string{"whsec_new"}, body, sig))
	// Output:
	// true
	// false
}
