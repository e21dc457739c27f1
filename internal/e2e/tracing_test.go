package test

// End-to-end tests of traces (production.md §2): a real daemon with
// tracing on exports its delivery spans over OTLP/HTTP to an in-test
// receiver on loopback (internal/otlptest decodes the protobuf
// ExportTraceServiceRequest), and its webhook sees the trace context.

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/simpleq/simpleqd/internal/otlptest"
)

const (
	trTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	trSpanID  = "00f067aa0ba902b7"
	trParent  = "00-" + trTraceID + "-" + trSpanID + "-01"
	trState   = "congo=t61rcWkgMzE"
)

func trYAML(endpoint string) string {
	return "tracing:\n  otlpEndpoint: " + endpoint + "\n  sampleRatio: 1\n  serviceName: simpleqd-e2e\n"
}

// trPublish publishes one job with the publisher's trace context.
func trPublish(t *testing.T, d *Daemon, queue string, headers ...string) string {
	t.Helper()
	r := d.Do("POST", "/v1/queues/"+queue+"/jobs", map[string]any{"payload": map[string]any{"n": 1}}, headers...)
	require.Equal(t, 201, r.Status, string(r.Body))
	return r.JSON(t)["id"].(string)
}

// trSpans waits until the receiver holds n spans of job id and returns them
// in start order.
func trSpans(t *testing.T, recv *otlptest.Receiver, id string, n int) []otlptest.Span {
	t.Helper()
	var got []otlptest.Span
	require.Eventually(t, func() bool {
		got = got[:0]
		for _, s := range recv.Spans() {
			if s.Attributes["simpleqd.job.id"] == id {
				got = append(got, s)
			}
		}
		return len(got) >= n
	}, 15*time.Second, 20*time.Millisecond, "spans of %s never arrived", id)
	for i := 1; i < len(got); i++ {
		for j := i; j > 0 && got[j].Start.Before(got[j-1].Start); j-- {
			got[j], got[j-1] = got[j-1], got[j]
		}
	}
	return got
}

// A publish with a traceparent: the webhook receives a traceparent in the
// same trace with a new span id, and the collector receives that span, a
// client span parented on the publisher's span, with its attributes. The
// daemon stopped right after the delivery still sends it (flush on stop).
func TestTraceFromPublisherToWebhook(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	recv := otlptest.New(t)
	hook := NewWebhook(t, nil)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr,
		YAML: trYAML(recv.URL) + QueueYAML("traced", hook.URL)})
	id := trPublish(t, d, "traced", "traceparent", trParent, "tracestate", trState)
	d.WaitStatus(id, "completed", 10*time.Second)
	stopped := time.Now()
	require.Equal(t, 0, d.Stop(10*time.Second))
	t.Logf("daemon stopped in %s", time.Since(stopped))
	// The daemon has exited, so nothing more can arrive: the span is here
	// because the stop flushed it (the exporter batches for up to 1 s).
	var spans []otlptest.Span
	for _, s := range recv.Spans() {
		if s.Attributes["simpleqd.job.id"] == id {
			spans = append(spans, s)
		}
	}
	require.Len(t, spans, 1)

	ds := hook.Deliveries()
	require.Len(t, ds, 1)
	got := ds[0].Header.Get("traceparent")
	parts := strings.Split(got, "-")
	require.Len(t, parts, 4, got)
	require.Equal(t, "00", parts[0])
	require.Equal(t, trTraceID, parts[1], "the webhook joins the publisher's trace")
	require.NotEqual(t, trSpanID, parts[2], "as a child of simpleqd's span, not of the publisher's")
	require.Equal(t, "01", parts[3])
	require.Equal(t, trState, ds[0].Header.Get("tracestate"))

	s := spans[0]
	require.Equal(t, "simpleqd-e2e", s.Service)
	require.Equal(t, "deliver traced", s.Name)
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.Kind)
	require.Equal(t, trTraceID, s.TraceID)
	require.Equal(t, trSpanID, s.ParentSpanID, "parented on the publisher's span")
	require.Equal(t, parts[2], s.SpanID, "the webhook's traceparent is this span")
	require.Equal(t, "traced", s.Attributes["simpleqd.queue"])
	require.EqualValues(t, 1, s.Attributes["simpleqd.attempt"])
	require.EqualValues(t, 200, s.Attributes["http.response.status_code"])
	require.Equal(t, "ok", s.Attributes["simpleqd.outcome"])
	require.Equal(t, "COMPLETED", s.Attributes["simpleqd.result"])
	require.Equal(t, hook.URL, s.Attributes["url.full"])
	require.False(t, s.End.Before(s.Start))
	require.Empty(t, s.Events)
}

