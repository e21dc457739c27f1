package tracing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/otlptest"
	"github.com/simpleq/simpleqd/internal/tracing"
)

// Tracing off is a nil Provider whose methods do nothing.
func TestProviderOff(t *testing.T) {
	t.Parallel()
	p, err := tracing.New(context.Background(), config.Tracing{SampleRatio: 1, ServiceName: "x"}, "v", nil)
	require.NoError(t, err)
	require.Nil(t, p)
	require.Nil(t, p.Tracer())
	require.NoError(t, p.Shutdown(context.Background()))
}

// Spans reach an OTLP/HTTP receiver as protobuf, under the configured
// service name, and Shutdown sends what is still batched.
func TestProviderExportsOverOTLPHTTP(t *testing.T) {
	t.Parallel()
	recv := otlptest.New(t)
	p, err := tracing.New(context.Background(), config.Tracing{OTLPEndpoint: recv.URL, SampleRatio: 1, ServiceName: "simpleqd-test"}, "1.2.3", nil)
	require.NoError(t, err)
	require.Equal(t, recv.URL+"/v1/traces", p.Endpoint)

	parent := tracing.Remote("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	_, span := p.Tracer().Start(ctx, "deliver q", trace.WithSpanKind(trace.SpanKindClient))
	span.AddEvent("simpleqd.probe")
	span.End()

	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Shutdown(sctx))
	spans := recv.Spans()
	require.Len(t, spans, 1)
	s := spans[0]
	require.Equal(t, "simpleqd-test", s.Service)
	require.Equal(t, "deliver q", s.Name)
	require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, s.Kind)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.TraceID)
	require.Equal(t, "00f067aa0ba902b7", s.ParentSpanID)
	require.Len(t, s.Events, 1)
}

// The publisher's sampling decision is followed; sampleRatio decides for
// traces that start here.
func TestProviderSampling(t *testing.T) {
	t.Parallel()
	recv := otlptest.New(t)
	p, err := tracing.New(context.Background(), config.Tracing{OTLPEndpoint: recv.URL, SampleRatio: 0, ServiceName: "s"}, "v", nil)
	require.NoError(t, err)
	sampled := trace.ContextWithRemoteSpanContext(context.Background(),
		tracing.Remote("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""))
	unsampled := trace.ContextWithRemoteSpanContext(context.Background(),
		tracing.Remote("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""))
	_, a := p.Tracer().Start(sampled, "a")
	_, b := p.Tracer().Start(unsampled, "b")
	_, c := p.Tracer().Start(context.Background(), "c")
	require.True(t, a.IsRecording())
	require.False(t, b.IsRecording())
	require.False(t, c.IsRecording())
	// An unsampled span still has its own id to hand on.
	require.True(t, b.SpanContext().IsValid())
	require.NotEqual(t, "00f067aa0ba902b7", b.SpanContext().SpanID().String())
	a.End()
	b.End()
	c.End()
	require.NoError(t, p.Shutdown(context.Background()))
	require.Len(t, recv.Spans(), 1)
}

// A password in the endpoint URL stays out of the start-up log.
func TestProviderEndpointIsShownRedacted(t *testing.T) {
	t.Parallel()
	p, err := tracing.New(context.Background(), config.Tracing{OTLPEndpoint: "http://u:secret@127.0.0.1:1", SampleRatio: 1, ServiceName: "s"}, "v", nil)
	require.NoError(t, err)
	require.Equal(t, "http://u:xxxxx@127.0.0.1:1/v1/traces", p.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, p.Shutdown(ctx))
}
