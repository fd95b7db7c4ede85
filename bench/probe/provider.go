package probe

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// ErrRejected reports a tool registration the server refused.
var ErrRejected = errors.New("probe: registration rejected")

// providerStream is one raw provider connection: its own TCP connection and Connect stream.
type providerStream struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	stream grpc.BidiStreamingClient[toolsdv1.ProviderServiceConnectRequest, toolsdv1.ProviderServiceConnectResponse]
}

// openProvider dials addr, opens Connect and completes the hello/welcome exchange.
func openProvider(ctx context.Context, addr, name string) (*providerStream, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("probe: dial %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &providerStream{conn: conn, cancel: cancel}
	p.stream, err = toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err == nil {
		err = p.stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{
			Hello: &toolsdv1.ProviderHello{Name: name, Version: "1"},
		}})
	}
	if err == nil {
		var m *toolsdv1.ProviderServiceConnectResponse
		if m, err = p.stream.Recv(); err == nil && m.GetWelcome() == nil {
			err = fmt.Errorf("probe: first message %v, want welcome", m)
		}
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("probe: provider %s: %w", name, err)
	}
	return p, nil
}

// register registers defs in the global scope and waits for every status.
func (p *providerStream) register(ref uint64, defs []*toolsdv1.ToolDefinition) error {
	err := p.stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: ref, Tools: defs},
	}})
	if err != nil {
		return fmt.Errorf("probe: register: %w", err)
	}
	for {
		m, err := p.stream.Recv()
		if err != nil {
			return fmt.Errorf("probe: register: %w", err)
		}
		res := m.GetRegisterResult()
		if res == nil || res.GetRef() != ref {
			continue
		}
		for _, st := range res.GetTools() {
			if st.GetErrorCode() != "" {
				return fmt.Errorf("%w: %s: %s %s", ErrRejected, st.GetName(), st.GetErrorCode(), st.GetErrorMessage())
			}
		}
		if len(res.GetTools()) != len(defs) {
			return fmt.Errorf("%w: %d statuses for %d tools", ErrRejected, len(res.GetTools()), len(defs))
		}
		return nil
	}
}

func (p *providerStream) close() {
	p.cancel()
	_ = p.conn.Close()
}

// objectTool is a definition with a small object schema, like a typical tool's.
func objectTool(name string) *toolsdv1.ToolDefinition {
	return &toolsdv1.ToolDefinition{
		Name:           name,
		Description:    "Benchmark tool " + name + ": takes a string and does nothing with it.",
		ParametersJson: `{"type":"object","properties":{"data":{"type":"string"}}}`,
	}
}
