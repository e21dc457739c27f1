package main

// Lean HTTP/1.1 endpoints with a goroutine per connection. On 2 shared
// cores every microsecond the load generator or the no-op webhook spends is
// taken from the daemon and Redis, so the harness uses minimal endpoints
// (what wrk and an nginx `return 200` are to C benchmarks). The headline
// rows use the event-loop ones of epoll_linux.go; these serve the paced
// latency runs and the rows that show what a goroutine per connection
// costs, and the table has rows with Go's net/http on both sides too, so
// the cost of the harness itself is visible and nothing is hidden.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// readResponseOrRequest reads one HTTP/1.1 message head from r and returns
// its first line and body. It understands Content-Length and chunked
// bodies, which is all the daemon and the daemon's deliveries send.
func readMessage(r *bufio.Reader, buf []byte) (first []byte, body []byte, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, nil, err
	}
	first = append(buf[:0], line...)
	length, chunked := -1, false
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return nil, nil, err
		}
		if len(h) <= 2 {
			break
		}
		if i := bytes.IndexByte(h, ':'); i > 0 {
			name := h[:i]
			val := bytes.TrimSpace(h[i+1:])
			switch {
			case asciiEqualFold(name, "content-length"):
				length, err = strconv.Atoi(string(val))
				if err != nil {
					return nil, nil, fmt.Errorf("bad content-length %q", val)
				}
			case asciiEqualFold(name, "transfer-encoding"):
				chunked = bytes.EqualFold(val, []byte("chunked"))
			}
		}
	}
	body = first[len(first):]
	switch {
	case chunked:
		for {
			l, err := r.ReadSlice('\n')
			if err != nil {
				return nil, nil, err
			}
			n, err := strconv.ParseInt(string(bytes.TrimSpace(l)), 16, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("bad chunk size %q", l)
			}
			if n == 0 {
				if _, err := r.ReadSlice('\n'); err != nil {
					return nil, nil, err
				}
				break
			}
			start := len(body)
			body = slices.Grow(body, int(n))[:start+int(n)]
			if _, err := io.ReadFull(r, body[start:]); err != nil {
				return nil, nil, err
			}
			if _, err := r.Discard(2); err != nil {
				return nil, nil, err
			}
		}
	case length > 0:
		body = slices.Grow(body, length)[:length]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, nil, err
		}
	}
	return first[:len(first):len(first)], body, nil
}

func asciiEqualFold(b []byte, s string) bool {
	return len(b) == len(s) && bytes.EqualFold(b, []byte(s))
}

// leanWebhook is a no-op endpoint: it answers every request 200 with an
// empty body, counts deliveries and, when asked, measures publish→delivery
// latency from a key in the payload.
type leanWebhook struct {
	url   string
	ln    net.Listener
	count atomic.Int64
	lat   *latencyTracker
}

func newLeanWebhook(lat *latencyTracker) *leanWebhook {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	h := &leanWebhook{url: "http://" + ln.Addr().String() + "/hook", ln: ln, lat: lat}
	go h.accept()
	return h
}

func (h *leanWebhook) close() { _ = h.ln.Close() }

func (h *leanWebhook) accept() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		go h.serve(c)
	}
}

var okResponse = []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

func (h *leanWebhook) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 8192)
	w := bufio.NewWriterSize(c, 4096)
	buf := make([]byte, 0, 4096)
	for {
		_, body, err := readMessage(r, buf)
		if err != nil {
			return
		}
		h.count.Add(1)
		h.lat.observe(body)
		_, _ = w.Write(okResponse)
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// latencyTracker matches delivered payloads to their publish times.
type latencyTracker struct {
	on       atomic.Bool // tracking, readable without the lock
	mu       sync.Mutex
	tracking bool
	starts   map[string]time.Time
	lat      []float64
}

func newLatencyTracker() *latencyTracker {
	return &latencyTracker{starts: map[string]time.Time{}}
}

func (t *latencyTracker) observe(body []byte) {
	if !t.on.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.tracking {
		return
	}
	i := bytes.Index(body, []byte(`"k":"`))
	if i < 0 {
		return
	}
	rest := body[i+5:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return
	}
	key := string(rest[:j])
	if s, ok := t.starts[key]; ok {
		t.lat = append(t.lat, float64(time.Since(s).Microseconds())/1000)
		delete(t.starts, key)
	}
}

func (t *latencyTracker) track(on bool) {
	t.mu.Lock()
	t.tracking = on
	t.on.Store(on)
	if on {
		t.lat = nil
		t.starts = map[string]time.Time{}
	}
	t.mu.Unlock()
}

func (t *latencyTracker) markStart(key string) {
	t.mu.Lock()
	t.starts[key] = time.Now()
	t.mu.Unlock()
}

func (t *latencyTracker) latencies() []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]float64(nil), t.lat...)
}

// leanPublishMany sends n single-job publishes over `clients` keep-alive
// connections, one request in flight per connection, and checks each
// answer is 201.
func leanPublishMany(ctx context.Context, base, queue string, n, clients int, body []byte) error {
	hostport := base[len("http://"):]
	req := []byte(fmt.Sprintf("POST /v1/queues/%s/jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		queue, hostport, len(body), body))
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", hostport)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			r := bufio.NewReaderSize(c, 4096)
			buf := make([]byte, 0, 1024)
			for next.Add(1) <= int64(n) {
				if _, err := c.Write(req); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				first, body, err := readMessage(r, buf)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if !bytes.HasPrefix(first, []byte("HTTP/1.1 201")) {
					firstErr.CompareAndSwap(nil, fmt.Errorf("publish: %s %s", bytes.TrimSpace(first), body))
					return
				}
			}
		}()
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		return e
	}
	if ctx.Err() != nil {
		return errors.New("publish run cancelled")
	}
	return nil
}

// leanPool is a set of keep-alive connections to the daemon for single
// publishes sent at a paced rate (the latency runs): a publish takes a free
// connection, sends, reads the answer and gives it back.
type leanPool struct {
	hostport string
	conns    chan *leanConn
}

type leanConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

func newLeanPool(ctx context.Context, base string, n int) (*leanPool, error) {
	p := &leanPool{hostport: base[len("http://"):], conns: make(chan *leanConn, n)}
	for range n {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", p.hostport)
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns <- &leanConn{c: c, r: bufio.NewReaderSize(c, 4096), buf: make([]byte, 0, 1024)}
	}
	return p, nil
}

func (p *leanPool) close() {
	for {
		select {
		case lc := <-p.conns:
			_ = lc.c.Close()
		default:
			return
		}
	}
}

// publish sends one single-job publish of body to queue and checks for 201.
func (p *leanPool) publish(queue string, body []byte) error {
	lc := <-p.conns
	defer func() { p.conns <- lc }()
	req := fmt.Appendf(lc.buf[:0], "POST /v1/queues/%s/jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		queue, p.hostport, len(body), body)
	_ = lc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := lc.c.Write(req); err != nil {
		return err
	}
	first, resp, err := readMessage(lc.r, lc.buf)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(first, []byte("HTTP/1.1 201")) {
		return fmt.Errorf("publish: %s %s", bytes.TrimSpace(first), resp)
	}
	return nil
}