// A held-then-probed delivery: the 429 that held the queue carries a
// simpleqd.hold event (until, reason), the probe that reopened it a
// simpleqd.probe event; both spans are children of the publisher's span.
// A job published without a traceparent is traced too, as a root.
func TestTraceHoldAndProbeEvents(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	recv := otlptest.New(t)
	var n atomic.Int32
	hook := NewWebhook(t, func(dl Delivery) Reply {
		if n.Add(1) == 1 {
			return Reply{Status: 429, RetryAfter: "1"}
		}
		return Reply{Status: 200}
	})
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr,
		YAML: trYAML(recv.URL) + QueueYAML("held", hook.URL, "concurrency: 1")})
	id := trPublish(t, d, "held", "traceparent", trParent)
	d.WaitStatus(id, "completed", 15*time.Second)
	spans := trSpans(t, recv, id, 2)
	require.Len(t, spans, 2)

	held, probe := spans[0], spans[1]
	for _, s := range spans {
		require.Equal(t, trTraceID, s.TraceID)
		require.Equal(t, trSpanID, s.ParentSpanID)
	}
	require.EqualValues(t, 429, held.Attributes["http.response.status_code"])
	require.Equal(t, "defer", held.Attributes["simpleqd.outcome"])
	require.Equal(t, "DEFERRED", held.Attributes["simpleqd.result"])
	require.Len(t, held.Events, 1)
	ev := held.Events[0]
	require.Equal(t, "simpleqd.hold", ev.Name)
	require.Equal(t, "backpressure", ev.Attributes["simpleqd.hold.cause"])
	require.Equal(t, "webhook responded 429 (Retry-After: 1)", ev.Attributes["simpleqd.hold.reason"])
	until, err := time.Parse("2006-01-02T15:04:05.000Z07:00", ev.Attributes["simpleqd.hold.until"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, held.End.Add(time.Second), until, 500*time.Millisecond, "the hold lasts the Retry-After")

	require.EqualValues(t, 1, probe.Attributes["simpleqd.attempt"], "a defer spends no attempt")
	require.Equal(t, true, probe.Attributes["simpleqd.probe"])
	require.Equal(t, "REOPENED", probe.Attributes["simpleqd.result"])
	require.Len(t, probe.Events, 1)
	require.Equal(t, "simpleqd.probe", probe.Events[0].Name)
	require.Equal(t, true, probe.Events[0].Attributes["simpleqd.probe.reopened"])
	require.False(t, probe.Start.Before(until), "the probe went out once the hold ended")

	// The webhook saw each delivery's own span as its parent.
	ds := hook.Deliveries()
	require.Len(t, ds, 2)
	require.Equal(t, "00-"+trTraceID+"-"+held.SpanID+"-01", ds[0].Header.Get("traceparent"))
	require.Equal(t, "00-"+trTraceID+"-"+probe.SpanID+"-01", ds[1].Header.Get("traceparent"))

	// Without a traceparent: a root span of its own trace.
	id2 := trPublish(t, d, "held")
	d.WaitStatus(id2, "completed", 10*time.Second)
	root := trSpans(t, recv, id2, 1)[0]
	require.Empty(t, root.ParentSpanID)
	require.NotEqual(t, trTraceID, root.TraceID)
}

// With tracing off the webhook receives the publisher's trace context
// exactly as it was published (and none when none was), and a malformed
// traceparent neither fails the publish nor reaches the webhook.
func TestTraceParentForwardedWhenTracingIsOff(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, nil)
	d := StartInProcess(t, DaemonConfig{RedisAddr: rs.Addr, YAML: QueueYAML("plain", hook.URL)})
	a := trPublish(t, d, "plain", "traceparent", trParent, "tracestate", trState)
	d.WaitStatus(a, "completed", 10*time.Second)
	b := trPublish(t, d, "plain")
	d.WaitStatus(b, "completed", 10*time.Second)
	c := trPublish(t, d, "plain", "traceparent", "00-not-a-trace-01")
	d.WaitStatus(c, "completed", 10*time.Second)
	byJob := map[string]Delivery{}
	for _, dl := range hook.Deliveries() {
		byJob[dl.JobID] = dl
	}
	require.Equal(t, trParent, byJob[a].Header.Get("traceparent"))
	require.Equal(t, trState, byJob[a].Header.Get("tracestate"))
	require.Empty(t, byJob[b].Header.Values("traceparent"))
	require.Empty(t, byJob[c].Header.Values("traceparent"))
	require.Empty(t, byJob[c].Header.Values("tracestate"))
}

// A tracing section that does not validate stops `simpleqd check` (and
// start-up) naming the key; a valid one is shown by check.
func TestTracingConfigIsChecked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "simpleqd.yaml")
	require.NoError(t, os.WriteFile(path, []byte("tracing:\n  otlpEndpoint: http://127.0.0.1:4318\n  sampleRatio: 2\n"), 0o600))
	r := runBinary(t, nil, "check", "--config", path)
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout+r.stderr, "tracing.sampleRatio: must be between 0 and 1 (got 2)")

	require.NoError(t, os.WriteFile(path, []byte("tracing:\n  otlpEndpoint: http://127.0.0.1:4318\n  sampleRatio: 0.5\n"), 0o600))
	r = runBinary(t, nil, "check", "--config", path)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "tracing:\n  otlpEndpoint: http://127.0.0.1:4318\n  sampleRatio: 0.5\n  serviceName: simpleqd\n")
}
