package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	simpleq "github.com/simpleq/simpleqd/client"
)

// fakeDaemon answers a few of simpleqd's endpoints the way the daemon does,
// so the examples run without one, and prints each request it gets.
func fakeDaemon() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/queues/emails/jobs", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("daemon got %s %s %s\n", r.Method, r.URL.Path, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3","status":"pending","createdAt":"2026-01-02T03:04:05.000Z"}`)
	})
	mux.HandleFunc("POST /v1/queues/emails/jobs/batch", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"jobs":[`+
			`{"id":"emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D4","status":"pending","createdAt":"2026-01-02T03:04:05.000Z","duplicate":false},`+
			`{"id":"emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3","status":"completed","createdAt":"2026-01-02T03:00:00.000Z","duplicate":true}]}`)
	})
	mux.HandleFunc("POST /v1/queues/sms/jobs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"formErrors":[],"fieldErrors":{"delay":["Number must be less than or equal to 86400"]}}}`)
	})
	mux.HandleFunc("POST /v1/jobs/{id}/{kind}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("daemon got %s %s %s\n", r.Method, r.URL.Path, body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	return httptest.NewServer(mux)
}

// Publish a job; the client retries on its own with one idempotency key, so
// a retried publish never creates a second job.
func ExampleClient_Publish() {
	daemon := fakeDaemon()
	defer daemon.Close()

	c, err := simpleq.New(daemon.URL, "sk_example")
	if err != nil {
		panic(err)
	}
	res, err := c.Publish(context.Background(), "emails", map[string]any{"to": "ada@example.com"},
		&simpleq.PublishOptions{IdempotencyKey: "order-1042", Delay: 90 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.ID, res.Status, res.Created, res.CreatedAt.Format(time.RFC3339))
	// Output:
	// daemon got POST /v1/queues/emails/jobs {"payload":{"to":"ada@example.com"},"idempotencyKey":"order-1042","delay":90}
	// emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3 pending true 2026-01-02T03:04:05Z
}

// Publish several jobs in one request; a job whose idempotency key is known
// already comes back as the existing job.
func ExampleClient_PublishBatch() {
	daemon := fakeDaemon()
	defer daemon.Close()

	c, err := simpleq.New(daemon.URL, "sk_example")
	if err != nil {
		panic(err)
	}
	res, err := c.PublishBatch(context.Background(), "emails", []simpleq.BatchJob{
		{Payload: map[string]any{"to": "grace@example.com"}, IdempotencyKey: "order-1043"},
		{Payload: map[string]any{"to": "ada@example.com"}, IdempotencyKey: "order-1042"},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Println(r.IdempotencyKey, r.ID, r.Status, r.Created)
	}
	// Output:
	// order-1043 emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D4 pending true
	// order-1042 emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3 completed false
}

// A refused publish is a typed error naming the field at fault.
func ExampleValidationError() {
	daemon := fakeDaemon()
	defer daemon.Close()

	c, err := simpleq.New(daemon.URL, "sk_example")
	if err != nil {
		panic(err)
	}
	_, err = c.Publish(context.Background(), "sms", map[string]any{"to": "+15550100"},
		&simpleq.PublishOptions{Delay: 48 * time.Hour})
	var ve *simpleq.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.FieldErrors["delay"])
	}
	// Output:
	// [Number must be less than or equal to 86400]
}

// A worker of an ack-mode queue reports the outcome of its work: Ack on
// success, Nack on failure, Defer when a provider asked it to wait.
func ExampleClient_Ack() {
	daemon := fakeDaemon()
	defer daemon.Close()

	c, err := simpleq.New(daemon.URL, "sk_example")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	id := "emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3"
	if err := c.Ack(ctx, id, &simpleq.AckOptions{Attempt: 1}); err != nil {
		panic(err)
	}
	if err := c.Defer(ctx, id, simpleq.DeferOptions{RetryAfter: 1500 * time.Millisecond, Reason: "provider rate limit"}); err != nil {
		panic(err)
	}
	// Output:
	// daemon got POST /v1/jobs/emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3/ack {"attempt":1}
	// daemon got POST /v1/jobs/emails_01JQ8ZK3V5W6X7Y8Z9A0B1C2D3/defer {"reason":"provider rate limit","retryAfter":1.5}
}
