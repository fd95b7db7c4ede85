package relay_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolsd/toolsd/bench/relay"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// heldWelcomeStream puts a provider's welcome on the wire, then holds the server's
// send until release is closed.
type heldWelcomeStream struct {
	grpc.ServerStream
	release <-chan struct{}
}

func (s heldWelcomeStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if r, ok := m.(*toolsdv1.ProviderServiceConnectResponse); ok && r.GetWelcome() != nil {
		<-s.release
	}
	return err
}

// TestWelcomedProviderTakesCalls: a provider that has its welcome gets the calls that
// follow (the harness starts agents once the relay provider is welcomed), even while
// the server's welcome send has not yet returned.
func TestWelcomedProviderTakesCalls(t *testing.T) {
	release := make(chan struct{})
	addr := serveRelay(t, relay.NewServer(), func(ss grpc.ServerStream) grpc.ServerStream { return heldWelcomeStream{ss, release} })
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	defer close(release) // before the server stops: its Connect handler is held on it
	prov, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := prov.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "p"}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := prov.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("Recv() = %v, %v, want welcome", m, err)
	}
	stream, err := toolsdv1.NewToolServiceClient(conn).ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := &toolsdv1.ToolCall{CallId: "c", Name: "noop", ArgumentsJson: `{"data":"x"}`}
	err = stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{
		SessionId: "s", Turn: 1, Step: 1, Calls: []*toolsdv1.ToolCall{call, call},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetAccepted() == nil {
		t.Errorf("ExecuteBatch after welcome: Recv() = %v, %v, want accepted", m, err)
	}
}
