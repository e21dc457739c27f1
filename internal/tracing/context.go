// Package tracing carries W3C Trace Context through simpleqd and exports
// delivery spans with OpenTelemetry's Go SDK over OTLP/HTTP.
//
// The path of a traced job: the publish request's traceparent (and
// tracestate) is validated here ([FromHeader]) and stored with the job in its
// record (lua/lib.lua, members tp and ts); every delivery of the job is a
// client span whose parent is the publisher's span (package dispatch), and the
// span's own context goes to the webhook as traceparent, so the webhook's
// trace joins the publisher's. A daemon whose tracing is off still stores the
// publisher's context and forwards it to the webhook unchanged: that costs
// one header per traced delivery and keeps the publisher's and the webhook's
// traces joined.
package tracing

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C Trace Context header names, as sent to webhooks (lowercase, as the
// specification writes them) and read from publish requests.
const (
	TraceParentHeader = "traceparent"
	TraceStateHeader  = "tracestate"
)

// MaxTraceState is the longest tracestate kept with a job. The W3C
// specification asks vendors to propagate at least 512 characters and lets
// them drop longer ones; a longer value is dropped whole (the traceparent is
// kept), so a job record never grows by more than this for its trace.
const MaxTraceState = 512

// FromHeader returns the W3C trace context of a publish request in canonical
// form: traceparent as "00-<trace id>-<span id>-<flags>" (55 characters of
// [0-9a-f-]) and tracestate as OpenTelemetry re-renders it, or "" for none.
//
// A missing, repeated or malformed traceparent yields "", "" and is not an
// error: SimpleQ clients never send one, proxies and meshes may add odd
// ones, and ignoring what does not parse is what the specification and
// OpenTelemetry's propagators do. A malformed or too long tracestate is
// dropped and the traceparent kept. A request without the header costs one
// map lookup.
func FromHeader(h http.Header) (parent, state string) {
	// The canonical keys, looked up as they are: Values would canonicalize
	// "traceparent" on every request, an allocation each.
	vals := h["Traceparent"]
	if len(vals) != 1 || vals[0] == "" {
		return "", ""
	}
	c := carrier{parent: vals[0], state: strings.Join(h["Tracestate"], ",")}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
	if !sc.IsValid() {
		return "", ""
	}
	state = sc.TraceState().String()
	if len(state) > MaxTraceState {
		state = ""
	}
	return FormatTraceParent(sc), state
}

// carrier hands the propagator one traceparent and the request's tracestate
// headers joined (several tracestate headers are one list, RFC 9110 §5.3).
type carrier struct{ parent, state string }

func (c carrier) Get(key string) string {
	switch key {
	case TraceParentHeader:
		return c.parent
	case TraceStateHeader:
		return c.state
	}
	return ""
}

func (carrier) Set(string, string) {}
func (carrier) Keys() []string     { return []string{TraceParentHeader, TraceStateHeader} }

// FormatTraceParent renders sc as a version-00 traceparent value. It is
// what propagation.TraceContext writes, without a context and a carrier.
func FormatTraceParent(sc trace.SpanContext) string {
	const hex = "0123456789abcdef"
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, x := range tid {
		b[3+2*i], b[4+2*i] = hex[x>>4], hex[x&0xf]
	}
	b[35] = '-'
	for i, x := range sid {
		b[36+2*i], b[37+2*i] = hex[x>>4], hex[x&0xf]
	}
	b[52] = '-'
	f := byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))
	b[53], b[54] = hex[f>>4], hex[f&0xf]
	return string(b[:])
}

// Remote rebuilds the publisher's span context from the values FromHeader
// returned (as stored with the job), marked remote, for use as the parent
// of a delivery span. Anything that does not parse gives an invalid
// context: the delivery span is then a root.
func Remote(parent, state string) trace.SpanContext {
	if parent == "" {
		return trace.SpanContext{}
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		carrier{parent: parent, state: state}))
	return sc
}
