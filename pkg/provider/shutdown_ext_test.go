package provider_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// runUntil runs p against addr until cancel is called; the returned channel receives
// Run's result.
func runUntil(tb testing.TB, p *provider.Provider, addr string) (cancel func(), done <-chan error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- p.Run(ctx, addr) }()
	tb.Cleanup(cancel)
	return cancel, ch
}

// awaitRun waits for Run to return; the wait is a safety net only.
func awaitRun(tb testing.TB, done <-chan error) {
	tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("Run() = %v, want nil", err)
		}
	case <-timer.C:
		tb.Fatal("Run did not return after its context ended and its shutdown grace passed")
	}
}

// A handler that ignores its context no longer holds Run forever: after the shutdown
// grace Run returns, the call fails in toolsd with PROVIDER_GONE (the provider went
// away; toolsd may retry an idempotent tool elsewhere), and the handler is logged as
// left running. Its late result is never sent.
func TestShutdownGraceAbandonsStuckHandlers(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	core, logs := observer.New(zapcore.WarnLevel)
	release, started := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	p := provider.New("sdk", provider.WithLogger(zap.New(core)), provider.WithShutdownGrace(time.Millisecond))
	p.Add(provider.NewTool("stuck", "ignores cancellation", func(context.Context, provider.Call, struct{}) (string, error) {
		close(started)
		<-release
		return "late", nil
	}))
	cancel, done := runUntil(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	callDone := make(chan tool.Result, 1)
	go func() { callDone <- srv.Broker.Call(context.Background(), p.ProviderID(), exec("stuck", `{}`), 1) }()
	wait(t, started, "the stuck handler")

	cancel()
	awaitRun(t, done)
	if got := <-callDone; got.Code() != tool.CodeProviderGone {
		t.Errorf("Call(stuck) across the shutdown = %+v, want PROVIDER_GONE", got)
	}
	left := logs.FilterMessageSnippet("left running").FilterField(zap.String("tool", "stuck")).All()
	if len(left) != 1 {
		t.Errorf("%d warnings that the stuck handler was left running, want 1; logged: %v", len(left), logs.All())
	}
}

// A handler that finishes within the grace still gets its result to toolsd: the stream
// stays open while the provider drains. One that returns the shutdown's cancellation
// is not answered as a failure of its own (TOOL_ERROR, "context canceled"): its call
// fails with PROVIDER_GONE as the stream closes, like any call of a provider that left.
func TestShutdownDrainsResults(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	started, finish := make(chan struct{}, 2), make(chan struct{})
	p := newProvider(t, provider.WithShutdownGrace(waitTimeout)) // a safety net: the handlers decide
	p.Add(
		provider.NewTool("slow", "finishes its work, on cue", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			<-finish
			return "finished", nil
		}),
		provider.NewTool("stops", "stops when told", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}),
	)
	cancel, done := runUntil(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	id := p.ProviderID()
	slowDone, stopsDone := make(chan tool.Result, 1), make(chan tool.Result, 1)
	go func() { slowDone <- srv.Broker.Call(context.Background(), id, exec("slow", `{}`), 1) }()
	go func() { stopsDone <- srv.Broker.Call(context.Background(), id, exec("stops", `{}`), 1) }()
	wait(t, started, "a handler")
	wait(t, started, "the other handler")

	cancel()
	close(finish)
	if got := <-slowDone; got.IsError || got.Content != "finished" {
		t.Errorf("Call(slow) across the shutdown = %+v, want its result, finished", got)
	}
	if got := <-stopsDone; got.Code() != tool.CodeProviderGone {
		t.Errorf("Call(stops) across the shutdown = %+v, want PROVIDER_GONE", got)
	}
	awaitRun(t, done)
}
