package tracing

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/simpleq/simpleqd/internal/config"
)

// InstrumentationName names simpleqd's tracer (the instrumentation scope of
// every span it exports).
const InstrumentationName = "github.com/simpleq/simpleqd"

// Provider is a daemon's span pipeline: an OpenTelemetry SDK tracer
// provider with a batching OTLP/HTTP exporter. A nil *Provider is tracing
// turned off; its methods are safe to call and do nothing, so callers need
// no second code path.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	// Endpoint is the URL spans are posted to, password hidden, for the
	// start-up log.
	Endpoint string
}

// Batching: spans wait at most batchTimeout before they are sent, in
// requests of up to maxBatch spans. maxQueue spans may wait; past that new
// ones are dropped (never blocking a delivery). At 15,000 deliveries a
// second with sampleRatio 1 a second's worth fits.
const (
	batchTimeout = time.Second
	maxBatch     = 1024
	maxQueue     = 16384
	exportWait   = 10 * time.Second
)

// New builds the span pipeline cfg describes, or returns nil when
// cfg.OTLPEndpoint is empty (tracing off). Nothing is dialled here: the
// exporter connects when it first sends, and export failures are logged
// (at most one line per failed batch), never returned to a delivery.
//
// Sampling is parent-based: a job published with a sampled traceparent is
// traced, one with an unsampled traceparent is not (its webhook still gets
// a traceparent, with the sampled flag off), and cfg.SampleRatio decides for
// jobs published without one, by trace id.
func New(ctx context.Context, cfg config.Tracing, version string, log *zap.Logger) (*Provider, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	if log == nil {
		log = zap.NewNop()
	}
	endpoint, err := TracesURL(cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	shown := endpoint // for logs: a password in the URL is hidden
	if u, err := url.Parse(endpoint); err == nil {
		shown = u.Redacted()
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithTimeout(exportWait))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later sources win: OTEL_RESOURCE_ATTRIBUTES can add attributes, and
	// tracing.serviceName names the service whatever OTEL_SERVICE_NAME says.
	res, err := resource.New(ctx,
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(
			attribute.String("service.name", cfg.ServiceName),
			attribute.String("service.version", version),
		))
	if err != nil {
		// A partial resource (an unreadable host name, say) still works.
		log.Warn("tracing: some resource attributes could not be read", zap.Error(err))
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: exporting spans failed", zap.String("endpoint", shown), zap.Error(err))
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithBatcher(exp,
			sdktrace.WithBatchTimeout(batchTimeout),
			sdktrace.WithMaxExportBatchSize(maxBatch),
			sdktrace.WithMaxQueueSize(maxQueue),
			sdktrace.WithExportTimeout(exportWait)),
	)
	return &Provider{tp: tp, tracer: tp.Tracer(InstrumentationName, trace.WithInstrumentationVersion(version)), Endpoint: shown}, nil
}

// Tracer is the tracer deliveries start their spans with; nil when tracing
// is off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Shutdown sends the spans still waiting and stops the exporter. The
// daemon calls it after the dispatcher has recorded every outcome (every
// delivery span has ended), so a stopping daemon loses no span it could
// send within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// TracesURL turns tracing.otlpEndpoint into the URL spans are posted to: a
// base URL without a path (http://collector:4318) gets OTLP's /v1/traces,
// as OTEL_EXPORTER_OTLP_ENDPOINT does; a URL with a path is used as it is,
// as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("tracing: otlpEndpoint must be an absolute http:// or https:// URL (got %q)", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
