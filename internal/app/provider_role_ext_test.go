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
