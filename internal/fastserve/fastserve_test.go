package fastserve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// start serves h on a loopback port and stops it when the test ends.
func start(t *testing.T, h http.Handler, l Limits) (*Server, string) {
	t.Helper()
	if l.HeaderTimeout == 0 {
		l = Limits{HeaderTimeout: 2 * time.Second, BodyTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			IdleTimeout: 5 * time.Second, MaxHeaderBytes: 8 << 10, MaxBodyBytes: 1 << 20}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := New(h, l, zap.NewNop())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		require.NoError(t, <-done)
	})
	return s, ln.Addr().String()
}

// roundTrip writes raw to a new connection and reads one response.
func roundTrip(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, raw)
	require.NoError(t, err)
	var req *http.Request
	if strings.HasPrefix(raw, "HEAD ") {
		req = &http.Request{Method: http.MethodHead} // so no body is expected
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// TestRequestAndResponseAsNetHTTP: the handler sees the request as net/http
// would give it, and its answer goes out as written.
func TestRequestAndResponseAsNetHTTP(t *testing.T) {
	t.Parallel()
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, "POST", r.Method)
		require.Equal(t, "/v1/queues/q/jobs", r.URL.Path)
		require.Equal(t, "a=1&b=2", r.URL.RawQuery)
		require.Equal(t, "/v1/queues/q/jobs?a=1&b=2", r.RequestURI)
		require.Equal(t, "example.test", r.Host)
		require.Empty(t, r.Header.Values("Host"), "the host is r.Host, as in net/http")
		require.Equal(t, "Bearer k", r.Header.Get("Authorization"))
		require.Equal(t, []string{"one", "two"}, r.Header.Values("X-Multi"))
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.EqualValues(t, 7, r.ContentLength)
		require.Equal(t, `{"a":1}`, string(body))
		require.NotEmpty(t, r.RemoteAddr)
		require.NoError(t, r.Context().Err())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Out", "1")
		w.Header().Add("X-Out", "2")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("X-Late", "ignored, as in net/http")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}), Limits{})
	resp, body := roundTrip(t, addr, "POST /v1/queues/q/jobs?a=1&b=2 HTTP/1.1\r\nHost: example.test\r\n"+
		"Authorization: Bearer k\r\nx-multi: one\r\nX-Multi: two\r\nContent-Type: application/json\r\n"+
		"Content-Length: 7\r\n\r\n{\"a\":1}")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, `{"ok":true}`, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, []string{"1", "2"}, resp.Header.Values("X-Out"))
	require.Empty(t, resp.Header.Get("X-Late"))
	require.Empty(t, resp.Header.Get("Server"), "no server banner")
}

// TestImplicitAnswer: a handler that writes nothing answers 200 with no
// body; a body without a Content-Type gets a sniffed one (net/http's rule);
// a HEAD answer keeps the handler's Content-Length and sends no body.
func TestImplicitAnswer(t *testing.T) {
	t.Parallel()
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			_, _ = io.WriteString(w, "<html><body>hi</body></html>")
		case "/head":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "42")
			if r.Method != http.MethodHead {
				_, _ = io.WriteString(w, strings.Repeat("x", 42))
			}
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
			_, _ = io.WriteString(w, "dropped")
		}
	}), Limits{})
	resp, body := roundTrip(t, addr, "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)
	resp, _ = roundTrip(t, addr, "GET /html HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	resp, body = roundTrip(t, addr, "HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "42", resp.Header.Get("Content-Length"))
	require.Empty(t, body)
	resp, body = roundTrip(t, addr, "GET /nocontent HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Empty(t, body)
}

// TestRetainedStringsSurvive: what a handler keeps from a request (a queue
// name handed to a wake-up, a header) stays intact after fasthttp reuses its
// buffers for the next requests.
func TestRetainedStringsSurvive(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths, keys []string
	var bodies [][]byte
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodies = append(bodies, b)
		mu.Unlock()
	}), Limits{})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	const n = 50
	for i := range n {
		body := fmt.Sprintf(`{"n":%03d}`, i)
		_, err := fmt.Fprintf(c, "POST /q%03d HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k%03d\r\nContent-Length: %d\r\n\r\n%s",
			i, i, len(body), body)
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, paths, n)
	for i := range n {
		require.Equal(t, fmt.Sprintf("/q%03d", i), paths[i])
		require.Equal(t, fmt.Sprintf("k%03d", i), keys[i])
		require.Equal(t, fmt.Sprintf(`{"n":%03d}`, i), string(bodies[i]))
	}
}

