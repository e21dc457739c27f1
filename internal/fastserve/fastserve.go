// Package fastserve serves the daemon's net/http handler on fasthttp's
// connection handling. On loopback a single-job publish spends more CPU in
// net/http's server than in simpleqd: a background read per request to
// notice a client going away, two read-deadline changes to stop it, a
// header map and a goroutine switch. fasthttp reads and writes each
// keep-alive connection from one goroutine, so serving the same handler
// through it takes about half the daemon's CPU per publish (see
// docs/performance.md).
//
// The API stays written against net/http: every handler, middleware and
// test is unchanged, and this package only converts each request to an
// *http.Request and calls the handler synchronously on the connection's
// goroutine. It is built for simpleqd's API, which answers every request
// with one buffered body: a handler cannot stream (Flush) or take over the
// connection (Hijack), may not use its ResponseWriter after returning (as
// net/http also requires; here writers are reused), and a request's context
// ends only when the server shuts down, not when its client disconnects.
package fastserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// Limits bound every phase of a request, so a slow or stuck client cannot
// hold a connection and its buffers without bound.
type Limits struct {
	// HeaderTimeout is how long a request's header may take to arrive,
	// from its first byte (slowloris).
	HeaderTimeout time.Duration
	// BodyTimeout is how long a large body (above bodyTimeoutFrom bytes, or
	// chunked) may take to arrive after its header. Smaller bodies come
	// with the header, under HeaderTimeout.
	BodyTimeout time.Duration
	// WriteTimeout bounds writing one response.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header section (431 above it).
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request body (413 above it, answered before
	// the body is read).
	MaxBodyBytes int
}

// bodyTimeoutFrom is the body size from which BodyTimeout applies instead of
// HeaderTimeout: a body of a few kilobytes arrives with its header.
const bodyTimeoutFrom = 64 << 10

// Answers for requests that never reach the handler, in the API's error
// shape ({"error": "..."}), so a client sees the same JSON whatever refused
// its request.
const (
	msgTooLarge     = "Payload too large"
	msgHeaderTooBig = "Request header too large"
	msgTimeout      = "Request timeout"
	msgMalformed    = "Malformed HTTP request"
	msgInternal     = "internal error"
)

// Server serves one http.Handler over fasthttp.
type Server struct {
	srv *fasthttp.Server
	// base is every request's context: it ends when Shutdown gives up
	// waiting for requests.
	base     context.Context
	cancel   context.CancelFunc
	limits   Limits
	log      *zap.Logger
	stopping atomic.Bool
	// template is an empty request carrying base: every request is a copy
	// of it, which sets the context without WithContext's second copy.
	template *http.Request
	writers  sync.Pool // of *responseWriter
}

// New returns a Server for h with the given limits; log receives connection
// errors (malformed requests, timeouts) at debug level.
func New(h http.Handler, limits Limits, log *zap.Logger) *Server {
	base, cancel := context.WithCancel(context.Background())
	s := &Server{base: base, cancel: cancel, limits: limits, log: log}
	s.template = new(http.Request).WithContext(base)
	s.writers.New = func() any { return &responseWriter{header: make(http.Header, 4)} }
	s.srv = &fasthttp.Server{
		Handler:                      func(ctx *fasthttp.RequestCtx) { s.serve(ctx, h) },
		ErrorHandler:                 writeRefusal,
		HeaderReceived:               limits.bodyTimeout,
		ReadTimeout:                  limits.HeaderTimeout,
		WriteTimeout:                 limits.WriteTimeout,
		IdleTimeout:                  limits.IdleTimeout,
		ReadBufferSize:               limits.MaxHeaderBytes,
		MaxRequestBodySize:           limits.MaxBodyBytes,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		// Buffers of idle keep-alive connections go back to the pool: a
		// header buffer is MaxHeaderBytes, too much to hold per idle client.
		ReduceMemoryUsage: true,
		Logger:            zapPrintf{log.Named("http")},
	}
	return s
}

// Limits reports the server's limits (for tests and logs).
func (s *Server) Limits() Limits { return s.limits }

// Serve accepts connections on ln until Shutdown; it returns nil after a
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(ln)
	if s.stopping.Load() {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, closes idle ones and waits, until
// ctx ends, for requests being served to finish, as net/http's Shutdown
// does. Requests still running then see their context end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopping.Store(true)
	defer s.cancel()
	return s.srv.ShutdownWithContext(ctx)
}

// bodyTimeout gives a request with a large or chunked body BodyTimeout to
// arrive; others keep the header's deadline.
func (l Limits) bodyTimeout(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if n := h.ContentLength(); n > bodyTimeoutFrom || n == -1 {
		return fasthttp.RequestConfig{ReadTimeout: l.BodyTimeout}
	}
	return fasthttp.RequestConfig{}
}

// writeRefusal answers a request fasthttp could not read, in the API's JSON
// error shape. fasthttp closes the connection afterwards.
func writeRefusal(ctx *fasthttp.RequestCtx, err error) {
	status, msg := http.StatusBadRequest, msgMalformed
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, msg = http.StatusRequestEntityTooLarge, msgTooLarge
	case errors.As(err, &small):
		status, msg = http.StatusRequestHeaderFieldsTooLarge, msgHeaderTooBig
	case errors.As(err, &netErr) && netErr.Timeout():
		status, msg = http.StatusRequestTimeout, msgTimeout
	}
	writeError(ctx, status, msg)
}

