package app_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestProviderStreamNeedsARegisterGrant: only an identity that may register tools
// somewhere may hold a provider stream. Otherwise an agent (or a hook) could take the
// places of limits.max_providers, and no tenant's provider could connect.
func TestProviderStreamNeedsARegisterGrant(t *testing.T) {
	e := start(t, "limits: {max_providers: 1}\n"+tenantAuth(t))
	as := func(token string) *grpc.ClientConn {
		return dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(token)))
	}
	if _, err := connectRaw(t, as(tokenAgentB), "squatter"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Connect() as agent-b = %v, want PermissionDenied", err)
	}
	if _, err := connectRaw(t, as(tokenProviderA), "provider-a"); err != nil {
		t.Errorf("Connect() as provider-a = %v, want a welcome", err)
	}
}

// TestProviderStreamsPerIdentity: one tenant's provider identity may not take every
// limits.max_providers place either.
func TestProviderStreamsPerIdentity(t *testing.T) {
	e := start(t, "limits: {max_providers: 4, max_providers_per_identity: 2}\n"+tenantAuth(t))
	as := func(token string) *grpc.ClientConn {
		return dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(token)))
	}
	connA := as(tokenProviderA)
	first, err := connectRaw(t, connA, "a-1")
	if err != nil {
		t.Fatalf("Connect() #1 as provider-a = %v", err)
	}
	if _, err := connectRaw(t, connA, "a-2"); err != nil {
		t.Fatalf("Connect() #2 as provider-a = %v", err)
	}
	if _, err := connectRaw(t, connA, "a-3"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Connect() #3 as provider-a = %v, want ResourceExhausted", err)
	}
	if _, err := connectRaw(t, as(tokenProviderB), "b"); err != nil {
		t.Errorf("Connect() as provider-b = %v, want a welcome", err)
	}
	// A stream that ends gives its place back.
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "provider-a's place to come back", func() bool {
		_, err := connectRaw(t, connA, "a-again")
		return err == nil
	})
}
