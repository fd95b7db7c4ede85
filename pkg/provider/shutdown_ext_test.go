package provider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolsd/toolsd/internal/broker"
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

// A provider that begins to shut down unregisters its tools at once, so that toolsd
// stops routing new calls to it while its running calls finish: here another provider,
// whose registration of the name was refused while the first held it, takes the name
// and serves the next call. The running call's result still reaches toolsd, and a call
// sent to the leaving provider after its unregister (one toolsd had resolved before it)
// is not started and fails with PROVIDER_GONE as the stream closes, as before. The
// answer to the unregister is not taken for a registration.
func TestShutdownUnregistersTools(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg, takenAsAlreadyExists)
	observed, logs := observer.New(zapcore.DebugLevel)
	// The leaving provider's refusal of the late call is the event the test waits on:
	// that call must reach the provider before its stream closes.
	refused := make(chan struct{}, 1)
	core := zapcore.RegisterHooks(observed, func(e zapcore.Entry) error {
		if e.Message == "call not started: the provider is shutting down" {
			select {
			case refused <- struct{}{}:
			default:
			}
		}
		return nil
	})
	started, finish := make(chan struct{}), make(chan struct{})
	leaving := newProvider(t, provider.WithLogger(zap.New(core)), provider.WithShutdownGrace(waitTimeout))
	leaving.Add(provider.NewTool("work", "the leaving provider's", func(context.Context, provider.Call, struct{}) (string, error) {
		close(started)
		<-finish // past the shutdown's cancel: the result is still wanted
		return "leaving", nil
	}))
	cancel, done := runUntil(t, leaving, srv.Addr)
	wait(t, leaving.Ready(), "the leaving provider's registration")
	leavingID := leaving.ProviderID()

	other := newProvider(t)
	other.Add(provider.NewTool("work", "the other provider's", func(context.Context, provider.Call, struct{}) (string, error) {
		return "other", nil
	}))
	run(t, other, srv.Addr)
	wait(t, other.Ready(), "the other provider's refused registration")

	running := make(chan tool.Result, 1)
	go func() { running <- srv.Broker.Call(context.Background(), leavingID, exec("work", `{}`), 1) }()
	wait(t, started, "the running call")
	cancel()
	reg.WaitFor(t, "work registered by the other provider while the leaving one drains", func() bool {
		r, ok := reg.Lookup("", "work")
		return ok && r.Owner == other.ProviderID()
	})
	if got := srv.Broker.Call(t.Context(), other.ProviderID(), exec("work", `{}`), 1); got.IsError || got.Content != "other" {
		t.Errorf("Call(work) on the other provider = %+v, want content other", got)
	}
	late := make(chan tool.Result, 1)
	go func() { late <- srv.Broker.Call(context.Background(), leavingID, exec("work", `{}`), 1) }()
	// Finish the running call only once the provider has refused this one: had the
	// late call reached the broker after the stream closed, or been counted in flight
	// but not yet sent when it closed, it would end PROVIDER_UNAVAILABLE.
	wait(t, refused, "the leaving provider to refuse the late call")

	close(finish)
	if got := <-running; got.IsError || got.Content != "leaving" {
		t.Errorf("Call(work) running across the shutdown = %+v, want its result, leaving", got)
	}
	if got := <-late; got.Code() != tool.CodeProviderGone {
		t.Errorf("Call(work) sent to the leaving provider after its unregister = %+v, want PROVIDER_GONE", got)
	}
	awaitRun(t, done)
	if n := logs.FilterMessage("tool registered").Len(); n != 1 {
		t.Errorf("%d debug lines \"tool registered\", want 1 (the unregister's answer is no registration); logged: %v", n, logs.All())
	}
	if n := logs.FilterMessage("tool unregistered").FilterField(zap.String("tool", "work")).Len(); n != 1 {
		t.Errorf("%d debug lines \"tool unregistered\" of work, want 1; logged: %v", n, logs.All())
	}
	if warns := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(warns) > 0 {
		t.Errorf("warnings during the shutdown: %v", warns)
	}
}

// The unregister at shutdown names at most 100 tools per message, as registrations do:
// toolsd refuses the names past limits.max_tools_per_provider in one message, which
// would stay registered, and routed to, until the stream closed.
func TestShutdownUnregistersManyTools(t *testing.T) {
	reg := brokertest.NewRegistrar()
	const limit = 100
	srv := brokertest.Start(t, reg, broker.WithLimits(broker.Limits{MaxToolsPerRegister: limit}))
	started, finish := make(chan struct{}), make(chan struct{})
	p := newProvider(t, provider.WithShutdownGrace(waitTimeout))
	p.Add(provider.NewTool("work", "runs until told", func(context.Context, provider.Call, struct{}) (string, error) {
		close(started)
		<-finish
		return "done", nil
	}))
	const n = 2*limit + 50
	for i := range n {
		p.Add(provider.NewTool(fmt.Sprintf("t%d", i), "small", func(context.Context, provider.Call, struct{}) (string, error) {
			return "ok", nil
		}))
	}
	cancel, done := runUntil(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	reg.WaitFor(t, "every tool registered", func() bool { _, ok := reg.Lookup("", fmt.Sprintf("t%d", n-1)); return ok })
	running := make(chan tool.Result, 1)
	go func() { running <- srv.Broker.Call(context.Background(), p.ProviderID(), exec("work", `{}`), 1) }()
	wait(t, started, "the running call")

	cancel()
	reg.WaitFor(t, "every tool unregistered while a call runs", func() bool {
		if _, ok := reg.Lookup("", "work"); ok {
			return false
		}
		for i := range n {
			if _, ok := reg.Lookup("", fmt.Sprintf("t%d", i)); ok {
				return false
			}
		}
		return true
	})
	close(finish)
	if got := <-running; got.IsError || got.Content != "done" {
		t.Errorf("Call(work) running across the shutdown = %+v, want its result, done", got)
	}
	awaitRun(t, done)
}
