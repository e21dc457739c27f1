package dispatch

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
)

// benchWebhook is a fasthttp webhook on loopback answering 200, cheap
// enough that a delivery's own cost shows.
func benchWebhook(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }}
	go func() { _ = srv.Serve(l) }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + l.Addr().String() + "/hook"
}

func benchQueue(url string) config.Queue {
	return config.Queue{Name: "emails", WebhookURL: url, SigningSecret: "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		QueueSettings: config.QueueSettings{Mode: "standard", MaxAttempts: 5, Timeout: 5 * time.Second}}
}

const benchTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func benchJob(traceParent string) store.ClaimedJob {
	j := store.ClaimedJob{ID: "job_01jxyzabcdefghjkmnpqrstvwx_emails", Attempt: 1, Token: "t|1|1",
		CreatedAt: time.Unix(1764620000, 0), Payload: make([]byte, 200), TraceParent: traceParent}
	for i := range j.Payload {
		j.Payload[i] = 'a'
	}
	j.Payload[0], j.Payload[len(j.Payload)-1] = '{', '}'
	return j
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeliver is one delivery to a loopback webhook, the webhook's
// own work included: a job without a trace context, one published with a
// traceparent (forwarded as it is while tracing is off), and the same with
// tracing on (an SDK span, batched to an exporter that drops it: the cost
// up to the OTLP request). Run with -benchmem; docs/performance.md has the
// figures before and after tracing.
func BenchmarkDeliver(b *testing.B) {
	url := benchWebhook(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name, tp string
		tracer   trace.Tracer
	}{
		{"untraced", "", nil},
		{"traceparent-tracing-off", benchTraceParent, nil},
		{"traceparent-tracing-on", benchTraceParent, tp.Tracer("bench")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			d := NewDeliverer("bench").WithTracer(tc.tracer)
			q, j := benchQueue(url), benchJob(tc.tp)
			ctx := context.Background()
			if out := d.Deliver(ctx, q, j); out.Kind != store.OutcomeOK {
				b.Fatalf("warm-up delivery: %+v", out)
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				d.Deliver(ctx, q, j)
			}
			// CPU time is steadier than wall time on a shared machine. It
			// counts the whole process: the webhook's side too.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestTracingOffCostsNoAllocation: with tracing off, a job published with
// a traceparent (forwarded to the webhook as it is) costs a delivery the
// same allocations as one without.
func TestTracingOffCostsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so allocation counts mean nothing")
	}
	url := benchWebhook(t)
	d := NewDeliverer("t")
	q := benchQueue(url)
	plain, traced := benchJob(""), benchJob(benchTraceParent)
	traced.TraceState = "congo=t61rcWkgMzE"
	ctx := context.Background()
	for range 10 { // warm the pools
		d.Deliver(ctx, q, plain)
		d.Deliver(ctx, q, traced)
	}
	a := testing.AllocsPerRun(200, func() { d.Deliver(ctx, q, plain) })
	b := testing.AllocsPerRun(200, func() { d.Deliver(ctx, q, traced) })
	if b > a {
		t.Fatalf("a traced job allocates %.1f times per delivery with tracing off, an untraced one %.1f", b, a)
	}
}
