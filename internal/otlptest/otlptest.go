// Package otlptest is an OTLP/HTTP trace receiver for tests: an httptest
// server on 127.0.0.1 that decodes each protobuf ExportTraceServiceRequest
// (go.opentelemetry.io/proto/otlp) and keeps its spans, so tests check what
// a daemon really exported over the wire rather than what its SDK meant to.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its service, flattened for assertions.
type Span struct {
	Service      string
	Name         string
	Kind         tracepb.Span_SpanKind
	TraceID      string // hex
	SpanID       string // hex
	ParentSpanID string // hex, "" for a root
	Attributes   map[string]any
	Events       []Event
	Status       *tracepb.Status
	Start, End   time.Time
}

// Event is one span event.
type Event struct {
	Name       string
	Time       time.Time
	Attributes map[string]any
}

// Receiver collects the spans posted to URL.
type Receiver struct {
	// URL is the receiver's base URL (http://127.0.0.1:port), the form
	// tracing.otlpEndpoint takes; spans are accepted on /v1/traces.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
}

// New starts a receiver on loopback, closed when the test ends.
func New(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	t.Cleanup(r.srv.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range ex.GetResourceSpans() {
		service, _ := attrs(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Service: service, Name: s.GetName(), Kind: s.GetKind(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Attributes: attrs(s.GetAttributes()),
					Status: s.GetStatus(),
					Start:  time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano()))}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, Event{Name: e.GetName(), Time: time.Unix(0, int64(e.GetTimeUnixNano())),
						Attributes: attrs(e.GetAttributes())})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attrs flattens OTLP attributes: strings, bools, int64s and float64s.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = v.BoolValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.DoubleValue
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests is how many export requests arrived.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}
