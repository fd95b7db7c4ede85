package relay_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/toolsd/toolsd/bench/load"
	"github.com/toolsd/toolsd/bench/relay"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// startServer serves a relay on loopback TCP until the test ends.
func startServer(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := grpc.NewServer(relay.ServerOptions()...)
	relay.NewServer().Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	tb.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

// startProvider runs the no-op provider against addr; stop ends it and returns its error.
func startProvider(tb testing.TB, addr string) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- relay.RunProvider(ctx, addr, ready) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		tb.Fatalf("RunProvider(%s) = %v before welcome", addr, err)
	}
	stopped := false
	var perr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			perr = <-errc
		}
		return perr
	}
	tb.Cleanup(func() { _ = stop() })
	return stop
}

func TestRelayRunsWorkload(t *testing.T) {
	tests := map[string]struct{ agents, batch int }{
		"single call":    {agents: 2, batch: 1},
		"8-call batches": {agents: 3, batch: 8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr := startServer(t)
			stop := startProvider(t, addr)
			w := load.Workload{Name: name, Agents: tc.agents, BatchSize: tc.batch, ArgBytes: 100,
				Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond}
			res, err := load.Run(t.Context(), w, load.BatchDialer(addr, "s"))
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if res.Batches == 0 || res.Calls != res.Batches*tc.batch || res.P50 <= 0 {
				t.Fatalf("Run() = %+v, want completed batches with latencies", res)
			}
			if err := stop(); err != nil {
				t.Fatalf("RunProvider() = %v, want nil after cancel", err)
			}
		})
	}
}

func TestExecuteBatchWithoutProvider(t *testing.T) {
	addr := startServer(t)
	w := load.Workload{Name: "x", Agents: 1, BatchSize: 1, ArgBytes: 20, Duration: time.Second}
	a, err := load.DialBatch(t.Context(), addr, "s", w)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	if err := a.Do(t.Context()); status.Code(err) != codes.Unavailable {
		t.Fatalf("Do() error = %v, want Unavailable", err)
	}
}

// TestProviderGoneFailsCall parks a call at a provider that never answers, then closes
// that provider: the call must come back as an error result, not hang.
func TestProviderGoneFailsCall(t *testing.T) {
	addr := startServer(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pctx, pcancel := context.WithCancel(t.Context())
	defer pcancel()
	prov, err := toolsdv1.NewProviderServiceClient(conn).Connect(pctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := prov.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "silent"}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := prov.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("Recv() = %v, %v, want welcome", m, err)
	}
	w := load.Workload{Name: "x", Agents: 1, BatchSize: 1, ArgBytes: 20, Duration: time.Second}
	a, err := load.DialBatch(t.Context(), addr, "s", w)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	errc := make(chan error, 1)
	go func() { errc <- a.Do(t.Context()) }()
	if m, err := prov.Recv(); err != nil || m.GetExecute().GetTool() != load.NoopTool {
		t.Fatalf("provider Recv() = %v, %v, want execute of %s", m, err, load.NoopTool)
	}
	pcancel()
	if err := <-errc; !errors.Is(err, load.ErrBadResponse) {
		t.Fatalf("Do() error = %v, want ErrBadResponse (error result)", err)
	}
}

func BenchmarkRelay(b *testing.B) {
	for name, batch := range map[string]int{"single": 1, "batch8": 8} {
		b.Run(name, func(b *testing.B) {
			addr := startServer(b)
			startProvider(b, addr)
			w := load.Workload{Name: name, Agents: 1, BatchSize: batch, ArgBytes: 100, Duration: time.Second}
			a, err := load.DialBatch(b.Context(), addr, "s", w)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = a.Close() }()
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Do(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
