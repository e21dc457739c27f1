package tracing_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/simpleq/simpleqd/internal/tracing"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// A valid traceparent comes back canonical; tracestate headers are one list.
func TestFromHeaderKeepsAValidContext(t *testing.T) {
	t.Parallel()
	p, s := tracing.FromHeader(header("Traceparent", parent, "Tracestate", "congo=t61rcWkgMzE", "Tracestate", "rojo=00f067aa0ba902b7"))
	require.Equal(t, parent, p)
	require.Equal(t, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", s)

	// A later version may carry more fields: the version-00 part is kept.
	p, _ = tracing.FromHeader(header("Traceparent", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"))
	require.Equal(t, parent, p)

	// Unsampled stays unsampled.
	p, s = tracing.FromHeader(header("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", p)
	require.Empty(t, s)
}

// Whatever does not parse is ignored, as the W3C specification says.
func TestFromHeaderIgnoresWhatDoesNotParse(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"",
		"garbage",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",           // no flags
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",        // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",        // zero span id
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",        // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // extra field in version 00
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // forbidden version
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"}\n{x", // injection attempt
	} {
		p, s := tracing.FromHeader(header("Traceparent", bad, "Tracestate", "a=b"))
		require.Empty(t, p, bad)
		require.Empty(t, s, bad)
	}
	// Two traceparent headers: which one is meant is unknown.
	p, _ := tracing.FromHeader(header("Traceparent", parent, "Traceparent", parent))
	require.Empty(t, p)
	p, _ = tracing.FromHeader(http.Header{})
	require.Empty(t, p)
}

// A malformed or too long tracestate is dropped; the traceparent is kept.
func TestFromHeaderDropsABadTraceState(t *testing.T) {
	t.Parallel()
	p, s := tracing.FromHeader(header("Traceparent", parent, "Tracestate", "not a list member"))
	require.Equal(t, parent, p)
	require.Empty(t, s)

	var members []string
	for i := range 30 {
		members = append(members, "k"+strings.Repeat("x", 3)+string(rune('a'+i%26))+string(rune('a'+i/26))+"="+strings.Repeat("v", 30))
	}
	long := strings.Join(members, ",")
	require.Greater(t, len(long), tracing.MaxTraceState)
	p, s = tracing.FromHeader(header("Traceparent", parent, "Tracestate", long))
	require.Equal(t, parent, p)
	require.Empty(t, s)
}

// Remote reads back what FromHeader stored; FormatTraceParent writes it.
func TestRemoteRoundTrip(t *testing.T) {
	t.Parallel()
	sc := tracing.Remote(parent, "congo=t61rcWkgMzE")
	require.True(t, sc.IsValid())
	require.True(t, sc.IsRemote())
	require.True(t, sc.IsSampled())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
	require.Equal(t, "congo=t61rcWkgMzE", sc.TraceState().String())
	require.Equal(t, parent, tracing.FormatTraceParent(sc))

	require.False(t, tracing.Remote("", "").IsValid())
	require.False(t, tracing.Remote("nonsense", "").IsValid())

	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	require.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", tracing.FormatTraceParent(sc))
}

func TestTracesURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://collector:4318":              "http://collector:4318/v1/traces",
		"http://collector:4318/":             "http://collector:4318/v1/traces",
		"https://otel.example.com/custom/v1": "https://otel.example.com/custom/v1",
	} {
		got, err := tracing.TracesURL(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"collector:4318", "ftp://x", "http://", "://"} {
		_, err := tracing.TracesURL(bad)
		require.Error(t, err, bad)
	}
}

// The publish path pays nothing for a request without a traceparent.
func TestFromHeaderWithoutTraceAllocatesNothing(t *testing.T) {
	h := header("Content-Type", "application/json", "Authorization", "Bearer k")
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = tracing.FromHeader(h) }))
}
