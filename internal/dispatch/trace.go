package dispatch

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/store"
	"github.com/simpleq/simpleqd/internal/tracing"
)

// Span names, event names and attribute keys of a delivery span. The HTTP
// ones follow OpenTelemetry's semantic conventions for HTTP clients; the
// simpleqd ones say what the state machine made of the answer.
const (
	eventHold  = "simpleqd.hold"
	eventProbe = "simpleqd.probe"

	attrQueue       = attribute.Key("simpleqd.queue")
	attrJobID       = attribute.Key("simpleqd.job.id")
	attrAttempt     = attribute.Key("simpleqd.attempt")
	attrProbe       = attribute.Key("simpleqd.probe")
	attrOutcome     = attribute.Key("simpleqd.outcome")
	attrResult      = attribute.Key("simpleqd.result")
	attrHoldUntil   = attribute.Key("simpleqd.hold.until")
	attrHoldReason  = attribute.Key("simpleqd.hold.reason")
	attrHoldCause   = attribute.Key("simpleqd.hold.cause")
	attrReopened    = attribute.Key("simpleqd.probe.reopened")
	attrStatusCode  = attribute.Key("http.response.status_code")
	attrErrorType   = attribute.Key("error.type")
	attrMethod      = attribute.Key("http.request.method")
	attrServerAddr  = attribute.Key("server.address")
	attrServerPort  = attribute.Key("server.port")
	attrURLFull     = attribute.Key("url.full")
	holdTimeLayout  = "2006-01-02T15:04:05.000Z07:00"
	holdCauseDefer  = "backpressure"
	holdCauseBreak  = "breaker"
	spanNamePrefix  = "deliver "
	methodPOSTValue = "POST"
)

// WithTracer makes every delivery a client span of t (nil: tracing off, the
// default). The span's parent is the publisher's span when the job carries
// a traceparent; the webhook receives the span's own context as
// traceparent. The span stays open until the pump has recorded the
// outcome, so that a hold or a probe's result becomes one of its events.
// Call it before the first delivery.
func (d *Deliverer) WithTracer(t trace.Tracer) *Deliverer {
	d.tracer = t
	return d
}

// span is one delivery's client span, from just before the POST until its
// outcome is recorded.
type span struct {
	s trace.Span
	// at is when the webhook answered (or the attempt failed): the span's
	// end time, and the time of its events, because that answer is what
	// held the queue or reopened it, not the moment Redis recorded it.
	at time.Time
}

// webhookAttrs are a queue's span name and webhook attributes, formatted
// once per queue and URL rather than per delivery.
type webhookAttrs struct {
	name  string
	attrs []attribute.KeyValue
}

type webhookKey struct{ queue, url string }

// traceCache holds webhookAttrs per queue and URL (a reload may change
// either); only a traced daemon fills it.
type traceCache struct {
	mu sync.RWMutex
	m  map[webhookKey]*webhookAttrs
}

func (c *traceCache) get(q config.Queue) *webhookAttrs {
	k := webhookKey{q.Name, q.WebhookURL}
	c.mu.RLock()
	w := c.m[k]
	c.mu.RUnlock()
	if w != nil {
		return w
	}
	w = &webhookAttrs{name: spanNamePrefix + q.Name, attrs: []attribute.KeyValue{
		attrQueue.String(q.Name), attrMethod.String(methodPOSTValue)}}
	if u, err := url.Parse(q.WebhookURL); err == nil {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		w.attrs = append(w.attrs, attrServerAddr.String(host))
		if n, err := strconv.Atoi(port); err == nil {
			w.attrs = append(w.attrs, attrServerPort.Int(n))
		}
		// No credentials and no query: webhook URLs often carry a token.
		w.attrs = append(w.attrs, attrURLFull.String(u.Scheme+"://"+joinHostPort(host, u.Port())+u.EscapedPath()))
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[webhookKey]*webhookAttrs{}
	}
	c.m[k] = w
	c.mu.Unlock()
	return w
}

