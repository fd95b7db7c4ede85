package broker_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
	"github.com/toolsd/toolsd/pkg/provider"
)

func noopTool() provider.Tool {
	return provider.NewTool("noop", "does nothing", func(context.Context, provider.Call, struct{}) (string, error) {
		return "ok", nil
	})
}

// BenchmarkCall is one call's round trip: Broker.Call → execute down the provider's
// stream over loopback gRPC → SDK handler → result back → Call returns. Allocations
// include the SDK provider's, which runs in the same process.
func BenchmarkCall(b *testing.B) {
	srv := brokertest.Start(b, brokertest.NewRegistrar())
	p := runSDK(b, srv, noopTool())
	id, e := p.ProviderID(), execFor("noop", "{}")
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if res := srv.Broker.Call(ctx, id, e, 1); res.IsError {
			b.Fatalf("Call() = %+v", res)
		}
	}
}

// BenchmarkCallParallel is BenchmarkCall with concurrent callers sharing one stream.
func BenchmarkCallParallel(b *testing.B) {
	srv := brokertest.Start(b, brokertest.NewRegistrar())
	p := runSDK(b, srv, noopTool())
	id := p.ProviderID()
	ctx := b.Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		e := execFor("noop", "{}")
		for pb.Next() {
			if res := srv.Broker.Call(ctx, id, e, 1); res.IsError {
				b.Errorf("Call() = %+v", res)
				return
			}
		}
	})
}

// pingPong is a bare ProviderService: it answers every provider message with an execute.
type pingPong struct {
	toolsdv1.UnimplementedProviderServiceServer
}

func (pingPong) Connect(stream toolsdv1.ProviderService_ConnectServer) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return nil
		}
		if err := stream.Send(&toolsdv1.ProviderServiceConnectResponse{Msg: &toolsdv1.ProviderServiceConnectResponse_Execute{
			Execute: &toolsdv1.ExecuteRequest{RequestId: m.GetResult().GetRequestId(), Tool: "noop", ArgumentsJson: "{}"},
		}}); err != nil {
			return err
		}
	}
}

// BenchmarkBaselineStreamPingPong is the transport's floor for BenchmarkCall: the same
// two stream hops with the same messages and no broker or SDK.
func BenchmarkBaselineStreamPingPong(b *testing.B) {
	lis := brokertest.Listen(b)
	srv := grpc.NewServer()
	toolsdv1.RegisterProviderServiceServer(srv, pingPong{})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	b.Cleanup(func() { srv.Stop(); <-done })
	conn := brokertest.DialAddr(b, lis.Addr().String())
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		b.Fatalf("Connect() = %v", err)
	}
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id++
		if err := stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{
			Result: &toolsdv1.ExecuteResult{RequestId: id, Content: []byte("ok")},
		}}); err != nil {
			b.Fatalf("Send() = %v", err)
		}
		if _, err := stream.Recv(); err != nil {
			b.Fatalf("Recv() = %v", err)
		}
	}
}
