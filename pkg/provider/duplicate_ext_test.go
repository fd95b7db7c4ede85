package provider_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// scriptedToolsd is a ProviderService that welcomes the provider, reads its
// registration, sends script, and hands the first result it then receives to results.
type scriptedToolsd struct {
	toolsdv1.UnimplementedProviderServiceServer
	script  []*toolsdv1.ProviderServiceConnectResponse
	results chan *toolsdv1.ExecuteResult
}

func (s *scriptedToolsd) Connect(stream grpc.BidiStreamingServer[toolsdv1.ProviderServiceConnectRequest, toolsdv1.ProviderServiceConnectResponse]) error {
	if _, err := stream.Recv(); err != nil { // hello
		return err
	}
	welcome := &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Welcome{Welcome: &toolsdv1.ProviderWelcome{ProviderId: "p-1"}}}
	if err := stream.Send(welcome); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil { // register
		return err
	}
	for _, m := range s.script {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	for { // until the provider half-closes
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		if r := m.GetResult(); r != nil {
			select {
			case s.results <- r:
			default:
			}
		}
	}
}

// startScripted serves srv on a loopback port until the test ends and returns its address.
func startScripted(tb testing.TB, srv toolsdv1.ProviderServiceServer) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("Listen() = %v", err)
	}
	gs := grpc.NewServer()
	toolsdv1.RegisterProviderServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	tb.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func executeMsg(id uint64, name, args string) *toolsdv1.ProviderServiceConnectResponse {
	return &toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Execute{
		Execute: &toolsdv1.ExecuteRequest{RequestId: id, CallId: "c", Tool: name, ArgumentsJson: args},
	}}
}

// A request id toolsd sent again while its call runs (only a broken or hostile server
// does) starts nothing and is not answered: the first call keeps the id, so toolsd's
// cancel reaches it and its answer is the one sent.
func TestDuplicateRequestIDKeepsTheFirstCall(t *testing.T) {
	srv := &scriptedToolsd{
		script: []*toolsdv1.ProviderServiceConnectResponse{
			executeMsg(1, "block", `{}`),
			executeMsg(1, "echo", `{"text":"second"}`),
			executeMsg(1, "nope", `{}`),
			{Msg: &toolsdv1.ProviderServiceConnectResponse_Cancel{Cancel: &toolsdv1.CancelExecution{RequestId: 1}}},
		},
		results: make(chan *toolsdv1.ExecuteResult, 1),
	}
	addr := startScripted(t, srv)
	var echoed atomic.Int32
	p := newProvider(t)
	p.Add(
		provider.NewTool("block", "runs until cancelled", func(ctx context.Context, _ provider.Call, _ struct{}) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}),
		provider.NewTool("echo", "echoes", func(_ context.Context, _ provider.Call, a echoArgs) (string, error) {
			echoed.Add(1)
			return a.Text, nil
		}),
	)
	run(t, p, addr)
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	var got *toolsdv1.ExecuteResult
	select {
	case got = <-srv.results:
	case <-timer.C:
		t.Fatal("timed out waiting for a result")
	}
	if got.GetRequestId() != 1 || !got.GetCancelled() {
		t.Errorf("first result = %v, want request 1's cancelled answer from the first call", got)
	}
	if n := echoed.Load(); n != 0 {
		t.Errorf("the duplicate's handler ran %d times, want 0", n)
	}
}
