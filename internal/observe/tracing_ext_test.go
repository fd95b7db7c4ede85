package observe_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

func newRecorder(t *testing.T) (*tracetest.SpanRecorder, trace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp
}

// children returns the spans whose parent is parent, in start order.
func children(spans []sdktrace.ReadOnlySpan, parent trace.SpanContext) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().SpanID() == parent.SpanID() && s.Parent().TraceID() == parent.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

func named(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func TestCallSpanHasStageChildren(t *testing.T) {
	rec, tp := newRecorder(t)
	var providerSpan trace.SpanContext
	disp := dispatcherFunc(func(ctx context.Context, _ pipeline.Tool, _ *tool.Exec) tool.Result {
		providerSpan = trace.SpanContextFromContext(ctx)
		return tool.Result{Content: "ok"}
	})
	p := pipeline.New(tools(newTool("read", "p1")), disp,
		pipeline.WithStageTracer(observe.NewCallObserver(nil, observe.WithTracerProvider(tp))))

	ctx, rpc := tp.Tracer("test").Start(t.Context(), "rpc")
	p.Run(ctx, newExec("read", `{}`))
	rpc.End()

	spans := rec.Ended()
	calls := children(spans, rpc.SpanContext())
	if len(calls) != 1 || calls[0].Name() != "execute_tool read" {
		t.Fatalf("children of the RPC span = %v, want one execute_tool read span", calls)
	}
	call := calls[0]
	stages := children(spans, call.SpanContext())
	var names []string
	for _, s := range stages {
		names = append(names, s.Name())
	}
	if len(stages) != 3 || names[0] != "toolsd.prepare" || names[1] != "toolsd.dispatch" || names[2] != "toolsd.complete" {
		t.Fatalf("children of the call span = %v, want toolsd.prepare, toolsd.dispatch, toolsd.complete", names)
	}
	for i := 1; i < len(stages); i++ {
		if stages[i].StartTime().Before(stages[i-1].EndTime()) {
			t.Errorf("%s starts before %s ends", stages[i].Name(), stages[i-1].Name())
		}
	}
	if !providerSpan.Equal(stages[1].SpanContext()) {
		t.Errorf("the provider call ran in span %v, want the dispatch span %v", providerSpan.SpanID(), stages[1].SpanContext().SpanID())
	}
	for key, want := range map[string]string{
		"gen_ai.tool.name": "read", "gen_ai.tool.call.id": "call-9", "toolsd.session_id": "sess-1",
		"toolsd.provider": "p1", "toolsd.result_code": "OK",
	} {
		if got := attr(call, key).AsString(); got != want {
			t.Errorf("call span %s = %q, want %q", key, got, want)
		}
	}
	if call.Status().Code == otelcodes.Error {
		t.Errorf("call span status = %v for a success", call.Status())
	}
}

func TestFailedCallSpan(t *testing.T) {
	rec, tp := newRecorder(t)
	p := pipeline.New(tools(), succeed("ok"),
		pipeline.WithStageTracer(observe.NewCallObserver(nil, observe.WithTracerProvider(tp))))
	p.Run(t.Context(), newExec("missing", `{"secret":1}`))
	spans := rec.Ended()
	// The model chose the name: a span named after it would give tracing backends that
	// derive metrics from span names (span metrics) a series per invented name.
	call := named(spans, "execute_tool")
	if call == nil {
		t.Fatalf("spans = %v, want an execute_tool span", spans)
	}
	if got := attr(call, "gen_ai.tool.name").AsString(); got != "missing" {
		t.Errorf("call span's gen_ai.tool.name = %q, want the name the model sent", got)
	}
	if st := call.Status(); st.Code != otelcodes.Error || st.Description != "UNKNOWN_TOOL" {
		t.Errorf("call span status = %+v, want Error UNKNOWN_TOOL", st)
	}
	stages := children(spans, call.SpanContext())
	if len(stages) != 1 || stages[0].Name() != "toolsd.prepare" {
		t.Errorf("children of a call that never dispatched = %v, want only toolsd.prepare", stages)
	}
}

func TestSetupTracingOff(t *testing.T) {
	tr, err := observe.SetupTracing(t.Context(), false)
	if err != nil {
		t.Fatalf("SetupTracing(off) = %v", err)
	}
	if tr.Enabled() || tr.StatsHandler() != nil || tr.TracerProvider() != nil || tr.Shutdown(t.Context()) != nil {
		t.Errorf("SetupTracing(off) = enabled %v, handler %v, provider %v; want all off", tr.Enabled(), tr.StatsHandler(), tr.TracerProvider())
	}
}

func TestSetupTracingFromEnv(t *testing.T) {
	tests := map[string]struct {
		exporter string
		wantErr  bool
	}{
		"none":    {exporter: "none"},
		"otlp":    {exporter: "otlp"},
		"unknown": {exporter: "carrier-pigeon", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_EXPORTER", tc.exporter)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			tr, err := observe.SetupTracing(t.Context(), true)
			if (err != nil) != tc.wantErr {
				t.Fatalf("SetupTracing(on, %s) = %v, want error %v", tc.exporter, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if !tr.Enabled() || tr.StatsHandler() == nil || tr.TracerProvider() == nil {
				t.Errorf("SetupTracing(on, %s): enabled %v, handler %v, provider %v; want all set", tc.exporter, tr.Enabled(), tr.StatsHandler(), tr.TracerProvider())
			}
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Errorf("Shutdown() = %v", err)
			}
		})
	}
}

// keepSpans is an in-memory exporter whose spans survive the provider's shutdown.
type keepSpans struct{ *tracetest.InMemoryExporter }

func (keepSpans) Shutdown(context.Context) error { return nil }

// runnerService is a one-method gRPC service whose handler runs a call through p.
func runnerService(p *pipeline.Pipeline) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "toolsd.test.Runner",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Run",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				if err := dec(new(emptypb.Empty)); err != nil {
					return nil, err
				}
				p.Run(ctx, newExec("read", `{}`))
				return new(emptypb.Empty), nil
			},
		}},
	}
}

