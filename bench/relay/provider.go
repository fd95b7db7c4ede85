package relay

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// okContent is the no-op tool's result, as the provider SDK sends a tool's string "ok":
// the text alone, no value.
var okContent = []byte("ok")

// RunProvider connects a no-op provider to the ProviderService at addr and answers every
// ExecuteRequest at once, on its receive loop, with the result "ok". ready (if not nil)
// is closed after the welcome. It returns nil when ctx ends or the server closes the
// stream cleanly.
func RunProvider(ctx context.Context, addr string, ready chan<- struct{}) error {
	conn, err := grpc.NewClient(addr, append(providerDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return fmt.Errorf("relay: dial %s: %w", addr, err)
	}
	defer conn.Close()
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		return fmt.Errorf("relay: connect: %w", err)
	}
	hello := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{
		Hello: &toolsdv1.ProviderHello{Name: "relay-noop", Version: "1"},
	}}
	if err := stream.Send(hello); err != nil {
		return fmt.Errorf("relay: send hello: %w", err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		return fmt.Errorf("relay: want welcome, got %v, %w", m, err)
	}
	if ready != nil {
		close(ready)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("relay: provider recv: %w", err)
		}
		ex := m.GetExecute()
		if ex == nil {
			continue
		}
		res := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{
			Result: &toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: okContent},
		}}
		if err := stream.Send(res); err != nil {
			return fmt.Errorf("relay: provider send: %w", err)
		}
	}
}
