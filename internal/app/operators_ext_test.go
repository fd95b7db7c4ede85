package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/session"
)

const (
	tokenOpA      = "op-a-token-0a1b2c3d4e5f60718293"
	tokenOpGlobal = "op-global-token-9f8e7d6c5b4a3928"
)

// operatorAuth is tenantAuth plus an operator of tenant-a only and an operator of the
// global scope "" only.
func operatorAuth(t *testing.T) string {
	t.Helper()
	return tenantAuthWith(t, tokenOpA+" op-a\n"+tokenOpGlobal+" op-global\n", `    - {identity: op-a, role: operator, scopes: ["tenant-a/**"]}
    - {identity: op-global, role: operator, scopes: [""]}
`)
}

// TestScopedOperators: an operator acts on another identity's session only as an
// operator of the scope the session was claimed in (or of every scope), and lifts a
// restriction only in the scope it masks. A grant of the global scope "" covers that
// scope only.
func TestScopedOperators(t *testing.T) {
	e := start(t, operatorAuth(t))
	agentA, agentB, opA, opGlobal, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOpA), e.as(t, tokenOpGlobal), e.as(t, tokenOperator)
	agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-a",
		Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{}`)}}, batchOptions{})
	agentB.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-b", Scope: "tenant-b",
		Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{"secret":"tenant-b-private"}`)}}, batchOptions{})

	t.Run("a tenant's operator stays in its tenant", func(t *testing.T) {
		if _, err := readAll(opA, "sess-b"); status.Code(err) != codes.PermissionDenied {
			t.Errorf("ReadSession(sess-b) as op-a = %v, want PermissionDenied", err)
		}
		_, err := opA.execute(t, &toolsdv1.Batch{SessionId: "sess-b", Scope: "tenant-a", Step: 2,
			Calls: []*toolsdv1.ToolCall{call("injected", "nope", `{}`)}}, batchOptions{})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("ExecuteBatch(sess-b, scope tenant-a) as op-a = %v, want PermissionDenied", err)
		}
		for _, ev := range agentB.readSession(t, "sess-b") {
			if ev.GetToolCall().GetCallId() == "injected" {
				t.Errorf("agent-b's session holds op-a's call: %v", ev.GetToolCall())
			}
		}
		// In its own tenant it reads and writes other identities' sessions.
		if _, err := readAll(opA, "sess-a"); err != nil {
			t.Errorf("ReadSession(sess-a) as op-a = %v, want nil", err)
		}
		opA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-a", Scope: "tenant-a", Step: 2,
			Calls: []*toolsdv1.ToolCall{call("op", "nope", `{}`)}}, batchOptions{})
	})

	t.Run("a global-scope operator is not an operator everywhere", func(t *testing.T) {
		if events, err := readAll(opGlobal, "sess-b"); status.Code(err) != codes.PermissionDenied {
			t.Errorf("ReadSession(sess-b) as op-global = %d events, %v, want PermissionDenied", len(events), err)
		}
		if _, err := readAll(operator, "sess-b"); err != nil {
			t.Errorf("ReadSession(sess-b) as the operator of every scope = %v, want nil", err)
		}
	})

	t.Run("restrictions are lifted in their own scope", func(t *testing.T) {
		rb, err := operator.tools.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: "tenant-b", Deny: []string{"danger"}})
		if err != nil {
			t.Fatal(err)
		}
		for who, c := range map[string]*env{"op-global": opGlobal, "op-a": opA} {
			if _, err := c.tools.Unrestrict(t.Context(), &toolsdv1.UnrestrictRequest{RestrictionId: rb.GetRestrictionId()}); status.Code(err) != codes.PermissionDenied {
				t.Errorf("Unrestrict(tenant-b's restriction) as %s = %v, want PermissionDenied", who, err)
			}
		}
		ra, err := opA.tools.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: "tenant-a/bot", Deny: []string{"danger"}})
		if err != nil {
			t.Fatalf("Restrict(tenant-a/bot) as op-a = %v", err)
		}
		if _, err := opA.tools.Unrestrict(t.Context(), &toolsdv1.UnrestrictRequest{RestrictionId: ra.GetRestrictionId()}); err != nil {
			t.Errorf("Unrestrict(its own tenant's restriction) as op-a = %v, want nil", err)
		}
		// An unknown id answers like a foreign one to all but an operator of every scope.
		if _, err := opA.tools.Unrestrict(t.Context(), &toolsdv1.UnrestrictRequest{RestrictionId: "rst_unknown"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("Unrestrict(unknown) as op-a = %v, want PermissionDenied", err)
		}
		if _, err := operator.tools.Unrestrict(t.Context(), &toolsdv1.UnrestrictRequest{RestrictionId: "rst_unknown"}); status.Code(err) != codes.NotFound {
			t.Errorf("Unrestrict(unknown) as the operator of every scope = %v, want NotFound", err)
		}
	})
}

