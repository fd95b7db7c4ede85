package observe

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
	"google.golang.org/grpc"
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
	// served holds the full names ("/service/method") of the methods the server
	// serves, set by [Tracing.TraceServices]; once it is set the handler traces no
	// other.
	served atomic.Pointer[map[string]struct{}]
}

// TracingOption configures [SetupTracing].
type TracingOption func(*tracingOptions)

type tracingOptions struct {
	exporter  sdktrace.SpanExporter
	processor sdktrace.SpanProcessor
}

// WithSpanExporter exports through exp instead of the exporter OTEL_TRACES_EXPORTER
// names.
func WithSpanExporter(exp sdktrace.SpanExporter) TracingOption {
	return func(o *tracingOptions) { o.exporter = exp }
}

// WithSpanProcessor adds sp to the tracer provider's processors, beside the exporter's:
// tests see spans as they start with it (an exporter sees only ended ones).
func WithSpanProcessor(sp sdktrace.SpanProcessor) TracingOption {
	return func(o *tracingOptions) { o.processor = sp }
}

// CheckTracing reports what [SetupTracing] would refuse of enabled tracing, with opts,
// without turning it on: the exporter the OTEL_* variables name (built and shut down
// again) and the resource they describe. A config reload, which leaves tracing as it
// started, refuses with it a file that the next start would refuse.
func CheckTracing(ctx context.Context, enabled bool, opts ...TracingOption) error {
	if !enabled {
		return nil
	}
	var o tracingOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.exporter == nil {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return fmt.Errorf("observe: trace exporter: %w", err)
		}
		_ = exp.Shutdown(ctx)
	}
	_, err := tracingResource(ctx)
	return err
}

// tracingResource describes toolsd's spans: its service name, the OTEL_* variables'
// attributes over it, and the SDK's.
func tracingResource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("observe: trace resource: %w", err)
	}
	return res, nil
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
	res, err := tracingResource(ctx)
	if err != nil {
		return nil, errors.Join(err, exp.Shutdown(ctx))
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if autoexport.IsNoneSpanExporter(exp) {
		_ = exp.Shutdown(ctx)
	} else {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	if o.processor != nil {
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(o.processor))
	}
	t := &Tracing{tp: sdktrace.NewTracerProvider(tpOpts...)}
	t.handler = otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.tp),
		otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		// RPC metrics come from the Prometheus interceptors; health probes make no spans.
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(filters.All(t.isServed, filters.Not(filters.HealthCheck()))),
	)
	return t, nil
}

// TraceServices names the services whose methods the stats handler traces, as
// [grpc.Server.GetServiceInfo] reports them once every service is registered; until
// it is called the handler traces every method. gRPC hands an RPC to the stats handler
// before it looks the method up and never ends the RPC of a method it does not serve,
// so a span started for one (a client may invent any number) would never end.
func (t *Tracing) TraceServices(services map[string]grpc.ServiceInfo) {
	if !t.Enabled() {
		return
	}
	served := make(map[string]struct{})
	for name, svc := range services {
		for _, m := range svc.Methods {
			served["/"+name+"/"+m.Name] = struct{}{}
		}
	}
	t.served.Store(&served)
}

// isServed reports whether the RPC calls a method named to [Tracing.TraceServices], or
// any method before it was called: a server that never names its services is traced
// whole rather than not at all.
func (t *Tracing) isServed(info *stats.RPCTagInfo) bool {
	served := t.served.Load()
	if served == nil {
		return true
	}
	_, ok := (*served)[info.FullMethodName]
	return ok
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

// TraceContext returns the W3C Trace Context headers (traceparent, and tracestate when
// the trace has one) of the span in ctx, for a provider or hook to continue the call's
// trace in; nil when tracing is off or ctx holds no valid span context. An unsampled
// span's context is given too: its flags tell the provider not to sample either.
func (t *Tracing) TraceContext(ctx context.Context) map[string]string {
	if !t.Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := make(propagation.MapCarrier, 2)
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier
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
