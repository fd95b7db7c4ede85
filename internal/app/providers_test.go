package app

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/auth"
	"github.com/toolsd/toolsd/internal/broker"
	"github.com/toolsd/toolsd/internal/broker/brokertest"
)

// TestProviderAtItsCapDuringShutdown: once the broker's shutdown has begun, a tenant's
// new provider stream is refused Unavailable (SHUTTING_DOWN), as the broker refuses it
// before limits.max_providers, even while the tenant's last place among
// limits.max_providers_per_identity is still held by a stream that is ending (its
// handler gives the place back only after the broker's teardown). It was refused
// ResourceExhausted (LIMIT_EXCEEDED), telling the provider to back off here rather than
// go to another instance.
func TestProviderAtItsCapDuringShutdown(t *testing.T) {
	const token = "provider-a-token-0f3b8c2d9e1a7b64"
	tokens := filepath.Join(t.TempDir(), "tokens.txt")
	if err := os.WriteFile(tokens, []byte(token+" provider-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	authn, authz, err := auth.New(auth.Config{TokenFile: tokens, Grants: []auth.Grant{
		{Identity: "provider-a", Role: auth.RoleProvider, Scopes: []string{"tenant-a/**"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b := broker.New(brokertest.NewRegistrar())
	places := &providerPlaces{max: 1}
	if !places.take("provider-a") { // the place of provider-a's stream that is ending
		t.Fatal("take() on no places taken = false")
	}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.StreamInterceptor(authn.StreamServerInterceptor()))
	toolsdv1.RegisterProviderServiceServer(srv, providerService{b: b, admit: admitProvider(authz, places, b.ShuttingDown)})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	b.Shutdown("toolsd is shutting down")
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if got := shutdownReason(err); status.Code(err) != codes.Unavailable || got != "SHUTTING_DOWN" {
		t.Errorf("Connect() at the cap during shutdown = %v (reason %q), want Unavailable (SHUTTING_DOWN)", err, got)
	}
}

// shutdownReason is the ErrorInfo reason of a status error ("" if none).
func shutdownReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
