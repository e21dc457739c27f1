// Command go-flowkeys is a standard-mode simpleqd worker in Go for a queue
// with flow keys (docs/flow-keys.md): each job is published with its
// tenant as flowKey, and the worker calls the provider with that tenant's
// own API key. When the provider rate-limits one tenant, the worker relays
// that 429 and its Retry-After as its own answer. With flowKeys.holdScope
// key, simpleqd then holds that tenant's lane only: the other tenants keep
// delivering, and the held tenant reopens after one successful probe.
//
// Configuration (environment):
//
//	SIGNING_SECRET  the queue's signingSecret; several, comma-separated, while rotating
//	LISTEN          address to listen on (default 127.0.0.1:9000); the webhook path is /webhook
//	PROVIDER_URL    the downstream to call; empty starts a built-in fake that 429s its first 3 calls
//	TENANT_KEYS     each tenant's provider API key: "acme=sk_acme,globex=sk_globex"; a job
//	                whose tenant has none fails (500), a job without a flow key uses DEFAULT_KEY
//	DEFAULT_KEY     the provider key for jobs published without a flowKey (empty: refuse them)
//
// Queue config: mode: standard, webhookUrl: http://<LISTEN>/webhook,
// flowKeys: {holdScope: key} (the default).
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

	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/examples/internal/fakeprovider"
)

// providerFallback is the wait relayed when the provider sends no usable
// Retry-After: short, since simpleqd probes the lane anyway.
const providerFallback = 10 * time.Second

func main() {
	secrets := strings.Split(os.Getenv("SIGNING_SECRET"), ",")
	listen := envOr("LISTEN", "127.0.0.1:9000")
	keys := parseKeys(os.Getenv("TENANT_KEYS"))
	defaultKey := os.Getenv("DEFAULT_KEY")
	providerURL := os.Getenv("PROVIDER_URL")
	if providerURL == "" {
		u, err := fakeprovider.Start(3)
		if err != nil {
			log.Fatalf("fake provider: %v", err)
		}
		providerURL = u
		log.Printf("PROVIDER_URL not set: using a fake provider at %s", u)
	}
	// No retries in the HTTP client: the provider's 429 must reach the
	// handler so its Retry-After can be relayed.
	provider := &http.Client{Timeout: 10 * time.Second}

	verifier := webhook.Verifier{Secrets: secrets}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", verifier.Handler(func(ctx context.Context, job *webhook.Job, _ http.ResponseWriter, r *http.Request) error {
		// The job's flow key travels in this header; the envelope is SimpleQ's.
		tenant := r.Header.Get("X-Simpleq-Flow-Key")
		apiKey, ok := keys[tenant]
		if tenant == "" {
			apiKey, ok = defaultKey, defaultKey != ""
		}
		if !ok {
			return fmt.Errorf("no provider key for tenant %q", tenant) // 500: retried, then dead
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, providerURL, bytes.NewReader(job.Payload))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := provider.Do(req)
		if err != nil {
			return fmt.Errorf("calling provider for %q: %w", tenant, err)
		}
		defer resp.Body.Close()
		if bp := webhook.BackpressureFrom(resp, providerFallback); bp != nil {
			// This tenant's key is rate-limited: answering 429 + Retry-After
			// holds its lane (holdScope key), not the queue.
			log.Printf("job %s (tenant %q): provider %d, relaying Retry-After %s", job.ID, tenant, resp.StatusCode, bp.RetryAfter)
			return bp
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode >= 300 {
			return fmt.Errorf("provider answered %s for %q: %.200s", resp.Status, tenant, body)
		}
		log.Printf("job %s (tenant %q): done", job.ID, tenant)
		return nil
	}))

	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("flow keys worker listening on http://%s/webhook (%d tenant keys)", listen, len(keys))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// parseKeys reads "tenant=key,tenant=key".
func parseKeys(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if t, k, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && t != "" {
			out[t] = k
		}
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
