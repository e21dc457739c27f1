// Command go-ack is an ack-mode simpleqd worker in Go: the webhook verifies
// the delivery and answers 200 at once ("received"), then does the work out
// of band and reports the outcome with a callback: ack on success, defer
// with the provider's wait on 429/503/529 (the queue waits, no attempt
// spent), nack otherwise (retryable unless the provider refused the input).
//
// Configuration (environment):
//
//	SIMPLEQ_URL      the daemon's API (default http://127.0.0.1:8080)
//	SIMPLEQ_API_KEY  a key from the daemon's auth.apiKeys (empty: none)
//	SIGNING_SECRET   the queue's signingSecret; several, comma-separated, while rotating
//	ALLOW_UNTIMESTAMPED  1 accepts deliveries signed with x-simpleq-signature only (SimpleQ's
//	                 hosted service), giving up replay protection for them
//	LISTEN           address to listen on (default 127.0.0.1:9000); the webhook path is /webhook
//	PROVIDER_URL     the downstream to call; empty starts a built-in fake that 429s its first 3 calls
//
// Queue config: mode: ack, webhookUrl: http://<LISTEN>/webhook.
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
	"sync"
	"syscall"
	"time"

	"github.com/simpleq/simpleqd/client"
	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/examples/internal/fakeprovider"
)

// providerFallback is the defer used when the provider sends no usable wait.
const providerFallback = 10 * time.Second

// workTimeout bounds one job's work and callbacks; keep it below the
// queue's ackTimeout so a stuck job is reported rather than timed out.
const workTimeout = 60 * time.Second

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
	w := &worker{sq: sq, providerURL: providerURL, provider: &http.Client{Timeout: 30 * time.Second}}

	mux := http.NewServeMux()
	// The SDK verifies webhook-signature (Standard Webhooks) with its
	// timestamp, so a captured delivery cannot be replayed after five
	// minutes; x-simpleq-signature alone is accepted only on request.
	verifier := webhook.Verifier{Secrets: secrets, AllowUntimestamped: os.Getenv("ALLOW_UNTIMESTAMPED") == "1"}
	mux.Handle("POST /webhook", verifier.Handler(func(ctx context.Context, job *webhook.Job, _ http.ResponseWriter, _ *http.Request) error {
		w.inflight.Add(1)
		// The request's context ends with the 200; the work must outlive it.
		go w.process(context.WithoutCancel(ctx), job)
		return nil // 200 now: received, the outcome follows as a callback
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
	log.Printf("ack-mode worker listening on http://%s/webhook", listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	// Report what is in flight before exiting; anything unreported is
	// redelivered after the queue's ackTimeout.
	w.inflight.Wait()
}

type worker struct {
	sq          *client.Client
	providerURL string
	provider    *http.Client
	inflight    sync.WaitGroup
}

// process calls the provider and reports the outcome. Every callback names
// the attempt, so a late report from a delivery that was since redelivered
// is refused instead of overriding the newer one.
func (w *worker) process(ctx context.Context, job *webhook.Job) {
	defer w.inflight.Done()
	ctx, cancel := context.WithTimeout(ctx, workTimeout)
	defer cancel()
	status, header, body, err := w.callProvider(ctx, job.Payload)
	switch {
	case err != nil:
		w.report(job, "nack", w.sq.Nack(ctx, job.ID, client.NackOptions{Reason: err.Error(), Attempt: job.Attempt}))
	case webhook.IsBackpressure(status):
		wait, ok := webhook.RetryAfter(header, body)
		if !ok {
			wait = providerFallback
		}
		log.Printf("job %s attempt %d: provider %d, deferring %s", job.ID, job.Attempt, status, wait)
		w.report(job, "defer", w.sq.Defer(ctx, job.ID, client.DeferOptions{
			RetryAfter: wait, Reason: fmt.Sprintf("provider %d", status), Attempt: job.Attempt}))
	case status >= 400 && status < 500:
		// The provider refused this input: retrying cannot help.
		w.report(job, "nack", w.sq.Nack(ctx, job.ID, client.NackOptions{Retryable: client.Bool(false),
			Reason: fmt.Sprintf("provider %d: %.200s", status, body), Attempt: job.Attempt}))
	case status >= 300:
		w.report(job, "nack", w.sq.Nack(ctx, job.ID, client.NackOptions{
			Reason: fmt.Sprintf("provider %d", status), Attempt: job.Attempt}))
	default:
		w.report(job, "ack", w.sq.Ack(ctx, job.ID, &client.AckOptions{Attempt: job.Attempt}))
	}
}

func (w *worker) callProvider(ctx context.Context, payload []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.providerURL, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.provider.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("calling provider: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading provider answer: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// report logs a callback's result. A ConflictError means the job moved on
// (redelivered, or already settled): nothing to do.
func (w *worker) report(job *webhook.Job, kind string, err error) {
	var conflict *client.ConflictError
	switch {
	case err == nil:
		log.Printf("job %s attempt %d: %s", job.ID, job.Attempt, kind)
	case errors.As(err, &conflict):
		log.Printf("job %s attempt %d: %s refused, the job has moved on: %s", job.ID, job.Attempt, kind, conflict.Message)
	default:
		// The SDK already retried; the daemon redelivers after ackTimeout.
		log.Printf("job %s attempt %d: %s failed: %v", job.ID, job.Attempt, kind, err)
	}
}

// checkQueues is a start-up diagnostic: it asks the daemon which queues
// deliver to this worker and warns about any in the wrong mode (a
// ack-mode worker on a standard-mode queue would complete jobs on the 200, before the work is done).
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
		if q.Mode != client.ModeAck {
			log.Printf("WARNING: queue %q delivers here in %s mode; this worker is for ack mode", q.Name, q.Mode)
			continue
		}
		log.Printf("serving queue %q (ack mode, concurrency %d)", q.Name, q.Concurrency)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
