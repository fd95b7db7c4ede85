package app_test

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/observe"
	"github.com/toolsd/toolsd/pkg/provider"
)

// The agent's W3C trace context, as its gRPC metadata carries it.
const (
	agentTraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	agentTraceState  = "rojo=00f067aa0ba902b7"
)

// startTraced runs toolsd with tracing on or off; on, rec sees every span it starts.
func startTraced(t *testing.T, on bool) (*env, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	e := start(t, fmt.Sprintf("tracing: {enabled: %t}\n", on),
		app.WithTracing(observe.WithSpanExporter(tracetest.NewNoopExporter()), observe.WithSpanProcessor(rec)))
	return e, rec
}

// tracedBatch runs one call of tool from an agent whose metadata carries its trace
// context, and checks that it succeeded.
func tracedBatch(t *testing.T, e *env, tool string) {
	t.Helper()
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-trace", Turn: 1, Step: 1, Calls: []*toolsdv1.ToolCall{call("c1", tool, `{}`)}},
		batchOptions{metadata: metadata.Pairs("traceparent", agentTraceParent, "tracestate", agentTraceState)})
	if codes := resultCodes(out.results); len(codes) != 1 || codes[0] != "" {
		t.Fatalf("result codes = %q, want one success", codes)
	}
}

// checkParent checks that sc, the parent a provider was given, is toolsd's dispatch
// span of the agent's call, in the agent's trace.
func checkParent(t *testing.T, rec *tracetest.SpanRecorder, sc trace.SpanContext) {
	t.Helper()
	checkParentNamed(t, rec, sc, "toolsd.dispatch")
}

// checkParentNamed checks that sc is toolsd's span named span, in the agent's trace.
func checkParentNamed(t *testing.T, rec *tracetest.SpanRecorder, sc trace.SpanContext, span string) {
	t.Helper()
	agent := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": agentTraceParent}))
	if sc.TraceID() != agent.TraceID() {
		t.Errorf("provider's trace id = %v, want the agent's %v", sc.TraceID(), agent.TraceID())
	}
	if got := sc.TraceState().String(); got != agentTraceState {
		t.Errorf("provider's tracestate = %q, want the agent's %q", got, agentTraceState)
	}
	var names []string
	for _, s := range rec.Started() {
		names = append(names, s.Name())
		if s.SpanContext().SpanID() == sc.SpanID() {
			if s.Name() != span || s.SpanContext().TraceID() != agent.TraceID() {
				t.Errorf("provider's parent span = %q in trace %v, want %s in the agent's", s.Name(), s.SpanContext().TraceID(), span)
			}
			return
		}
	}
	t.Errorf("provider's parent span %v is none of toolsd's spans %q", sc.SpanID(), names)
}

// TestProviderCallsCarryTheTraceContext: with tracing on, an execute request carries
// the call's W3C trace context, whose parent is toolsd's dispatch span in the agent's
// trace, so that the provider's spans can join it; with tracing off it carries none,
// though the agent sent one.
func TestProviderCallsCarryTheTraceContext(t *testing.T) {
	for name, on := range map[string]bool{"on": true, "off": false} {
		t.Run(name, func(t *testing.T) {
			e, rec := startTraced(t, on)
			p := connectHand(t, e, "traced")
			got := make(chan map[string]string, 1)
			p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
				got <- ex.GetTraceContext()
				return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})}
			})
			tracedBatch(t, e, "traced")
			tc := <-got
			if !on {
				if len(tc) != 0 {
					t.Errorf("trace_context = %q, want none with tracing off", tc)
				}
				return
			}
			sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(tc)))
			if !sc.IsValid() {
				t.Fatalf("trace_context = %q, want a valid traceparent", tc)
			}
			checkParent(t, rec, sc)
		})
	}
}

// TestSDKHandlersJoinTheAgentsTrace: a Go SDK handler's context carries, with tracing
// on, the agent's trace with toolsd's dispatch span of the call as the parent, so a
// span the handler starts joins the agent's trace under toolsd's; off, nothing.
func TestSDKHandlersJoinTheAgentsTrace(t *testing.T) {
	for name, on := range map[string]bool{"on": true, "off": false} {
		t.Run(name, func(t *testing.T) {
			e, rec := startTraced(t, on)
			type seen struct {
				sc      trace.SpanContext
				headers map[string]string
			}
			got := make(chan seen, 1)
			runProvider(t, e.app.Addr(), provider.NewTool("traced", "reports its trace", func(ctx context.Context, call provider.Call, _ struct{}) (string, error) {
				got <- seen{trace.SpanContextFromContext(ctx), call.TraceContext}
				return "ok", nil
			}))
			tracedBatch(t, e, "traced")
			s := <-got
			if !on {
				if s.sc.IsValid() || len(s.headers) != 0 {
					t.Errorf("handler's span context = %v, Call.TraceContext = %q, want none with tracing off", s.sc, s.headers)
				}
				return
			}
			if !s.sc.IsValid() || !s.sc.IsRemote() {
				t.Fatalf("handler's span context = %v (remote %t), want toolsd's, remote", s.sc, s.sc.IsRemote())
			}
			if s.headers["traceparent"] == "" {
				t.Errorf("Call.TraceContext = %q, want a traceparent", s.headers)
			}
			checkParent(t, rec, s.sc)
		})
	}
}

// TestHookRequestsCarryTheTraceContext: with tracing on, a hook's pre- and
// post-execute requests carry the call's W3C trace context, whose parent is toolsd's
// span of the call then (prepare before execution, the call's own after), in the agent's
// trace; with tracing off they carry none.
func TestHookRequestsCarryTheTraceContext(t *testing.T) {
	for name, on := range map[string]bool{"on": true, "off": false} {
		t.Run(name, func(t *testing.T) {
			e, rec := startTraced(t, on)
			p := connectHand(t, e, "traced")
			p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
				return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})}
			})
			got := make(chan *toolsdv1.HookRequest, 2)
			answerHook(t, e.conn, &toolsdv1.HookHello{Name: "tracer", Subscriptions: []*toolsdv1.HookSubscription{
				{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}, {Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE},
			}}, func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
				got <- req
				v := toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW
				if req.GetStage() == toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE {
					v = toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT
				}
				return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), Verdict: v}
			})
			tracedBatch(t, e, "traced")
			for range 2 {
				req := <-got
				tc := req.GetTraceContext()
				if !on {
					if len(tc) != 0 {
						t.Errorf("%v trace_context = %q, want none with tracing off", req.GetStage(), tc)
					}
					continue
				}
				sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(tc)))
				if !sc.IsValid() {
					t.Errorf("%v trace_context = %q, want a valid traceparent", req.GetStage(), tc)
					continue
				}
				want := "toolsd.prepare"
				if req.GetStage() == toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE {
					want = "execute_tool traced"
				}
				checkParentNamed(t, rec, sc, want)
			}
		})
	}
}
