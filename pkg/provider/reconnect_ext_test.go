package provider_test

import (
	"context"
	"testing"

	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/internal/tool"
	"github.com/toolsd/toolsd/pkg/provider"
)

// A handler that ignores its context must not keep the provider from reconnecting
// (and serving its other tools) once toolsd comes back.
func TestStuckHandlerDoesNotBlockReconnect(t *testing.T) {
	reg := brokertest.NewRegistrar()
	first := brokertest.Start(t, reg)
	release, started := make(chan struct{}), make(chan struct{})
	p := newProvider(t)
	p.Add(echoTool(), provider.NewTool("stuck", "ignores cancellation", func(context.Context, provider.Call, struct{}) (string, error) {
		close(started)
		<-release
		return "late", nil
	}))
	run(t, p, first.Addr)
	t.Cleanup(func() { close(release) }) // runs before run's cleanup waits for Run
	wait(t, p.Ready(), "registration")
	oldID := p.ProviderID()
	callDone := make(chan tool.Result, 1)
	go func() { callDone <- first.Broker.Call(context.Background(), oldID, exec("stuck", `{}`), 1) }()
	wait(t, started, "the stuck handler")

	first.Stop()
	if res := <-callDone; res.Code() != tool.CodeProviderGone {
		t.Errorf("Call(stuck) across the restart = %+v, want PROVIDER_GONE", res)
	}
	second := brokertest.StartAt(t, first.Addr, reg)
	var newID string
	reg.WaitFor(t, "echo registered again while the old handler still runs", func() bool {
		r, ok := reg.Lookup("", "echo")
		newID = r.Owner
		return ok && r.Owner != oldID
	})
	if got := second.Broker.Call(t.Context(), newID, exec("echo", `{"text":"back"}`), 1); got.Content != "back" {
		t.Errorf("Call(echo) after reconnect = %+v, want content back", got)
	}
}
