package app_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// TestWatchSchemasFollowsProviders: an agent watching its scope's tools sees a new
// fingerprint, Schemas' own, when its tenant's provider connects and when it leaves,
// and nothing for another tenant's provider; a scope it may not read is refused with
// PermissionDenied, as Schemas is.
func TestWatchSchemasFollowsProviders(t *testing.T) {
	e := startTenants(t)
	addr := e.app.Addr()
	agentA := e.as(t, tokenAgentA)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const scope = "tenant-a/bot"
	w, err := agentA.tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	next := func(after string, wantTools int) {
		t.Helper()
		m, err := w.Recv()
		if err != nil {
			t.Fatalf("WatchSchemas(%s).Recv() after %s = %v", scope, after, err)
		}
		s, err := agentA.tools.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		if m.GetFingerprint() != s.GetFingerprint() || int(m.GetToolCount()) != len(s.GetTools()) || len(s.GetTools()) != wantTools {
			t.Fatalf("WatchSchemas(%s).Recv() after %s = %s (%d tools), want Schemas' %s (%d tools, want %d)",
				scope, after, m.GetFingerprint(), m.GetToolCount(), s.GetFingerprint(), len(s.GetTools()), wantTools)
		}
	}
	next("opening", 0)

	var inA, inB inbox
	stopA := runProviderWith(t, addr, []provider.Option{provider.WithScope("tenant-a"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderA)))}, inA.tool("tool_a"))
	next("tenant-a's provider connected", 1)
	runProviderWith(t, addr, []provider.Option{provider.WithScope("tenant-b"),
		provider.WithDialOptions(grpc.WithPerRPCCredentials(bearer(tokenProviderB)))}, inB.tool("tool_b"))
	stopA()
	next("tenant-b's provider connected, then tenant-a's left", 0)

	other, err := agentA.tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: "tenant-b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("WatchSchemas(tenant-b) as agent-a = %v, want PermissionDenied", err)
	}
}