// writeError answers {"error": msg}, the API's error shape, in place of
// whatever the response held.
func writeError(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBodyString(`{"error":` + strconv.Quote(msg) + "}\n")
}

// serve converts one request and runs h on it. Every string and byte slice
// the handler sees is a copy: fasthttp reuses its buffers once serve
// returns, and handlers may keep what they read (a queue name in a wake-up,
// a payload in a publish that outlived its request).
func (s *Server) serve(ctx *fasthttp.RequestCtx, h http.Handler) {
	r, err := s.request(ctx)
	if err != nil {
		writeError(ctx, http.StatusBadRequest, msgMalformed)
		return
	}
	w := s.writers.Get().(*responseWriter)
	w.ctx = ctx
	defer s.recoverPanic(ctx, r)
	h.ServeHTTP(w, r)
	w.finish()
	s.release(w)
}

// release returns w to the pool with an empty header that keeps its
// storage: the API sets three headers on every answer, and a fresh map grew
// for them on each request. A handler may not keep its ResponseWriter after
// returning (net/http's rule), so nothing else refers to w. A panicking
// handler's writer is not reused.
func (s *Server) release(w *responseWriter) {
	clear(w.header)
	w.ctx, w.status = nil, 0
	s.writers.Put(w)
}

// recoverPanic keeps a handler's panic to its own request, as net/http's
// server does: logged, answered 500, the connection closed. The API's own
// middleware answers its panics first; this covers everything else mounted
// on the listener. http.ErrAbortHandler closes the connection quietly.
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler { //nolint:errorlint // a sentinel value, compared as net/http does
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) { _ = c.Close() })
		return
	}
	s.log.Error("panic in HTTP handler",
		zap.String("method", r.Method), zap.String("path", r.URL.Path),
		zap.Any("panic", v), zap.Stack("stack"))
	writeError(ctx, http.StatusInternalServerError, msgInternal)
	ctx.SetConnectionClose()
}

