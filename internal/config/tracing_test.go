package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tracing is off by default, samples everything once on, and reads its
// keys from the file and the environment.
func TestTracingSection(t *testing.T) {
	t.Parallel()
	c, err := Load("", nil)
	require.NoError(t, err)
	require.Equal(t, Tracing{SampleRatio: 1, ServiceName: "simpleqd"}, c.Tracing)

	c, err = load(t, "tracing:\n  otlpEndpoint: http://collector:4318\n  sampleRatio: 0.25\n  serviceName: jobs\n", nil)
	require.NoError(t, err)
	require.Equal(t, Tracing{OTLPEndpoint: "http://collector:4318", SampleRatio: 0.25, ServiceName: "jobs"}, c.Tracing)

	c, err = load(t, "", map[string]string{"SIMPLEQ_TRACING_OTLPENDPOINT": "https://otel.example.com/v1/traces",
		"SIMPLEQ_TRACING_SAMPLERATIO": "0.5"})
	require.NoError(t, err)
	require.Equal(t, "https://otel.example.com/v1/traces", c.Tracing.OTLPEndpoint)
	require.Equal(t, 0.5, c.Tracing.SampleRatio)

	// An integer ratio is a number too.
	c, err = load(t, "tracing:\n  sampleRatio: 0\n", nil)
	require.NoError(t, err)
	require.Equal(t, 0.0, c.Tracing.SampleRatio)
}

// Every broken tracing key is named, with what it must be.
func TestTracingValidation(t *testing.T) {
	t.Parallel()
	got := problems(t, "tracing:\n  otlpEndpoint: collector:4318\n  sampleRatio: 1.5\n  serviceName: \" \"\n", nil)
	requireProblem(t, got, "tracing.otlpEndpoint", "absolute http:// or https:// URL", `"collector:4318"`)
	requireProblem(t, got, "tracing.sampleRatio", "between 0 and 1", "1.5")
	requireProblem(t, got, "tracing.serviceName", "must not be empty")

	got = problems(t, "tracing:\n  sampleRatio: -0.1\n", nil)
	requireProblem(t, got, "tracing.sampleRatio", "between 0 and 1", "-0.1")
	got = problems(t, "tracing:\n  sampleRatio: lots\n", nil)
	requireProblem(t, got, "tracing.sampleRatio", "must be a number", `"lots"`)
	got = problems(t, "", map[string]string{"SIMPLEQ_TRACING_SAMPLERATIO": "2"})
	requireProblem(t, got, "tracing.sampleRatio (from SIMPLEQ_TRACING_SAMPLERATIO)", "between 0 and 1")
	got = problems(t, "tracing:\n  otlpEndpiont: http://c:4318\n", nil)
	requireProblem(t, got, "tracing.otlpEndpiont", `did you mean "otlpEndpoint"`)

	// With tracing off an empty service name harms nobody.
	_, err := load(t, "tracing:\n  serviceName: \"\"\n", nil)
	require.NoError(t, err)
}

// check and the start-up log show the section; the rendering loads again.
func TestTracingRedacted(t *testing.T) {
	t.Parallel()
	c, err := load(t, "tracing:\n  otlpEndpoint: http://user:secret@collector:4318\n  sampleRatio: 0.1\n", nil)
	require.NoError(t, err)
	out := c.Redacted()
	require.Contains(t, out, "tracing:\n  otlpEndpoint: http://user:xxxxx@collector:4318\n  sampleRatio: 0.1\n  serviceName: simpleqd\n")
	require.False(t, strings.Contains(out, "secret"))
	again, err := load(t, out, nil)
	require.NoError(t, err)
	require.Equal(t, 0.1, again.Tracing.SampleRatio)
}
