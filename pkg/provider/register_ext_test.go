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

// Tools whose definitions together exceed what toolsd receives in one message are
// registered in several messages rather than ending the stream on every connect.
func TestLargeRegistrationIsSplit(t *testing.T) {
	reg := brokertest.NewRegistrar()
	srv := brokertest.Start(t, reg)
	p := newProvider(t)
	pad := strings.Repeat("x", 900<<10)
	const n = 6 // 5.4 MiB in all, over gRPC's default 4 MiB receive limit
	for i := range n {
		p.Add(provider.NewTool(fmt.Sprintf("big%d", i), "big", func(context.Context, provider.Call, struct{}) (string, error) {
			return "ok", nil
		}, provider.WithSchema(`{"type":"object","description":"`+pad+`"}`)))
	}
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	waitOwned(t, reg, p, "big%d", n)
}

// Tools of one Add that share a name leave the last of them, as Add says: while
// connected only that one is registered, since toolsd keeps the first definition of a
// name it is sent and refuses the others (here as toolsd's registry does).
func TestAddKeepsTheLastOfASharedName(t *testing.T) {
	reg, srv := startRefusingTaken(t)
	p := newProvider(t)
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "readiness without tools")
	p.Add(
		provider.NewTool("echo", "first", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
			return a.Text, nil
		}),
		provider.NewTool("echo", "second", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
			return a.Text + "!", nil
		}),
	)
	reg.WaitFor(t, "echo registered", func() bool { _, ok := reg.Lookup("", "echo"); return ok })
	if r, _ := reg.Lookup("", "echo"); r.Def.Description != "second" {
		t.Errorf("registered echo's description = %q, want second, the definition whose handler serves", r.Def.Description)
	}
	if got := srv.Broker.Call(t.Context(), p.ProviderID(), exec("echo", `{"text":"hi"}`), 1); got.Content != "hi!" {
		t.Errorf("Call(echo) = %+v, want the second's content hi!", got)
	}
}

// More tools than toolsd takes in one register message are sent in several, so that a
// provider over limits.max_tools_per_provider keeps the tools the limit allows (the rest
// refused one by one) rather than having its stream ended on every connect for naming
// over twice the limit in one message.
func TestManyToolsAreRegisteredInSeveralMessages(t *testing.T) {
	reg := brokertest.NewRegistrar()
	const limit = 100
	srv := brokertest.Start(t, reg, broker.WithLimits(broker.Limits{MaxToolsPerRegister: limit}))
	p := newProvider(t)
	const n = 2*limit + 50
	for i := range n {
		p.Add(provider.NewTool(fmt.Sprintf("t%d", i), "small", func(context.Context, provider.Call, struct{}) (string, error) {
			return "ok", nil
		}))
	}
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "registration")
	waitOwned(t, reg, p, "t%d", n)
}

// A tool added again with a changed definition while connected replaces the one toolsd
// holds: the SDK unregisters the name and registers the new definition on the stream,
// although toolsd, as its registry does, refuses a second registration of a name the
// stream holds.
func TestAddReplacesAChangedDefinition(t *testing.T) {
	reg, srv := startRefusingTaken(t)
	p := newProvider(t)
	run(t, p, srv.Addr)
	wait(t, p.Ready(), "readiness without tools")
	handler := func(context.Context, provider.Call, struct{}) (string, error) { return "ok", nil }
	const schemaA = `{"type":"object","properties":{"a":{"type":"string"}}}`
	const schemaB = `{"type":"object","properties":{"b":{"type":"integer"}}}`
	p.Add(provider.NewTool("t", "a tool", handler, provider.WithSchema(schemaA)))
	reg.WaitFor(t, "t registered", func() bool { r, ok := reg.Lookup("", "t"); return ok && r.Owner == p.ProviderID() })
	a, _ := reg.Lookup("", "t")
	p.Add(provider.NewTool("t", "a tool", handler, provider.WithSchema(schemaB)))
	reg.WaitFor(t, "t's new definition registered", func() bool {
		r, ok := reg.Lookup("", "t")
		return ok && r.Owner == p.ProviderID() && r.Hash != a.Hash
	})
	if r, _ := reg.Lookup("", "t"); string(r.Def.Parameters) != schemaB {
		t.Errorf("registered t's parameters = %s, want %s", r.Def.Parameters, schemaB)
	}
}

// startRefusingTaken starts a broker whose registrar refuses a name already registered
// in its scope, even to the stream holding it, as toolsd's registry does
// (ALREADY_EXISTS).
func startRefusingTaken(t *testing.T) (*brokertest.Registrar, *brokertest.Server) {
	t.Helper()
	reg := brokertest.NewRegistrar()
	reg.Reject = func(scope string, def tool.Definition) error {
		if _, ok := reg.Lookup(scope, def.Name); ok {
			return brokertest.ErrTaken
		}
		return nil
	}
	return reg, brokertest.Start(t, reg, takenAsAlreadyExists)
}

// waitOwned waits until p owns the n tools named by format and 0 to n-1.
func waitOwned(t *testing.T, reg *brokertest.Registrar, p *provider.Provider, format string, n int) {
	t.Helper()
	reg.WaitFor(t, "every tool registered", func() bool {
		for i := range n {
			if r, ok := reg.Lookup("", fmt.Sprintf(format, i)); !ok || r.Owner != p.ProviderID() {
				return false
			}
		}
		return true
	})
}
