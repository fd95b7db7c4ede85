package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// A handler that returns its cancellation wrapped in a message over max_result_bytes
// (say, the output it had so far) still reports that it stopped: the result goes as its
// size only, and toolsd records ABORTED, not RESULT_TOO_LARGE.
func TestOversizedCancellationStaysCancelled(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(),
		broker.WithLimits(broker.Limits{MaxResultBytes: 64, CancelGrace: waitTimeout}))
	started := make(chan struct{}, 1)
	p := newProvider(t)
	p.Add(provider.NewTool("t", "stops with its output", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", fmt.Errorf("%s: %w", strings.Repeat("output ", 20), ctx.Err())
	}))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	if got := srv.Broker.Call(ctx, p.ProviderID(), exec("t", `{}`), 1); got.Code() != tool.CodeAborted {
		t.Errorf("Call() after cancel = %+v, want %s", got, tool.CodeAborted)
	}
}

// A handler that finishes toolsd's cancelled call with a success over max_result_bytes
// is answered as any success after a cancel, which toolsd records ABORTED: nobody sees a
// cancelled call's result, so its size fails nothing (it was sent as its size only, and
// toolsd recorded RESULT_TOO_LARGE).
func TestOversizedSuccessAfterCancelIsAborted(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(),
		broker.WithLimits(broker.Limits{MaxResultBytes: 64, CancelGrace: waitTimeout}))
	started := make(chan struct{}, 1)
	p := newProvider(t)
	p.Add(provider.NewTool("t", "finishes anyway", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return strings.Repeat("output ", 20), nil
	}))
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	if got := srv.Broker.Call(ctx, p.ProviderID(), exec("t", `{}`), 1); got.Code() != tool.CodeAborted {
		t.Errorf("Call() after cancel = %+v, want %s", got, tool.CodeAborted)
	}
}

// Even without a cancel: the oversized result fails alone, as RESULT_TOO_LARGE.
func TestOversizedResultFailsItsCallAlone(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithLimits(broker.Limits{MaxResultBytes: 64}))
	p := newProvider(t)
	p.Add(echoTool())
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	big := strings.Repeat("x", 65)
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"`+big+`"}`), 1); got.Code() != tool.CodeResultTooLarge {
		t.Errorf("Call(echo, 65 bytes) = %+v, want %s", got, tool.CodeResultTooLarge)
	}
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"ok"}`), 1); got.Content != "ok" {
		t.Errorf("Call(echo, ok) after an oversized result = %+v, want content ok", got)
	}
}