// request builds the *http.Request for ctx.
func (s *Server) request(ctx *fasthttp.RequestCtx) (*http.Request, error) {
	uri := string(ctx.RequestURI())
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, fmt.Errorf("request URI %q: %w", uri, err)
	}
	r := new(http.Request)
	*r = *s.template // the context only: every other field is set below
	r.Method = method(ctx.Method())
	r.URL = u
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	r.Header = make(http.Header, ctx.Request.Header.Len())
	r.Host = string(ctx.Host())
	r.RemoteAddr = ctx.RemoteAddr().String()
	r.RequestURI = uri
	r.TLS = ctx.TLSConnectionState()
	if ctx.Request.Header.IsHTTP11() {
		r.Close = ctx.Request.Header.ConnectionClose()
	} else {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	// One backing array for the values: a header seen once (nearly all)
	// costs no slice of its own.
	vals := make([]string, 0, ctx.Request.Header.Len())
	for k, v := range ctx.Request.Header.All() {
		key := headerKey(k)
		if key == "Host" {
			continue // r.Host, as net/http does
		}
		if old, seen := r.Header[key]; seen {
			r.Header[key] = append(old, string(v))
			continue
		}
		vals = append(vals, string(v))
		r.Header[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	body := ctx.PostBody()
	r.ContentLength = int64(len(body))
	if len(body) > 0 {
		// Reading copies out of fasthttp's buffer, which stays untouched
		// until the handler has returned.
		r.Body = bodyReader{Reader: bytes.NewReader(body)}
	} else {
		r.Body = http.NoBody
	}
	return r, nil
}

// Frequent strings, shared instead of allocated per request. Read-only.
var (
	methods    = stringSet(http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions)
	headerKeys = stringSet("Host", "User-Agent", "Accept", "Accept-Encoding", "Authorization", "Content-Type", "Content-Length", "Connection")
)

func stringSet(values ...string) map[string]string {
	m := make(map[string]string, len(values))
	for _, v := range values {
		m[v] = v
	}
	return m
}

func method(b []byte) string {
	if m, ok := methods[string(b)]; ok { // no allocation: map lookup by []byte
		return m
	}
	return string(b)
}

// headerKey is net/http's canonical form of a header name (fasthttp has
// normalised it already, but net/http's rules are the ones handlers expect).
func headerKey(b []byte) string {
	if k, ok := headerKeys[string(b)]; ok {
		return k
	}
	return http.CanonicalHeaderKey(string(b))
}

// bodyReader is a request body: already in memory, closing is a no-op.
type bodyReader struct{ *bytes.Reader }

func (bodyReader) Close() error { return nil }

// responseWriter buffers one answer into fasthttp's response. As with
// net/http, headers changed after WriteHeader are not sent.
type responseWriter struct {
	ctx    *fasthttp.RequestCtx
	header http.Header
	status int
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	w.status = code
	resp := &w.ctx.Response
	resp.SetStatusCode(code)
	for k, vs := range w.header {
		switch k {
		case "Content-Length":
			// fasthttp frames the body it holds; a HEAD answer keeps the
			// handler's length.
			if w.ctx.IsHead() && len(vs) > 0 {
				if n, err := strconv.Atoi(vs[0]); err == nil {
					resp.Header.SetContentLength(n)
				}
			}
			continue
		case "Transfer-Encoding", "Trailer":
			continue
		}
		for i, v := range vs {
			if i == 0 {
				resp.Header.Set(k, v)
			} else {
				resp.Header.Add(k, v)
			}
		}
	}
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.ctx.IsHead() || !bodyAllowed(w.status) {
		return len(b), nil
	}
	return w.ctx.Write(b)
}

// finish completes an answer the handler left implicit: 200 when nothing was
// written, and a sniffed Content-Type for a body without one (net/http's
// rules).
func (w *responseWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	resp := &w.ctx.Response
	if body := resp.Body(); len(body) > 0 && len(resp.Header.ContentType()) == 0 {
		resp.Header.SetContentType(http.DetectContentType(body[:min(len(body), 512)]))
	}
}

// bodyAllowed: 1xx, 204 and 304 answers have no body (RFC 9110).
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// zapPrintf is fasthttp's Logger on zap; fasthttp logs per-connection
// errors, which are the client's business, hence debug.
type zapPrintf struct{ log *zap.Logger }

func (z zapPrintf) Printf(format string, args ...any) {
	if ce := z.log.Check(zap.DebugLevel, "http connection"); ce != nil {
		ce.Write(zap.String("detail", fmt.Sprintf(format, args...)))
	}
}
