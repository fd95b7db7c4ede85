package observe

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"

	"github.com/toolsd/toolsd/internal/textcut"
	"github.com/toolsd/toolsd/internal/tool"
)

// instrumentationName names toolsd's own tracer.
const instrumentationName = "github.com/toolsd/toolsd/internal/observe"

// serviceName is the default service.name; OTEL_SERVICE_NAME overrides it.
const serviceName = "toolsd"

// Tracing is the process's OpenTelemetry tracing: either off (every method is then a
// no-op or returns nil) or an SDK tracer provider exporting through the exporter the
// standard OTEL_* variables choose (OTEL_TRACES_EXPORTER: otlp, the default, console
// or none; OTEL_EXPORTER_OTLP_* for the endpoint and protocol; OTEL_TRACES_SAMPLER).
// Nothing is installed globally: the provider reaches the gRPC server through
// [Tracing.StatsHandler] and the pipeline through [WithTracerProvider].
type Tracing struct {
	tp      *sdktrace.TracerProvider
	handler stats.Handler
}

// TracingOption configures [SetupTracing].
type TracingOption func(*tracingOptions)

type tracingOptions struct {
	exporter sdktrace.SpanExporter
}

// WithSpanExporter exports through exp instead of the exporter OTEL_TRACES_EXPORTER
// names.
func WithSpanExporter(exp sdktrace.SpanExporter) TracingOption {
	return func(o *tracingOptions) { o.exporter = exp }
}

// SetupTracing turns tracing on when enabled (config tracing.enabled) and returns it;
// off, it returns a Tracing whose StatsHandler and TracerProvider are nil. Call
// [Tracing.Shutdown] when the process stops, to flush buffered spans.
func SetupTracing(ctx context.Context, enabled bool, opts ...TracingOption) (*Tracing, error) {
	if !enabled {
		return &Tracing{}, nil
	}
	var o tracingOptions
	for _, opt := range opts {
		opt(&o)
	}
	exp := o.exporter
	if exp == nil {
		var err error
		if exp, err = autoexport.NewSpanExporter(ctx); err != nil {
			return nil, fmt.Errorf("observe: trace exporter: %w", err)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("observe: trace resource: %w", err), exp.Shutdown(ctx))
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if autoexport.IsNoneSpanExporter(exp) {
		_ = exp.Shutdown(ctx)
	} else {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	h := otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		// RPC metrics come from the Prometheus interceptors; health probes make no spans.
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(filters.Not(filters.HealthCheck())),
	)
	return &Tracing{tp: tp, handler: h}, nil
}

// Enabled reports whether tracing is on.
func (t *Tracing) Enabled() bool { return t != nil && t.tp != nil }

// StatsHandler is the gRPC server's OpenTelemetry stats handler (one span per RPC,
// continuing the caller's W3C trace context); nil when tracing is off.
func (t *Tracing) StatsHandler() stats.Handler {
	if !t.Enabled() {
		return nil
	}
	return t.handler
}

// TracerProvider is the provider for [WithTracerProvider]; nil when tracing is off.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return nil
	}
	return t.tp
}

// Shutdown flushes buffered spans and stops the exporter, within ctx's deadline.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("observe: tracing shutdown: %w", err)
	}
	return nil
}

// callAttributes describe a call on its span, after OpenTelemetry's GenAI conventions
// for tool execution plus toolsd's own coordinates. Arguments are never recorded.
func callAttributes(e *tool.Exec) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", textcut.Ellipsis(e.Name, textcut.MaxLoggedID)),
		attribute.String("gen_ai.tool.call.id", textcut.Ellipsis(e.CallID, textcut.MaxLoggedID)),
		attribute.String("toolsd.session_id", e.SessionID),
		attribute.String("toolsd.scope", e.Scope),
		attribute.String("toolsd.batch_id", e.BatchID),
		attribute.Int64("toolsd.turn", int64(e.Turn)),
		attribute.Int64("toolsd.step", int64(e.Step)),
		attribute.Int("toolsd.call_index", e.Index),
	}
}

// endSpan records the outcome: the provider, the result code and, for an error
// result, an error status naming only the code (messages may quote payloads).
func endSpan(s trace.Span, owner string, r tool.Result) {
	code := codeLabel(r.Code())
	s.SetAttributes(attribute.String("toolsd.provider", owner), attribute.String("toolsd.result_code", code))
	if r.IsError {
		s.SetAttributes(attribute.String("error.type", code))
		s.SetStatus(otelcodes.Error, code)
	}
	s.End()
}