func joinHostPort(host, port string) string {
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// startSpan starts the client span of one delivery; only called with a
// tracer. The publisher's context, when the job has one, is the parent.
func (d *Deliverer) startSpan(q config.Queue, j store.ClaimedJob) *span {
	w := d.traceAttrs.get(q)
	attrs := make([]attribute.KeyValue, 0, len(w.attrs)+3)
	attrs = append(attrs, w.attrs...)
	attrs = append(attrs, attrJobID.String(j.ID), attrAttempt.Int(j.Attempt))
	if j.Probe {
		attrs = append(attrs, attrProbe.Bool(true))
	}
	ctx := context.Background()
	if parent := tracing.Remote(j.TraceParent, j.TraceState); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	_, s := d.tracer.Start(ctx, w.name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return &span{s: s}
}

// setTraceHeaders gives the webhook its traceparent (and tracestate): the
// delivery span's context while tracing is on; with tracing off, the
// publisher's own context unchanged, which costs nothing and still lets the
// webhook's trace join the publisher's (simpleqd then does not appear in
// it). A job without a trace context gets neither header while tracing is
// off.
func setTraceHeaders(h *fasthttp.RequestHeader, sp *span, j store.ClaimedJob) {
	if sp == nil {
		if j.TraceParent != "" {
			h.Set(tracing.TraceParentHeader, j.TraceParent)
			if j.TraceState != "" {
				h.Set(tracing.TraceStateHeader, j.TraceState)
			}
		}
		return
	}
	sc := sp.s.SpanContext()
	if !sc.IsValid() {
		return
	}
	h.Set(tracing.TraceParentHeader, tracing.FormatTraceParent(sc))
	if ts := sc.TraceState().String(); ts != "" {
		h.Set(tracing.TraceStateHeader, ts)
	}
}

// answered notes that the webhook's answer (or the failure) is in.
func (sp *span) answered() {
	if sp != nil {
		sp.at = time.Now()
	}
}

// end records what the delivery came to and ends the span: the HTTP
// status, the outcome as classified, the settle word s.Word when the
// outcome was recorded ("" when it was not, or not by this caller), and
// the events: simpleqd.hold when this answer held the queue (a
// 429/503/529, DEFERRED, or a failure that tripped the breaker,
// s.BreakerUntil) and simpleqd.probe when the delivery was the held
// queue's probe.
func (sp *span) end(out store.Outcome, s store.Settled, probe bool) {
	if sp == nil {
		return
	}
	if sp.at.IsZero() {
		sp.at = time.Now()
	}
	if !sp.s.IsRecording() {
		sp.s.End()
		return
	}
	at := trace.WithTimestamp(sp.at)
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, attrOutcome.String(string(out.Kind)))
	if out.StatusCode > 0 {
		attrs = append(attrs, attrStatusCode.Int(out.StatusCode))
	}
	if s.Word != "" {
		attrs = append(attrs, attrResult.String(string(s.Word)))
	}
	if out.Kind == store.OutcomeFail {
		errType := "connection"
		switch {
		case out.StatusCode > 0:
			errType = strconv.Itoa(out.StatusCode)
		case strings.HasPrefix(out.Error, "timeout"):
			errType = "timeout"
		}
		attrs = append(attrs, attrErrorType.String(errType))
		sp.s.SetStatus(codes.Error, out.Error)
	}
	sp.s.SetAttributes(attrs...)
	if s.Word == store.Deferred {
		ev := []attribute.KeyValue{attrHoldCause.String(holdCauseDefer), attrHoldReason.String(out.Reason)}
		if ms, err := strconv.ParseInt(s.Detail, 10, 64); err == nil {
			ev = append(ev, attrHoldUntil.String(time.UnixMilli(ms).UTC().Format(holdTimeLayout)))
		}
		sp.s.AddEvent(eventHold, at, trace.WithAttributes(ev...))
	}
	if !s.BreakerUntil.IsZero() {
		sp.s.AddEvent(eventHold, at, trace.WithAttributes(
			attrHoldCause.String(holdCauseBreak),
			attrHoldReason.String("breaker: consecutive failures; last: "+out.Error),
			attrHoldUntil.String(s.BreakerUntil.UTC().Format(holdTimeLayout))))
	}
	if probe {
		sp.s.AddEvent(eventProbe, at, trace.WithAttributes(attrReopened.Bool(s.Word == store.Reopened), attrResult.String(string(s.Word))))
	}
	sp.s.End(at)
}
