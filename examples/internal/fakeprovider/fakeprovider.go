// Package fakeprovider is the stand-in "AI provider" the Go worker examples
// call when PROVIDER_URL is not set: it rate-limits the first few calls
// with 429 and Retry-After, as Anthropic or OpenAI do under load, so running
// an example on its own shows backpressure being relayed. It lives apart from
// the examples so each main.go shows only what a real worker needs.
package fakeprovider

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
)

// Start serves the fake provider on a free loopback port and returns its
// URL. The first limited calls answer 429 with Retry-After: 1; every later
// call answers 200 with a small JSON body.
func Start(limited int64) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	var calls atomic.Int64
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			if n <= limited {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprintf(w, `{"error":{"type":"rate_limit_error","message":"call %d rate limited"}}`, n)
				return
			}
			fmt.Fprintf(w, `{"ok":true,"call":%d}`, n)
		}))
	}()
	return "http://" + l.Addr().String() + "/v1/messages", nil
}
