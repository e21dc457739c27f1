// Command asynq-bench runs the delivery workload on asynq, so that
// simpleqd's bench (go run ./bench -only compare) can measure asynq and
// simpleqd on the same machine, against the same Redis and the same no-op
// webhook, minutes apart. It is a module of its own: simpleqd does not
// depend on asynq.
//
//	asynq-bench -redis 127.0.0.1:6379 -n 20000 enqueue
//	asynq-bench -redis 127.0.0.1:6379 -webhook http://127.0.0.1:8080/ -concurrency 50 work
//
// enqueue stores n tasks with the given payload size and exits. work runs an
// asynq server whose handler POSTs each task's payload to the webhook with Go's
// net/http client (what an asynq user writes), prints "started" once the
// server runs, and stops on SIGTERM or SIGINT.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	webhook := flag.String("webhook", "", "URL each task is POSTed to (work)")
	n := flag.Int("n", 20000, "tasks to enqueue (enqueue)")
	size := flag.Int("payload", 200, "payload bytes per task (enqueue)")
	concurrency := flag.Int("concurrency", 50, "tasks processed at once (work)")
	flag.Parse()
	redisOpt := asynq.RedisClientOpt{Addr: *addr, PoolSize: 64}
	var err error
	switch flag.Arg(0) {
	case "enqueue":
		err = enqueue(redisOpt, *n, *size)
	case "work":
		err = work(redisOpt, *webhook, *concurrency)
	default:
		err = fmt.Errorf("usage: asynq-bench [flags] enqueue|work")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "asynq-bench:", err)
		os.Exit(1)
	}
}

// payloadOf is a JSON object of size bytes, like the bench's simpleqd payload.
func payloadOf(size int) []byte {
	const frame = `{"data":""}`
	return []byte(`{"data":"` + strings.Repeat("x", max(size-len(frame), 0)) + `"}`)
}

func enqueue(opt asynq.RedisClientOpt, n, size int) error {
	client := asynq.NewClient(opt)
	defer client.Close()
	payload := payloadOf(size)
	// Sixteen enqueuers: asynq has no batch enqueue, and one at a time
	// would make filling the queue the slow part of the bench.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := client.Enqueue(asynq.NewTask("deliver", payload), asynq.MaxRetry(3)); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func work(opt asynq.RedisClientOpt, webhook string, concurrency int) error {
	if webhook == "" {
		return fmt.Errorf("work needs -webhook")
	}
	hc := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        concurrency * 2,
			MaxIdleConnsPerHost: concurrency * 2,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	deliver := func(ctx context.Context, t *asynq.Task) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhook, bytes.NewReader(t.Payload()))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("webhook answered %d", resp.StatusCode)
		}
		return nil
	}
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: concurrency,
		Queues:      map[string]int{"default": 1},
		LogLevel:    asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc("deliver", deliver)
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Println("started")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Shutdown()
	return nil
}