// TestRefusalsAreJSON: requests refused before any handler runs get the
// API's JSON error shape and the right status.
func TestRefusalsAreJSON(t *testing.T) {
	t.Parallel()
	called := make(chan struct{}, 10)
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called <- struct{}{} }),
		Limits{HeaderTimeout: 2 * time.Second, BodyTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			IdleTimeout: 5 * time.Second, MaxHeaderBytes: 4 << 10, MaxBodyBytes: 100})
	resp, body := roundTrip(t, addr, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.JSONEq(t, `{"error":"Payload too large"}`, body)

	resp, body = roundTrip(t, addr, "GET /x HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.JSONEq(t, `{"error":"Request header too large"}`, body)

	resp, body = roundTrip(t, addr, "NOT HTTP AT ALL\r\n\r\n")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.JSONEq(t, `{"error":"Malformed HTTP request"}`, body)
	require.Empty(t, called, "no refused request reached the handler")
}

// TestSlowHeaderCutOff: a client trickling its header is cut off after
// HeaderTimeout; a large body gets BodyTimeout from its header on.
func TestSlowHeaderCutOff(t *testing.T) {
	t.Parallel()
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), Limits{HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 3 * time.Second, WriteTimeout: time.Second,
		IdleTimeout: 5 * time.Second, MaxHeaderBytes: 8 << 10, MaxBodyBytes: 1 << 20})

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n")
	require.NoError(t, err)
	go func() {
		for range 20 {
			time.Sleep(50 * time.Millisecond) //nolint:testsleep // the test is a client that trickles its header in wall time
			if _, err := io.WriteString(c, "X-Slow: y\r\n"); err != nil {
				return
			}
		}
	}()
	_, _ = io.Copy(io.Discard, c) // until the server closes it
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 250*time.Millisecond)
	require.Less(t, took, 900*time.Millisecond, "the header timeout did not cut the slow client")

	// A 200 KB body sent over ~600 ms: longer than HeaderTimeout, within
	// BodyTimeout.
	c2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c2.Close()
	const size = 200 << 10
	_, err = fmt.Fprintf(c2, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
	require.NoError(t, err)
	for range 4 {
		time.Sleep(150 * time.Millisecond) //nolint:testsleep // the body must take longer than HeaderTimeout in wall time
		_, err = c2.Write(make([]byte, size/4))
		require.NoError(t, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestPanicAnswers500: a handler panic is logged and answered 500 on that
// request only; the server keeps serving.
func TestPanicAnswers500(t *testing.T) {
	t.Parallel()
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			panic("boom")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
	}), Limits{})
	resp, body := roundTrip(t, addr, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.JSONEq(t, `{"error":"internal error"}`, body)
	resp, _ = roundTrip(t, addr, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// http.ErrAbortHandler: the connection closes with no answer.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /abort HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestShutdownWaitsForRequests: Shutdown lets a request being served finish,
// its context alive and its answer sent, and Serve returns nil.
func TestShutdownWaitsForRequests(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		if r.Context().Err() != nil {
			_, _ = io.WriteString(w, "context ended while Shutdown waited")
			return
		}
		_, _ = io.WriteString(w, "done")
	}), Limits{HeaderTimeout: time.Second, BodyTimeout: time.Second, WriteTimeout: time.Second,
		IdleTimeout: time.Second, MaxHeaderBytes: 8 << 10, MaxBodyBytes: 1 << 10}, zap.NewNop())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	require.Never(t, func() bool { return len(stopped) > 0 }, 100*time.Millisecond, 5*time.Millisecond,
		"Shutdown returned while a request was being served")
	close(release)
	require.Equal(t, "done", <-answer)
	require.NoError(t, <-stopped)
	require.NoError(t, <-served)
}

// TestClientVariants: what HTTP clients send besides plain keep-alive
// requests is understood: chunked bodies, Expect: 100-continue, pipelined
// requests on one connection, and HTTP/1.0.
func TestClientVariants(t *testing.T) {
	t.Parallel()
	_, addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %d %s", r.Proto, r.URL.Path, r.ContentLength, b)
	}), Limits{})

	// Chunked: the handler sees the whole body and its length.
	resp, body := roundTrip(t, addr, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `HTTP/1.1 /chunked 7 {"a":1}`, body)

	// Expect: 100-continue: the server asks for the body, then answers.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	_, err = io.WriteString(c, "POST /expect HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	require.NoError(t, err)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "100 Continue")
	_, _ = br.ReadString('\n') // the blank line ending the interim answer
	_, err = io.WriteString(c, "{}")
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "HTTP/1.1 /expect 2 {}", string(b))

	// Pipelined: three requests in one write, three answers in order.
	c2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c2.Close()
	_, err = io.WriteString(c2, "GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\nGET /three HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br2 := bufio.NewReader(c2)
	for _, p := range []string{"/one", "/two", "/three"} {
		resp, err := http.ReadResponse(br2, nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, "HTTP/1.1 "+p+" 0 ", string(b))
	}

	// HTTP/1.0: answered, and the connection closed after it.
	resp, body = roundTrip(t, addr, "GET /old HTTP/1.0\r\n\r\n")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "HTTP/1.0 /old 0 ", body)
}
