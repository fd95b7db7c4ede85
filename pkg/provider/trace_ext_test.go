package provider_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// TestHandlerContextContinuesTheCallsTrace: a call's trace_context reaches its handler
// as the context's remote span context, so that a span the handler starts (here with an
// OpenTelemetry SDK the program set up, not the global one) has toolsd's span as its
// parent, and as Call.TraceContext; a call without one leaves both empty.
func TestHandlerContextContinuesTheCallsTrace(t *testing.T) {
	const (
		traceID  = "0af7651916cd43dd8448eb211c80319c"
		parentID = "b7ad6b7169203331"
	)
	headers := map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01", "tracestate": "rojo=00f067aa0ba902b7"}
	traced := executeMsg(1, "traced", `{}`)
	traced.GetExecute().TraceContext = headers
	srv := &scriptedToolsd{
		script:  []*toolsdv1.ProviderServiceConnectResponse{traced, executeMsg(2, "traced", `{}`)},
		results: make(chan *toolsdv1.ExecuteResult, 2),
	}
	addr := startScripted(t, srv)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	type seen struct {
		remote, own trace.SpanContext
		headers     map[string]string
	}
	saw := make(chan seen, 2)
	p := newProvider(t)
	p.Add(provider.NewTool("traced", "starts a span", func(ctx context.Context, call provider.Call, _ struct{}) (string, error) {
		remote := trace.SpanContextFromContext(ctx)
		_, span := tp.Tracer("tool").Start(ctx, "tool body")
		span.End()
		saw <- seen{remote: remote, own: span.SpanContext(), headers: call.TraceContext}
		return "", nil
	}))
	run(t, p, addr)

	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for range 2 {
		var got seen
		select {
		case got = <-saw:
		case <-timer.C:
			t.Fatal("timed out waiting for the handlers")
		}
		if got.headers == nil {
			if got.remote.IsValid() {
				t.Errorf("handler's span context without trace_context = %v, want none", got.remote)
			}
			continue
		}
		if diff := cmp.Diff(headers, got.headers); diff != "" {
			t.Errorf("Call.TraceContext mismatch (-want +got):\n%s", diff)
		}
		if !got.remote.IsRemote() || got.remote.TraceID().String() != traceID || got.remote.SpanID().String() != parentID {
			t.Errorf("handler's span context = %v/%v (remote %t), want remote %s/%s", got.remote.TraceID(), got.remote.SpanID(), got.remote.IsRemote(), traceID, parentID)
		}
		if got.own.TraceID().String() != traceID {
			t.Errorf("handler's span trace id = %v, want %s", got.own.TraceID(), traceID)
		}
	}
	ended := rec.Ended()
	var parents []string
	for _, s := range ended {
		parents = append(parents, s.Parent().SpanID().String())
	}
	if len(ended) != 2 || !cmp.Equal(parents, []string{parentID, "0000000000000000"}) && !cmp.Equal(parents, []string{"0000000000000000", parentID}) {
		t.Errorf("handler spans' parents = %q, want %s and none", parents, parentID)
	}
}
