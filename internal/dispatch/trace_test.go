package dispatch_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/dispatch"
	"github.com/simpleq/simpleqd/internal/store"
)

const (
	pubTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	pubSpan  = "00f067aa0ba902b7"
	pubTP    = "00-" + pubTrace + "-" + pubSpan + "-01"
)

// headerHook records the trace headers of every delivery and answers with
// the status code the path names (/200, /429, /500), or for /by-job the
// code codes gives the job (by its X-Simpleq-Job-Id).
type headerHook struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
	states  []string
	codes   map[string]int
}

func newHeaderHook(t *testing.T) *headerHook {
	h := &headerHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.parents = append(h.parents, r.Header.Get("traceparent"))
		h.states = append(h.states, r.Header.Get("tracestate"))
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if r.URL.Path == "/by-job" {
			code = h.codes[r.Header.Get("X-Simpleq-Job-Id")]
		}
		h.mu.Unlock()
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		if code != 0 {
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *headerHook) seen() ([]string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.parents...), append([]string(nil), h.states...)
}

func recorder(t *testing.T) (*tracetest.SpanRecorder, trace.Tracer) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp.Tracer("test")
}

func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// A delivery is a client span, child of the publisher's span, whose own
// context (same trace, new span id) reaches the webhook as traceparent.
func TestDeliverySpanJoinsThePublishersTrace(t *testing.T) {
	t.Parallel()
	hook := newHeaderHook(t)
	rec, tracer := recorder(t)
	d := dispatch.NewDeliverer("t").WithTracer(tracer)
	j := testJob()
	j.TraceParent, j.TraceState, j.Attempt = pubTP, "congo=t61rcWkgMzE", 2
	q := testQueue(hook.URL + "/200")
	q.Name = "emails"
	out := d.Deliver(context.Background(), q, j)
	require.Equal(t, store.OutcomeOK, out.Kind)

	spans := rec.Ended()
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, "deliver emails", s.Name())
	require.Equal(t, trace.SpanKindClient, s.SpanKind())
	require.Equal(t, pubTrace, s.Parent().TraceID().String())
	require.Equal(t, pubSpan, s.Parent().SpanID().String())
	require.True(t, s.Parent().IsRemote())
	require.Equal(t, pubTrace, s.SpanContext().TraceID().String())
	require.NotEqual(t, pubSpan, s.SpanContext().SpanID().String())

	parents, states := hook.seen()
	require.Equal(t, []string{"00-" + pubTrace + "-" + s.SpanContext().SpanID().String() + "-01"}, parents)
	require.Equal(t, []string{"congo=t61rcWkgMzE"}, states)

	a := attrMap(s.Attributes())
	require.Equal(t, "emails", a["simpleqd.queue"])
	require.Equal(t, j.ID, a["simpleqd.job.id"])
	require.EqualValues(t, 2, a["simpleqd.attempt"])
	require.EqualValues(t, 200, a["http.response.status_code"])
	require.Equal(t, "ok", a["simpleqd.outcome"])
	require.Equal(t, "POST", a["http.request.method"])
	require.Equal(t, "127.0.0.1", a["server.address"])
	require.Equal(t, hook.URL+"/200", a["url.full"])
	require.NotContains(t, a, "simpleqd.probe")
	require.Equal(t, codes.Unset, s.Status().Code)
	require.False(t, s.EndTime().Before(s.StartTime()))
}

// A job published without a traceparent is a root span; a failure marks
// the span as an error; the URL's credentials and query stay out of it.
func TestDeliverySpanWithoutAPublisher(t *testing.T) {
	t.Parallel()
	hook := newHeaderHook(t)
	rec, tracer := recorder(t)
	d := dispatch.NewDeliverer("t").WithTracer(tracer)
	q := testQueue(strings.Replace(hook.URL, "http://", "http://user:pw@", 1) + "/500?token=secret")
	out := d.Deliver(context.Background(), q, testJob())
	require.Equal(t, store.OutcomeFail, out.Kind)
	s := rec.Ended()[0]
	require.False(t, s.Parent().IsValid())
	require.Equal(t, codes.Error, s.Status().Code)
	require.Contains(t, s.Status().Description, "webhook responded 500")
	a := attrMap(s.Attributes())
	require.Equal(t, "500", a["error.type"])
	require.Equal(t, "fail", a["simpleqd.outcome"])
	require.Equal(t, hook.URL+"/500", a["url.full"])
	parents, _ := hook.seen()
	require.Equal(t, "00-"+s.SpanContext().TraceID().String()+"-"+s.SpanContext().SpanID().String()+"-01", parents[0])
}

// With tracing off the publisher's context goes to the webhook exactly as
// it was published; a job without one sends no trace header at all.
func TestTracingOffForwardsThePublishersContext(t *testing.T) {
	t.Parallel()
	hook := newHeaderHook(t)
	d := dispatch.NewDeliverer("t")
	q := testQueue(hook.URL + "/200")
	j := testJob()
	j.TraceParent, j.TraceState = pubTP, "congo=t61rcWkgMzE"
	require.Equal(t, store.OutcomeOK, d.Deliver(context.Background(), q, j).Kind)
	require.Equal(t, store.OutcomeOK, d.Deliver(context.Background(), q, testJob()).Kind)
	parents, states := hook.seen()
	require.Equal(t, []string{pubTP, ""}, parents)
	require.Equal(t, []string{"congo=t61rcWkgMzE", ""}, states)
}

