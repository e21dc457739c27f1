//go:build linux

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestNextMessage(t *testing.T) {
	two := "HTTP/1.1 201 Created\r\nContent-Length: 2\r\ncontent-type: x\r\n\r\n{}" +
		"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
	for cut := 0; cut < len(two); cut++ {
		_, _, rest, ok, err := nextMessage([]byte(two[:cut]))
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		first := len("HTTP/1.1 201 Created\r\nContent-Length: 2\r\ncontent-type: x\r\n\r\n{}")
		if ok != (cut >= first) {
			t.Fatalf("cut %d: complete = %v", cut, ok)
		}
		if !ok && string(rest) != two[:cut] {
			t.Fatalf("cut %d: an incomplete message must be kept whole", cut)
		}
	}
	first, body, rest, ok, err := nextMessage([]byte(two))
	if err != nil || !ok || string(first) != "HTTP/1.1 201 Created\r\n" || string(body) != "{}" {
		t.Fatalf("first message: %q %q %v %v", first, body, ok, err)
	}
	first, body, rest, ok, err = nextMessage(rest)
	if err != nil || !ok || string(first) != "HTTP/1.1 200 OK\r\n" || len(body) != 0 || len(rest) != 0 {
		t.Fatalf("second message: %q %q %q %v %v", first, body, rest, ok, err)
	}
	if _, _, _, _, err := nextMessage([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")); err == nil {
		t.Fatal("a chunked body must be refused, not misread")
	}
	if _, _, _, _, err := nextMessage([]byte("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n")); err == nil {
		t.Fatal("a bad length must be refused")
	}
}

// TestEpollEndpoints runs the event-loop client against the event-loop
// webhook, which answers 200, so every publish is refused, and against a
// net/http server answering 201, where all n must be answered.
func TestEpollEndpoints(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if r.URL.Path != "/v1/queues/q/jobs" || r.Method != http.MethodPost {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"j"}`))
	}))
	defer srv.Close()
	if err := epollPublishMany(context.Background(), srv.URL, "q", 500, 7, []byte(`{"payload":1}`)); err != nil {
		t.Fatal(err)
	}
	if n := got.Load(); n != 500 {
		t.Fatalf("server saw %d requests, want 500", n)
	}

	hook := newEpollWebhook(newLatencyTracker())
	defer hook.close()
	err := epollPublishMany(context.Background(), strings.TrimSuffix(hook.url, "/hook"), "q", 10, 2, []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "200 OK") {
		t.Fatalf("a 200 answer to a publish must be reported, got %v", err)
	}
	if n := hook.count.Load(); n < 1 || n > 2 {
		t.Fatalf("webhook counted %d requests, want 1 or 2 (one per connection before the error)", n)
	}
}