func TestTracingThroughGRPC(t *testing.T) {
	exp := keepSpans{tracetest.NewInMemoryExporter()}
	tr, err := observe.SetupTracing(t.Context(), true, observe.WithSpanExporter(exp))
	if err != nil {
		t.Fatalf("SetupTracing(on) = %v", err)
	}
	p := pipeline.New(tools(newTool("read", "p1")), succeed("ok"),
		pipeline.WithStageTracer(observe.NewCallObserver(nil, observe.WithTracerProvider(tr.TracerProvider()))))

	conn, stop := serveTraced(t, tr, func(srv *grpc.Server) {
		srv.RegisterService(runnerService(p), nil)
		healthpb.RegisterHealthServer(srv, health.NewServer())
	})
	if err := conn.Invoke(t.Context(), "/toolsd.test.Runner/Run", new(emptypb.Empty), new(emptypb.Empty)); err != nil {
		t.Errorf("Run() = %v", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("Check() = %v", err)
	}
	stop()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}

	spans := exp.GetSpans()
	var rpc, call tracetest.SpanStub
	for _, s := range spans {
		switch s.Name {
		case "toolsd.test.Runner/Run":
			rpc = s
		case "execute_tool read":
			call = s
		case "grpc.health.v1.Health/Check":
			t.Error("a health check was traced")
		}
	}
	stages := 0
	for _, s := range spans {
		if s.Parent.SpanID() == call.SpanContext.SpanID() {
			stages++
		}
	}
	if !rpc.SpanContext.IsValid() || !call.SpanContext.IsValid() {
		t.Fatalf("spans = %d, want the RPC's and the call's", len(spans))
	}
	if call.Parent.SpanID() != rpc.SpanContext.SpanID() {
		t.Errorf("call span's parent = %v, want the RPC span %v", call.Parent.SpanID(), rpc.SpanContext.SpanID())
	}
	if stages != 3 {
		t.Errorf("stage spans under the call = %d, want 3", stages)
	}
	if got := attr(call.Snapshot(), "toolsd.provider"); got.AsString() != "p1" {
		t.Errorf("call span toolsd.provider = %q, want p1", got.AsString())
	}
}

