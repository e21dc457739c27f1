// Command go-standard is a standard-mode simpleqd worker in Go: the webhook
// does the work synchronously, and its HTTP answer is the outcome. When the
// provider it calls is rate-limited, it relays the provider's status and
// Retry-After (webhook.BackpressureFrom), so simpleqd holds the queue and
// redelivers later without spending an attempt.
//
// Configuration (environment):
//
//	SIGNING_SECRET  the queue's signingSecret; several, comma-separated, while rotating
//	ALLOW_UNTIMESTAMPED  1 accepts deliveries signed with x-simpleq-signature only (SimpleQ's
//	                hosted service), giving up replay protection for them
//	LISTEN          address to listen on (default 127.0.0.1:9000); the webhook path is /webhook
//	PROVIDER_URL    the downstream to call; empty starts a built-in fake that 429s its first 3 calls
//	SIMPLEQ_URL      the daemon's API (default http://127.0.0.1:8080); only used at start-up to
//	                 check that the queues delivering here are in standard mode
//	SIMPLEQ_API_KEY  a key from the daemon's auth.apiKeys (empty: none)
//
// Queue config: mode: standard, webhookUrl: http://<LISTEN>/webhook.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/simpleq/simpleqd/client"
	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/examples/internal/fakeprovider"
)

// providerFallback is the wait relayed when the provider sends no usable
// Retry-After (a 529 usually has none): short, since simpleqd probes anyway.
const providerFallback = 10 * time.Second

func main() {
	secrets := strings.Split(os.Getenv("SIGNING_SECRET"), ",")
	listen := envOr("LISTEN", "127.0.0.1:9000")
	providerURL := os.Getenv("PROVIDER_URL")
	if providerURL == "" {
		u, err := fakeprovider.Start(3)
		if err != nil {
			log.Fatalf("fake provider: %v", err)
		}
		providerURL = u
		log.Printf("PROVIDER_URL not set: using a fake provider at %s", u)
	}
	sq, err := client.New(envOr("SIMPLEQ_URL", "http://127.0.0.1:8080"), os.Getenv("SIMPLEQ_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	checkQueues(sq, listen)
	// Leave retries to simpleqd: the provider's 429 must reach the handler
	// so its Retry-After can be relayed (seed: "Let SimpleQ own the backoff").
	provider := &http.Client{Timeout: 10 * time.Second}

	mux := http.NewServeMux()
	// The SDK verifies webhook-signature (Standard Webhooks) with its
	// timestamp, so a captured delivery cannot be replayed after five
	// minutes; x-simpleq-signature alone is accepted only on request.
	verifier := webhook.Verifier{Secrets: secrets, AllowUntimestamped: os.Getenv("ALLOW_UNTIMESTAMPED") == "1"}
	mux.Handle("POST /webhook", verifier.Handler(func(ctx context.Context, job *webhook.Job, _ http.ResponseWriter, _ *http.Request) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, providerURL, bytes.NewReader(job.Payload))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := provider.Do(req)
		if err != nil {
			return fmt.Errorf("calling provider: %w", err) // 500: a real failure, retried with backoff
		}
		defer resp.Body.Close()
		if bp := webhook.BackpressureFrom(resp, providerFallback); bp != nil {
			log.Printf("job %s attempt %d: provider %d, relaying Retry-After %s", job.ID, job.Attempt, resp.StatusCode, bp.RetryAfter)
			return bp // 429/503/529 + Retry-After: the queue waits, no attempt spent
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode >= 300 {
			return fmt.Errorf("provider answered %s: %.200s", resp.Status, body)
		}
		log.Printf("job %s attempt %d: done (%s)", job.ID, job.Attempt, bytes.TrimSpace(body))
		return nil // 200: completed
	}))

	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // finish in-flight deliveries, take no new ones
	}()
	log.Printf("standard-mode worker listening on http://%s/webhook", listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// checkQueues is a start-up diagnostic: it asks the daemon which queues
// deliver to this worker and warns about any in the wrong mode (a
// standard-mode worker on an ack-mode queue would leave every job awaiting an ack).
// It is best effort: a daemon that is not reachable yet is only logged.
func checkQueues(sq *client.Client, listen string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	queues, err := sq.Queues(ctx)
	if err != nil {
		log.Printf("could not list queues (is SIMPLEQ_URL right?): %v", err)
		return
	}
	for _, q := range queues {
		if !strings.Contains(q.WebhookURL, listen+"/webhook") {
			continue
		}
		if q.Mode != client.ModeStandard {
			log.Printf("WARNING: queue %q delivers here in %s mode; this worker is for standard mode", q.Name, q.Mode)
			continue
		}
		log.Printf("serving queue %q (standard mode, concurrency %d)", q.Name, q.Concurrency)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
