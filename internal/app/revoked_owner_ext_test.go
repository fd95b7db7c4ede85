package app_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

const tokenAgentC = "agent-c-token-6d2f8a1c4e9b7305"

// TestOwnerReadsOnlyWhileGrantedTheScope: owning a session is not a grant. After a
// restart that revokes the owner's grant, or moves it to another tenant, the owner may
// no longer read or watch what it ran in the scope it lost; while its grant still
// covers that scope it reads as before.
func TestOwnerReadsOnlyWhileGrantedTheScope(t *testing.T) {
	dir := t.TempDir()
	withGrant := func(grant string) string {
		return tenantAuthWith(t, tokenAgentC+" agent-c\n", grant)
	}
	first, cancel, done := runApp(t, durableConfig(t, dir, withGrant(`    - {identity: agent-c, role: agent, scopes: ["tenant-a/**"]}
`)))
	conn := dialWith(t, first.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentC)))
	(&env{app: first, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}).mustExecute(t, &toolsdv1.Batch{
		SessionId: "sess-c", Scope: "tenant-a/bot", Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{"secret":"tenant-a-private"}`)},
	}, batchOptions{})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first App.Run() = %v", err)
	}

	for _, tc := range []struct {
		name  string
		grant string // agent-c's grant line, if any
		want  codes.Code
	}{
		{"revoked", "", codes.PermissionDenied},
		{"moved to another tenant", `    - {identity: agent-c, role: agent, scopes: ["tenant-c/**"]}
`, codes.PermissionDenied},
		{"a provider now", `    - {identity: agent-c, role: provider, scopes: ["tenant-a/**"]}
`, codes.PermissionDenied},
		{"still granted", `    - {identity: agent-c, role: agent, scopes: ["tenant-a/**"]}
`, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startConfig(t, durableConfig(t, dir, withGrant(tc.grant)))
			conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentC)))
			agentC := &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
			events, err := readAll(agentC, "sess-c")
			if status.Code(err) != tc.want {
				t.Errorf("ReadSession(sess-c) as agent-c = %d events, %v, want %v", len(events), err, tc.want)
			}
			if tc.want == codes.OK && len(events) != 2 {
				t.Errorf("ReadSession(sess-c) as agent-c = %d events, want its call and result", len(events))
			}
			watch, err := agentC.tools.WatchSession(t.Context(), &toolsdv1.WatchSessionRequest{SessionId: "sess-c"})
			if err == nil {
				_, err = watch.Recv()
			}
			if status.Code(err) != tc.want {
				t.Errorf("WatchSession(sess-c) as agent-c = %v, want %v", err, tc.want)
			}
		})
	}
}
