package fastserve

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// publishRequest is a single-job publish as the bench's clients send it.
func publishRequest() *fasthttp.Request {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/v1/queues/q0/jobs")
	req.Header.SetHost("127.0.0.1:8080")
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", "Bearer k")
	req.SetBodyString(`{"payload":{"data":"` + strings.Repeat("x", 180) + `"}}`)
	return &req
}

var publishAnswer = []byte(`{"id":"job_01KB1234567890ABCDEFGHJKMN_q0","status":"pending","createdAt":"2026-11-30T11:00:00.000Z"}` + "\n")

// BenchmarkServeOverhead is what serving a net/http handler through this
// package costs per request beyond fasthttp itself: converting a
// publish-sized request and buffering its JSON answer, without syscalls or
// the handler's work. Compare BenchmarkNativeBaseline, the same answer
// written with fasthttp's API: about 3 µs apart, against a publish's ~50 µs of
// daemon CPU: too little to justify a second, fasthttp-native code path for
// the publish endpoint (see docs/performance.md).
func BenchmarkServeOverhead(b *testing.B) {
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 512)
		_, _ = r.Body.Read(buf)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(publishAnswer))}
		h["X-Content-Type-Options"] = []string{"nosniff"}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(publishAnswer)
	}), Limits{}, zap.NewNop())
	serveLoop(b, s.srv.Handler)
}

// BenchmarkNativeBaseline answers the same request with fasthttp's own API.
func BenchmarkNativeBaseline(b *testing.B) {
	serveLoop(b, func(ctx *fasthttp.RequestCtx) {
		_ = ctx.Request.Header.Peek("Authorization")
		_ = ctx.PostBody()
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
		ctx.SetBody(publishAnswer)
	})
}

// serveLoop runs handle on a publish request, b.N times, without a network.
func serveLoop(b *testing.B, handle fasthttp.RequestHandler) {
	req := publishRequest()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1234}
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Init(req, addr, nil)
		ctx.Response.Reset()
		handle(&ctx)
	}
}
