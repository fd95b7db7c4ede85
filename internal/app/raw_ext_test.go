package app_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// bearer sends a static token; plaintext loopback is fine in tests.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// dialWith opens a client connection with extra dial options.
func dialWith(tb testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		tb.Fatalf("grpc.NewClient(%s) = %v", addr, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// rawProvider speaks ProviderService.Connect by hand, to see what the SDK hides.
type rawProvider struct {
	stream toolsdv1.ProviderService_ConnectClient
	id     string
	ref    uint64
}

// connectRaw opens a provider stream and says hello; the error is the stream's if
// toolsd refuses it.
func connectRaw(tb testing.TB, conn *grpc.ClientConn, name string) (*rawProvider, error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		return nil, err
	}
	hello := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: name}}}
	// A Send that loses the race with the server ending the stream (e.g. refusing it as
	// unauthenticated) returns io.EOF; the stream's status then comes from Recv.
	if err := stream.Send(hello); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	return &rawProvider{stream: stream, id: m.GetWelcome().GetProviderId()}, nil
}

// register registers defs in scope and returns toolsd's statuses.
func (p *rawProvider) register(tb testing.TB, scope string, defs ...*toolsdv1.ToolDefinition) []*toolsdv1.ToolRegistrationStatus {
	tb.Helper()
	p.ref++
	err := p.stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
		Register: &toolsdv1.RegisterTools{Ref: p.ref, Scope: scope, Tools: defs},
	}})
	if err != nil {
		tb.Fatalf("Send(register) = %v", err)
	}
	for {
		m, err := p.stream.Recv()
		if err != nil {
			tb.Fatalf("Recv() awaiting the register result = %v", err)
		}
		if r := m.GetRegisterResult(); r.GetRef() == p.ref {
			return r.GetTools()
		}
	}
}

// unregister removes names from scope and returns toolsd's statuses.
func (p *rawProvider) unregister(tb testing.TB, scope string, names ...string) []*toolsdv1.ToolRegistrationStatus {
	tb.Helper()
	p.ref++
	err := p.stream.Send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Unregister{
		Unregister: &toolsdv1.UnregisterTools{Ref: p.ref, Scope: scope, Names: names},
	}})
	if err != nil {
		tb.Fatalf("Send(unregister) = %v", err)
	}
	for {
		m, err := p.stream.Recv()
		if err != nil {
			tb.Fatalf("Recv() awaiting the unregister result = %v", err)
		}
		if r := m.GetRegisterResult(); r.GetRef() == p.ref {
			return r.GetTools()
		}
	}
}

// TestRegistrationStatusCodes checks the gRPC code names of a provider stream's
// registration statuses, which match what the unary RPCs answer.
func TestRegistrationStatusCodes(t *testing.T) {
	e := start(t, "")
	p, err := connectRaw(t, e.conn, "codes")
	if err != nil {
		t.Fatal(err)
	}
	q, err := connectRaw(t, e.conn, "codes-2")
	if err != nil {
		t.Fatal(err)
	}
	bad := def("bad")
	bad.ParametersJson = `{"type":"string"}`
	if got, want := statusCodes(p.register(t, "s", def("mine"), def("mine"), bad)), []string{"", "ALREADY_EXISTS", "INVALID_ARGUMENT"}; !slices.Equal(got, want) {
		t.Errorf("register statuses = %v, want %v", got, want)
	}
	if got, want := statusCodes(q.unregister(t, "s", "mine", "never")), []string{"PERMISSION_DENIED", "NOT_FOUND"}; !slices.Equal(got, want) {
		t.Errorf("unregister statuses = %v, want %v", got, want)
	}
	if got, want := statusCodes(p.unregister(t, "s", "mine", "mine")), []string{"", "NOT_FOUND"}; !slices.Equal(got, want) {
		t.Errorf("unregister statuses = %v, want %v", got, want)
	}
}

// def is a minimal tool definition.
func def(name string) *toolsdv1.ToolDefinition {
	return &toolsdv1.ToolDefinition{Name: name, Description: "A test tool.", ParametersJson: `{"type":"object"}`}
}

// statusCodes lists the error codes of registration statuses ("" = accepted).
func statusCodes(sts []*toolsdv1.ToolRegistrationStatus) []string {
	out := make([]string, len(sts))
	for i, s := range sts {
		out[i] = s.GetErrorCode()
	}
	return out
}