// TestCallSpanClipsClientChosenIDs: an invented tool name and a call id, unbounded but
// for the request size, are clipped in the span's name and attributes as in the log: a
// megabyte span could make the exporter's whole batch fail.
func TestCallSpanClipsClientChosenIDs(t *testing.T) {
	rec, tp := newRecorder(t)
	p := pipeline.New(tools(), succeed("ok"),
		pipeline.WithStageTracer(observe.NewCallObserver(nil, observe.WithTracerProvider(tp))))
	e := newExec(strings.Repeat("n", 100_000), `{}`)
	e.CallID = strings.Repeat("c", 100_000)
	p.Run(t.Context(), e)
	for _, s := range rec.Ended() {
		if len(s.Name()) > 200 {
			t.Errorf("span name is %d bytes, want it clipped", len(s.Name()))
		}
		for _, key := range []string{"gen_ai.tool.name", "gen_ai.tool.call.id"} {
			if n := len(attr(s, key).AsString()); n > 200 {
				t.Errorf("span %.30q: %s is %d bytes, want it clipped", s.Name(), key, n)
			}
		}
	}
}

// TestOnlyServedMethodsAreTraced: gRPC tags an RPC to the stats handler before it looks
// the method up, and never ends one it does not serve, so a span started for a made-up
// method stays open for the process's life; a client could open any number of them.
func TestOnlyServedMethodsAreTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr, err := observe.SetupTracing(t.Context(), true,
		observe.WithSpanExporter(keepSpans{tracetest.NewInMemoryExporter()}), observe.WithSpanProcessor(rec))
	if err != nil {
		t.Fatalf("SetupTracing(on) = %v", err)
	}
	p := pipeline.New(tools(newTool("read", "p1")), succeed("ok"))

	conn, stop := serveTraced(t, tr, func(srv *grpc.Server) { srv.RegisterService(runnerService(p), nil) })
	for _, method := range []string{"/toolsd.test.Runner/Invented", "/toolsd.test.Invented/Run"} {
		if err := conn.Invoke(t.Context(), method, new(emptypb.Empty), new(emptypb.Empty)); status.Code(err) != codes.Unimplemented {
			t.Errorf("Invoke(%s) = %v, want Unimplemented", method, err)
		}
	}
	if err := conn.Invoke(t.Context(), "/toolsd.test.Runner/Run", new(emptypb.Empty), new(emptypb.Empty)); err != nil {
		t.Errorf("Run() = %v", err)
	}
	stop()

	var started []string
	for _, s := range rec.Started() {
		started = append(started, s.Name())
		if strings.Contains(s.Name(), "Invented") {
			t.Errorf("a span %q was started for a method toolsd does not serve", s.Name())
		}
	}
	if named(rec.Ended(), "toolsd.test.Runner/Run") == nil {
		t.Errorf("started spans = %q, want an ended toolsd.test.Runner/Run span", started)
	}
	if n, m := len(rec.Started()), len(rec.Ended()); n != m {
		t.Errorf("started spans = %q, %d of them never ended", started, n-m)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown() = %v", err)
	}
}

// serveTraced serves over bufconn, with tr's stats handler, the services register
// registers, names them to tr, and returns a client connection and a stop that closes
// it and stops the server gracefully: GracefulStop waits for the handlers, which end
// their RPCs' spans after the client has its response; Stop does not, and a span could
// miss the export.
func serveTraced(t *testing.T, tr *observe.Tracing, register func(*grpc.Server)) (*grpc.ClientConn, func()) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.StatsHandler(tr.StatsHandler()))
	register(srv)
	tr.TraceServices(srv.GetServiceInfo())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient() = %v", err)
	}
	return conn, func() {
		_ = conn.Close()
		srv.GracefulStop()
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	}
}

// TestTraceContext: the headers a provider is sent name the span in the context, and
// there are none with tracing off or without a span.
func TestTraceContext(t *testing.T) {
	off, err := observe.SetupTracing(t.Context(), false)
	if err != nil {
		t.Fatalf("SetupTracing(off) = %v", err)
	}
	on, err := observe.SetupTracing(t.Context(), true, observe.WithSpanExporter(tracetest.NewNoopExporter()))
	if err != nil {
		t.Fatalf("SetupTracing(on) = %v", err)
	}
	t.Cleanup(func() { _ = on.Shutdown(context.Background()) })
	ctx, span := on.TracerProvider().Tracer("test").Start(t.Context(), "dispatch")
	defer span.End()
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"

	if got := on.TraceContext(ctx); got["traceparent"] != want {
		t.Errorf("TraceContext(span) = %q, want traceparent %q", got, want)
	}
	if got := on.TraceContext(t.Context()); got != nil {
		t.Errorf("TraceContext(no span) = %q, want nil", got)
	}
	if got := off.TraceContext(ctx); got != nil {
		t.Errorf("TraceContext(span) with tracing off = %q, want nil", got)
	}
}
