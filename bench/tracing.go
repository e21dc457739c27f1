package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// benchTraceParent is the publisher's trace context every job of the
// tracing rows is published with, so the traced path runs in full: stored
// with the job, parsed at the claim, forwarded (tracing off) or the parent
// of a span (tracing on).
const benchTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// otlpSink is an OTLP/HTTP trace receiver on loopback that decodes each
// export request and counts its spans, so the rows can say whether every
// delivery's span arrived.
type otlpSink struct {
	url   string
	srv   *http.Server
	spans atomic.Int64
}

func newOTLPSink() (*otlpSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req collectorpb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				s.spans.Add(int64(len(ss.GetSpans())))
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *otlpSink) close() { _ = s.srv.Close() }

// tracingRows compares the delivery path with tracing off and on, on this
// Redis and webhook: off is the daemon the delivery rows ran (d, no
// tracing section); on is a second daemon with tracing.otlpEndpoint set to
// an OTLP sink on loopback and sampleRatio 1, its keys under another Redis
// prefix so the two never share a queue. Every job is published with a
// traceparent. The runs alternate, off then on, so both see the same
// machine; each row gives the median and every run.
func tracingRows(ctx context.Context, bin, work string, rs *redisProc, hook *noopWebhook, d *daemonProc, o options, payload string,
	add func(name, value, target string)) error {
	sink, err := newOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	for k, v := range map[string]string{"SIMPLEQ_TRACING_OTLPENDPOINT": sink.url, "SIMPLEQ_TRACING_SAMPLERATIO": "1",
		"SIMPLEQ_REDIS_PREFIX": "traced"} {
		os.Setenv(k, v)
	}
	dt, err := startDaemon(ctx, bin, work, "d1t", []string{rs.addr}, nil, hook.url, o.concurrency, 1)
	for _, k := range []string{"SIMPLEQ_TRACING_OTLPENDPOINT", "SIMPLEQ_TRACING_SAMPLERATIO", "SIMPLEQ_REDIS_PREFIX"} {
		os.Unsetenv(k)
	}
	if err != nil {
		return err
	}
	defer dt.stop()

	off, on := newAPI(d.url), newAPI(dt.url)
	off.traceParent, on.traceParent = benchTraceParent, benchTraceParent
	// A warm-up of the traced daemon, as the delivery rows had theirs.
	if _, _, _, _, err := deliveryRunUsec(ctx, on, rs, hook, "q0", o.n, payload, nil, nil); err != nil {
		return err
	}
	// Its spans leave within a second; counting starts after them.
	time.Sleep(2 * time.Second)
	spansBefore := sink.spans.Load()
	var rates, cpus [2][]float64
	runs := min(max(o.runs, 1), 3)
	for range runs {
		for i, side := range []struct {
			api *apiClient
			pid int
		}{{off, d.cmd.Process.Pid}, {on, dt.cmd.Process.Pid}} {
			before := procCPU(side.pid)
			rate, _, _, _, err := deliveryRunUsec(ctx, side.api, rs, hook, "q0", o.n, payload, nil, nil)
			if err != nil {
				return err
			}
			// deliveryRunUsec waits 300 ms for the last settles: idle time.
			cpus[i] = append(cpus[i], float64((procCPU(side.pid)-before).Microseconds())/float64(o.n))
			rates[i] = append(rates[i], rate)
		}
	}
	// The exporter sends a batch at least every second.
	time.Sleep(2 * time.Second)
	spans := float64(sink.spans.Load()-spansBefore) / float64(runs*o.n)
	add(fmt.Sprintf("deliveries/s, tracing off | on (sampleRatio 1), N=%d, every job with a traceparent", o.n),
		medianOf(rates[0], "/s")+" | "+medianOf(rates[1], "/s"), "off: no cost")
	add("  daemon CPU per delivered job, tracing off | on (publish..settle, from /proc)",
		medianOf(cpus[0], "µs")+" | "+medianOf(cpus[1], "µs"), "")
	add("  spans the OTLP sink received per delivered job (tracing on)", fmt.Sprintf("%.2f", spans), "1.00")
	return nil
}

// traceHeader is the header publishBatches adds for a traced apiClient.
func (a *apiClient) traceHeader(h http.Header) {
	if a.traceParent != "" {
		h.Set("traceparent", a.traceParent)
	}
}
