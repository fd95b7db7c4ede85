package app_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

const tokenAgentC = "agent-c-token-6d2f8a1c4e9b7305"

// agentCAuth is tenantAuth plus agent-c's token and grant line, if any.
func agentCAuth(t *testing.T, grant string) string {
	t.Helper()
	return tenantAuthWith(t, tokenAgentC+" agent-c\n", grant)
}

// agentCRanInTenantA runs toolsd with a durable log in a new directory, in which agent-c,
// an agent of tenant-a, claims sess-c in tenant-a/bot with one batch; it returns the
// directory once toolsd has stopped.
func agentCRanInTenantA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	first, cancel, done := runApp(t, durableConfig(t, dir, agentCAuth(t, `    - {identity: agent-c, role: agent, scopes: ["tenant-a/**"]}
`)))
	conn := dialWith(t, first.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentC)))
	(&env{app: first, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}).mustExecute(t, &toolsdv1.Batch{
		SessionId: "sess-c", Scope: "tenant-a/bot", Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{"secret":"tenant-a-private"}`)},
	}, batchOptions{})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first App.Run() = %v", err)
	}
	return dir
}

// TestOwnerReadsOnlyWhileGrantedTheScope: owning a session is not a grant. After a
// restart that revokes the owner's grant, or moves it to another tenant, the owner may
// no longer read or watch what it ran in the scope it lost; while its grant still
// covers that scope it reads as before.
func TestOwnerReadsOnlyWhileGrantedTheScope(t *testing.T) {
	dir := agentCRanInTenantA(t)

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
			e := startConfig(t, durableConfig(t, dir, agentCAuth(t, tc.grant)))
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

// TestMovedOwnerNoLongerUsesItsSession: an owner moved to another tenant can neither
// append its new tenant's calls to the session it claimed in the old one (where that
// tenant's operators read them) nor resolve tools against that session's history.
func TestMovedOwnerNoLongerUsesItsSession(t *testing.T) {
	dir := agentCRanInTenantA(t)
	e := startConfig(t, durableConfig(t, dir, agentCAuth(t, `    - {identity: agent-c, role: agent, scopes: ["tenant-c/**"]}
`)))
	agentC, operator := e.as(t, tokenAgentC), e.as(t, tokenOperator)

	for _, tc := range []struct {
		name string
		do   func(t *testing.T, session string) error
	}{
		{"ExecuteBatch", func(t *testing.T, session string) error {
			_, err := agentC.execute(t, &toolsdv1.Batch{SessionId: session, Scope: "tenant-c", Step: 2,
				Calls: []*toolsdv1.ToolCall{call("moved", "nope", `{}`)}}, batchOptions{})
			return err
		}},
		{"ResolveToolSet", func(t *testing.T, session string) error {
			_, err := agentC.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "tenant-c", SessionId: session, Step: 2})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(t, "sess-c"); status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s(sess-c) in tenant-c as agent-c = %v, want PermissionDenied", tc.name, err)
			}
			// Its grant of tenant-c holds: a session of its own there is fine.
			if err := tc.do(t, "sess-c-new"); err != nil {
				t.Errorf("%s(sess-c-new) in tenant-c as agent-c = %v, want nil", tc.name, err)
			}
		})
	}
	for _, ev := range operator.readSession(t, "sess-c") {
		if ev.GetToolCall().GetCallId() == "moved" {
			t.Errorf("sess-c, claimed in tenant-a, holds agent-c's call from tenant-c: %v", ev.GetToolCall())
		}
	}
}

// TestOwnerThatLostTheScopeIsToldSo: an owner refused its own session because its grants
// no longer cover the scope the session was claimed in is told that, not that the
// session is another identity's (or nobody's): it owns it, and says so to nobody else.
func TestOwnerThatLostTheScopeIsToldSo(t *testing.T) {
	dir := agentCRanInTenantA(t)
	e := startConfig(t, durableConfig(t, dir, agentCAuth(t, `    - {identity: agent-c, role: agent, scopes: ["tenant-c/**"]}
`)))
	conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentC)))
	agentC := &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}

	_, readErr := readAll(agentC, "sess-c")
	_, resolveErr := agentC.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "tenant-c", SessionId: "sess-c", Step: 2})
	_, execErr := agentC.execute(t, &toolsdv1.Batch{SessionId: "sess-c", Scope: "tenant-c", Step: 2,
		Calls: []*toolsdv1.ToolCall{call("moved", "nope", `{}`)}}, batchOptions{})
	for name, err := range map[string]error{"ReadSession": readErr, "ResolveToolSet": resolveErr, "ExecuteBatch": execErr} {
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(msg, "no longer cover") ||
			strings.Contains(msg, "another identity") || strings.Contains(msg, "not this identity's") {
			t.Errorf("%s(sess-c) as its owner, moved from tenant-a = %v, want PermissionDenied saying its grants no longer cover where it was claimed", name, err)
		}
	}
}