// TestOwnerSurvivesRetentionAndRestart: retention removes a session with its recorded
// owner; when its owner executes in the id again, the claim is recorded again, so after
// a restart another tenant's agent can neither take the id over nor read what followed.
func TestOwnerSurvivesRetentionAndRestart(t *testing.T) {
	dir := t.TempDir()
	authYAML := tenantAuth(t)
	var store session.Store
	wrap := app.WithSessionStoreWrapper(func(s session.Store) session.Store { store = s; return s })
	first, cancel, done := runApp(t, durableConfig(t, dir, authYAML), wrap)
	conn := dialWith(t, first.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA)))
	agentA := &env{app: first, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-r", Scope: "tenant-a",
		Calls: []*toolsdv1.ToolCall{call("c0", "nope", `{"old":1}`)}}, batchOptions{})

	sweeper, ok := store.(interface{ Sweep(time.Time) (int, error) })
	if !ok {
		t.Fatalf("%T has no Sweep", store)
	}
	if n, err := sweeper.Sweep(time.Now().Add(10000 * time.Hour)); err != nil || n != 1 {
		t.Fatalf("Sweep() = %d, %v, want 1 session removed", n, err)
	}
	agentA.mustExecute(t, &toolsdv1.Batch{SessionId: "sess-r", Scope: "tenant-a",
		Calls: []*toolsdv1.ToolCall{call("c1", "nope", `{"secret":"agent-a-private-data"}`)}}, batchOptions{})
	if owner, ok, err := store.Owner(context.Background(), "sess-r"); err != nil || !ok || owner.Identity != "agent-a" {
		t.Errorf("recorded owner of sess-r after retention and a new batch = %+v, %v, %v, want agent-a", owner, ok, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first App.Run() = %v", err)
	}

	e := startConfig(t, durableConfig(t, dir, authYAML))
	conn = dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentB)))
	agentB := &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	if _, err := agentB.execute(t, &toolsdv1.Batch{SessionId: "sess-r", Scope: "tenant-b",
		Calls: []*toolsdv1.ToolCall{call("c9", "nope", `{}`)}}, batchOptions{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ExecuteBatch(agent-a's sess-r) as agent-b after a restart = %v, want PermissionDenied", err)
	}
	events, err := readAll(agentB, "sess-r")
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("ReadSession(agent-a's sess-r) as agent-b = %v, want PermissionDenied", err)
	}
	for _, ev := range events {
		if strings.Contains(ev.String(), "agent-a-private-data") {
			t.Errorf("agent-b read agent-a's call: %v", ev.GetToolCall())
		}
	}
}

// TestForeignToolSetNamesNoScope: a tool set id resolved in one tenant, used in another,
// is refused without naming the tenant it came from: another identity's set is an
// unknown id.
func TestForeignToolSetNamesNoScope(t *testing.T) {
	e := start(t, tenantAuth(t))
	conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA)))
	agentA := toolsdv1.NewToolServiceClient(conn)
	conn = dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentB)))
	agentB := &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	ts, err := agentA.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "tenant-a/secret-project", SessionId: "s-a", Turn: 1, Step: 1})
	if err != nil {
		t.Fatalf("ResolveToolSet() as agent-a = %v", err)
	}
	_, schemasErr := agentB.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "tenant-b", ToolSetId: ts.GetToolSetId()})
	_, execErr := agentB.execute(t, &toolsdv1.Batch{SessionId: "s-b", Scope: "tenant-b", ToolSetId: ts.GetToolSetId(),
		Calls: []*toolsdv1.ToolCall{call("c", "nope", `{}`)}}, batchOptions{})
	for name, err := range map[string]error{"Schemas": schemasErr, "ExecuteBatch": execErr} {
		if status.Code(err) != codes.NotFound || strings.Contains(err.Error(), "tenant-a") {
			t.Errorf("%s with tenant-a's tool set as agent-b = %v, want NotFound not naming tenant-a", name, err)
		}
	}
}

// TestRefusedBatchClaimsNoSession: a batch refused as malformed does not claim its
// session: an owner without events would never be removed by retention.
func TestRefusedBatchClaimsNoSession(t *testing.T) {
	var store session.Store
	e := start(t, tenantAuth(t), app.WithSessionStoreWrapper(func(s session.Store) session.Store { store = s; return s }))
	conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenAgentA)))
	agentA := &env{app: e.app, conn: conn, tools: toolsdv1.NewToolServiceClient(conn)}
	for name, b := range map[string]*toolsdv1.Batch{
		"duplicate call ids": {SessionId: "s-dup", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("c", "nope", `{}`), call("c", "nope", `{}`)}},
		"missing call id":    {SessionId: "s-noid", Scope: "tenant-a", Calls: []*toolsdv1.ToolCall{call("", "nope", `{}`)}},
		"unknown tool set":   {SessionId: "s-ts", Scope: "tenant-a", ToolSetId: "ts_unknown", Calls: []*toolsdv1.ToolCall{call("c", "nope", `{}`)}},
	} {
		if _, err := agentA.execute(t, b, batchOptions{}); err == nil {
			t.Errorf("%s: ExecuteBatch() = nil, want it refused", name)
		}
		if owner, ok, err := store.Owner(t.Context(), b.GetSessionId()); err != nil || ok {
			t.Errorf("%s: session %s has owner %+v (%v) after a refused batch, want none", name, b.GetSessionId(), owner, err)
		}
	}
}
