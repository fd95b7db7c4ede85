package relay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/toolsd/toolsd/bench/load"
	"github.com/toolsd/toolsd/bench/relay"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// resultRecorder keeps the last ExecuteResult a relay server received from a provider.
type resultRecorder struct {
	mu   sync.Mutex
	last *toolsdv1.ExecuteResult
}

type recordedStream struct {
	grpc.ServerStream
	rec *resultRecorder
}

func (s recordedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if r, ok := m.(*toolsdv1.ProviderServiceConnectRequest); ok && err == nil && r.GetResult() != nil {
		s.rec.mu.Lock()
		s.rec.last = r.GetResult()
		s.rec.mu.Unlock()
	}
	return err
}

// providerResult serves a relay, runs start's provider against it until ready, sends
// one no-op call and returns the ExecuteResult the provider answered it with.
func providerResult(t *testing.T, start func(ctx context.Context, addr string, ready chan<- struct{}) error) *toolsdv1.ExecuteResult {
	t.Helper()
	rec := &resultRecorder{}
	addr := serveRelay(t, relay.NewServer(), func(ss grpc.ServerStream) grpc.ServerStream { return recordedStream{ss, rec} })
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- start(ctx, addr, ready) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Logf("provider ended as the test stopped it: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("provider ended before it was ready: %v", err)
	}
	w := load.Workload{Name: "one", Agents: 1, BatchSize: 1, ArgBytes: 100, Duration: time.Second}
	a, err := load.DialBatch(ctx, addr, "s", w)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	if err := a.Do(ctx); err != nil {
		t.Fatalf("Do() = %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.last == nil {
		t.Fatal("no result reached the relay")
	}
	rec.last.RequestId = 0
	return rec.last
}

// TestProviderResultIsSDKs: the relay's provider answers the no-op call with the message
// the SDK provider (toolsd's target) sends for the tool's "ok", so the relay moves the
// same bytes on both hops as toolsd does.
func TestProviderResultIsSDKs(t *testing.T) {
	sdk := providerResult(t, func(ctx context.Context, addr string, ready chan<- struct{}) error {
		p := provider.New("sdk-noop")
		p.Add(provider.NewTool(load.NoopTool, "Does nothing and returns ok.",
			func(context.Context, provider.Call, struct {
				Data string `json:"data"`
			}) (string, error) {
				return "ok", nil
			}))
		go func() {
			select {
			case <-p.Ready():
				close(ready)
			case <-ctx.Done():
			}
		}()
		return p.Run(ctx, addr)
	})
	raw := providerResult(t, relay.RunProvider)
	if diff := cmp.Diff(sdk, raw, protocmp.Transform()); diff != "" {
		t.Errorf("relay provider's result (-SDK's +relay's):\n%s", diff)
	}
}
