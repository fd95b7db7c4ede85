package provider_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/broker"
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

// connects counts the streams a broker welcomed.
type connects struct {
	broker.NopObserver
	n atomic.Int64
}

func (c *connects) ProviderConnected(d int) {
	if d > 0 {
		c.n.Add(1)
	}
}

// A stream that toolsd ends right after its welcome (here: a tool definition larger
// than toolsd receives in one message) does not reset the reconnect backoff: the
// provider backs off instead of reconnecting in a storm.
func TestShortLivedStreamsBackOff(t *testing.T) {
	obs := &connects{}
	srv := brokertest.Start(t, brokertest.NewRegistrar(), broker.WithObserver(obs))
	p := provider.New("sdk", provider.WithLogger(zap.NewNop()), provider.WithBackoff(10*time.Millisecond, 400*time.Millisecond))
	p.Add(echoTool(), provider.NewTool("huge", "too big to receive", func(context.Context, provider.Call, struct{}) (string, error) {
		return "", nil
	}, provider.WithSchema(`{"type":"object","description":"`+strings.Repeat("x", 5<<20)+`"}`)))
	run(t, p, srv.Addr)
	time.Sleep(2 * time.Second) // the test measures a rate
	// Backing off from 10 ms to 400 ms takes about a dozen streams in two seconds.
	if n := obs.n.Load(); n > 20 {
		t.Errorf("%d streams in 2s, want the backoff to grow", n)
	}
}
