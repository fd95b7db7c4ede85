package app_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestToolSetsPerIdentity: an authenticated identity resolves at most
// limits.max_tool_sets_per_identity live tool sets; another tenant is not held up by it,
// and a released set frees a place.
func TestToolSetsPerIdentity(t *testing.T) {
	e := start(t, tenantAuth(t)+"limits: {max_tool_sets_per_identity: 2}\n")
	client := func(token string) toolsdv1.ToolServiceClient {
		return toolsdv1.NewToolServiceClient(dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(token))))
	}
	agentA, agentB := client(tokenAgentA), client(tokenAgentB)
	resolve := func(c toolsdv1.ToolServiceClient, scope string) (*toolsdv1.ResolveToolSetResponse, error) {
		return c.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: scope})
	}
	first, err := resolve(agentA, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(agentA, "tenant-a/bot"); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(agentA, "tenant-a"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("agent-a's third ResolveToolSet = %v, want ResourceExhausted", err)
	}
	if _, err := resolve(agentB, "tenant-b"); err != nil {
		t.Errorf("agent-b's ResolveToolSet beside agent-a's = %v", err)
	}
	if _, err := agentA.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: first.GetToolSetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(agentA, "tenant-a"); err != nil {
		t.Errorf("agent-a's ResolveToolSet after releasing one = %v", err)
	}
}