// scriptedStore hands out its jobs one claim at a time and settles each
// with the next scripted result.
type scriptedStore struct {
	mu      sync.Mutex
	jobs    []store.ClaimedJob
	results []store.Settled
}

func (s *scriptedStore) NewCall() string { return "call" }

func (s *scriptedStore) ClaimCall(_ context.Context, _ store.QueueParams, p store.ClaimParams) (store.ClaimResult, error) {
	max := p.Max
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.jobs) == 0 || max == 0 {
		return store.ClaimResult{Word: store.Empty, WakeIn: 10 * time.Millisecond}, nil
	}
	j := s.jobs[0]
	s.jobs = s.jobs[1:]
	return store.ClaimResult{Word: store.Claimed, Jobs: []store.ClaimedJob{j}, WakeIn: 10 * time.Millisecond}, nil
}

func (s *scriptedStore) SettleAndClaim(_ context.Context, _ store.QueueParams, outs []store.Outcome, _ store.Refill) ([]store.Settled, store.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := make([]store.Settled, len(outs))
	for i := range outs {
		res[i] = s.results[0]
		s.results = s.results[1:]
	}
	return res, store.ClaimResult{Word: store.Empty, WakeIn: 10 * time.Millisecond}, nil
}

// The state machine's verdict lands on the span of the delivery that
// caused it: a 429 that held the queue, a failure that tripped the breaker
// and a probe that reopened the queue are events, at the answer's time.
func TestHoldAndProbeAreSpanEvents(t *testing.T) {
	t.Parallel()
	hook := newHeaderHook(t)
	rec, tracer := recorder(t)
	until := time.UnixMilli(1764620001000)
	breakerUntil := time.UnixMilli(1764620030000)
	job := func(id string, probe bool) store.ClaimedJob {
		j := testJob()
		j.ID, j.Probe, j.TraceParent = id, probe, pubTP
		return j
	}
	hook.codes = map[string]int{"job_1_q": 429, "job_2_q": 500, "job_3_q": 200}
	st := &scriptedStore{
		jobs: []store.ClaimedJob{job("job_1_q", false), job("job_2_q", true), job("job_3_q", true)},
		results: []store.Settled{
			{Word: "DEFERRED", Detail: "1764620001000"},
			{Word: "RETRY", Detail: "1764620002000", BreakerUntil: breakerUntil},
			{Word: "REOPENED"},
		},
	}

	d := dispatch.New(dispatch.Options{Store: st, Deliverer: dispatch.NewDeliverer("t").WithTracer(tracer), Linger: -1})
	q := testQueue(hook.URL + "/by-job")
	q.Concurrency = 1
	d.SetQueues(map[string]config.Queue{"q": q})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return len(rec.Ended()) == 3 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done

	byJob := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byJob[attrMap(s.Attributes())["simpleqd.job.id"].(string)] = s
	}
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			require.Equal(t, s.EndTime(), e.Time, "events carry the answer's time, the span's end")
		}
	}

	held := byJob["job_1_q"]
	require.Equal(t, "DEFERRED", attrMap(held.Attributes())["simpleqd.result"])
	require.EqualValues(t, 429, attrMap(held.Attributes())["http.response.status_code"])
	require.Len(t, held.Events(), 1)
	ev := attrMap(held.Events()[0].Attributes)
	require.Equal(t, "simpleqd.hold", held.Events()[0].Name)
	require.Equal(t, "backpressure", ev["simpleqd.hold.cause"])
	require.Equal(t, until.UTC().Format("2006-01-02T15:04:05.000Z07:00"), ev["simpleqd.hold.until"])
	require.Equal(t, "webhook responded 429 (Retry-After: 1)", ev["simpleqd.hold.reason"])

	failed := byJob["job_2_q"]
	require.Equal(t, true, attrMap(failed.Attributes())["simpleqd.probe"])
	require.Len(t, failed.Events(), 2)
	var names []string
	for _, e := range failed.Events() {
		names = append(names, e.Name)
		a := attrMap(e.Attributes)
		switch e.Name {
		case "simpleqd.hold":
			require.Equal(t, "breaker", a["simpleqd.hold.cause"])
			require.Equal(t, breakerUntil.UTC().Format("2006-01-02T15:04:05.000Z07:00"), a["simpleqd.hold.until"])
			require.Contains(t, a["simpleqd.hold.reason"], "webhook responded 500")
		case "simpleqd.probe":
			require.Equal(t, false, a["simpleqd.probe.reopened"])
			require.Equal(t, "RETRY", a["simpleqd.result"])
		}
	}
	require.ElementsMatch(t, []string{"simpleqd.hold", "simpleqd.probe"}, names)

	reopened := byJob["job_3_q"]
	require.Len(t, reopened.Events(), 1)
	require.Equal(t, "simpleqd.probe", reopened.Events()[0].Name)
	require.Equal(t, true, attrMap(reopened.Events()[0].Attributes)["simpleqd.probe.reopened"])
	require.Equal(t, "REOPENED", attrMap(reopened.Attributes())["simpleqd.result"])
	for _, s := range rec.Ended() {
		require.Equal(t, pubSpan, s.Parent().SpanID().String())
	}
}
