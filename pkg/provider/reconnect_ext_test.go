package provider_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

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

// A connection that toolsd refused several times (it was down for a while) is dialled
// again as WithBackoff says, not after gRPC's own connection backoff, which grows to
// two minutes: the provider is back within its maximum delay of toolsd's return.
func TestRedialFollowsTheBackoff(t *testing.T) {
	srv := brokertest.Start(t, brokertest.NewRegistrar())
	const refusals = 6 // gRPC's default backoff would wait about 26 s in all (1 s, growing by 1.6)
	var dials atomic.Int64
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		if dials.Add(1) <= refusals {
			return nil, errors.New("connection refused (toolsd is down)")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	p := provider.New("sdk", provider.WithLogger(zap.NewNop()), provider.WithBackoff(time.Millisecond, 20*time.Millisecond),
		provider.WithDialOptions(grpc.WithContextDialer(dialer)))
	p.Add(echoTool())
	run(t, p, srv.Addr)
	// The wait is a safety net far above what the provider's backoff allows (at most
	// 20 ms between dials) and far below gRPC's default connection backoff.
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-p.Ready():
	case <-timer.C:
		t.Fatalf("not registered 10s after %d refused dials (dialled %d times), want the provider's 20 ms backoff", refusals, dials.Load())
	}
}

// tlsOnlyCreds are per-RPC credentials that need a secure transport.
type tlsOnlyCreds struct{}

func (tlsOnlyCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return nil, nil
}
func (tlsOnlyCreds) RequireTransportSecurity() bool { return true }

// Run fails at once only for dial options gRPC refuses; a target it cannot parse or
// reach is retried, as a toolsd that is down is, until the context ends.
func TestRunFailsOnlyForRefusedDialOptions(t *testing.T) {
	p := newProvider(t, provider.WithDialOptions(grpc.WithPerRPCCredentials(tlsOnlyCreds{})))
	if err := p.Run(t.Context(), "127.0.0.1:1"); err == nil || !strings.HasPrefix(err.Error(), "provider: dial") {
		t.Errorf("Run() with per-RPC credentials needing TLS, without TLS = %v, want a dial error", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := newProvider(t).Run(ctx, "dns://[::1"); err != nil {
		t.Errorf("Run(%q) = %v, want nil once ctx ends (the target is retried)", "dns://[::1", err)
	}
}
