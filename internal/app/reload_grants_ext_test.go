package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// grantsConfig writes a toolsd.yaml whose auth section has the tenancy tests' tokens
// and grantLines as its grants, and returns its path and its text after baseConfig.
func grantsConfig(t *testing.T, dir, grantLines string) (path, extra string) {
	t.Helper()
	tokens := filepath.Join(dir, "tokens.txt")
	writeFile(t, tokens, fmt.Sprintf("%s agent-a\n%s agent-b\n%s provider-a\n%s operator\n",
		tokenAgentA, tokenAgentB, tokenProviderA, tokenOperator))
	extra = fmt.Sprintf("\nauth:\n  token_file: %s\n  grants:\n%s", tokens, grantLines)
	path = filepath.Join(dir, "toolsd.yaml")
	writeFile(t, path, baseConfig+extra)
	return path, extra
}

// TestReloadAppliesTheGrants is what SIGHUP does after an operator added a tenant's
// agent and revoked another's rights in auth.grants: from its next RPC agent-b runs
// batches in tenant-b, and agent-a is refused ExecuteBatch and Schemas in tenant-a
// (PERMISSION_DENIED), while the WatchSession agent-a opened before the reload keeps
// streaming: a stream keeps what it was authorized with when it opened. Grants that
// do not build (a bad scope glob) are refused whole, and the grants in force stay.
func TestReloadAppliesTheGrants(t *testing.T) {
	dir := t.TempDir()
	const agentA = "    - {identity: agent-a, role: agent, scopes: [\"tenant-a/**\"]}\n"
	const agentB = "    - {identity: agent-b, role: agent, scopes: [\"tenant-b/**\"]}\n"
	const operator = "    - {identity: operator, role: operator}\n"
	cfgPath, extra := grantsConfig(t, dir, agentA+operator)
	e := start(t, extra)
	a, b, op := e.as(t, tokenAgentA), e.as(t, tokenAgentB), e.as(t, tokenOperator)
	batch := func(session, scope string, step uint64) *toolsdv1.Batch {
		return &toolsdv1.Batch{SessionId: session, Scope: scope, Step: step, Calls: []*toolsdv1.ToolCall{call("c", "nope", `{}`)}}
	}
	schemas := func(c *env, scope string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := c.tools.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: scope})
		return err
	}
	reload := func(grantLines string) error {
		t.Helper()
		writeFile(t, cfgPath, strings.Replace(baseConfig+extra, agentA+operator, grantLines, 1))
		_, err := e.app.ReloadFile(cfgPath)
		return err
	}

	a.mustExecute(t, batch("s-a", "tenant-a", 0), batchOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	watch, err := a.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s-a"})
	if err != nil {
		t.Fatalf("WatchSession(s-a) as agent-a = %v", err)
	}
	for range 2 { // the call and its result: the watch is open and authorized
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("WatchSession(s-a) as agent-a: Recv() = %v", err)
		}
	}
	if _, err := b.execute(t, batch("s-b", "tenant-b", 0), batchOptions{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("ExecuteBatch(tenant-b) as agent-b before its grant = %v, want PermissionDenied", err)
	}

	if err := reload(agentB + operator); err != nil {
		t.Fatalf("ReloadFile() with agent-b's grant added and agent-a's removed = %v", err)
	}
	if out := b.mustExecute(t, batch("s-b", "tenant-b", 0), batchOptions{}); len(out.results) != 1 {
		t.Errorf("ExecuteBatch(tenant-b) as agent-b after the reload granted it: %d results, want 1", len(out.results))
	}
	if _, err := a.execute(t, batch("s-a", "tenant-a", 1), batchOptions{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ExecuteBatch(tenant-a) as agent-a after the reload revoked its grant = %v, want PermissionDenied", err)
	}
	if err := schemas(a, "tenant-a"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Schemas(tenant-a) as agent-a after the reload revoked its grant = %v, want PermissionDenied", err)
	}
	// The watch agent-a opened before the reload streams the operator's next step.
	op.mustExecute(t, batch("s-a", "tenant-a", 1), batchOptions{})
	for range 2 {
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("the watch opened before the reload: Recv() = %v, want the next step's events", err)
		}
	}

	bad := "    - {identity: agent-a, role: agent, scopes: [\"tenant-a/[\"]}\n"
	if err := reload(agentB + bad + operator); err == nil || !strings.Contains(err.Error(), "auth.grants[1]") {
		t.Fatalf("ReloadFile() with a bad scope glob = %v, want it refused naming auth.grants[1]", err)
	}
	if err := schemas(b, "tenant-b"); err != nil {
		t.Errorf("Schemas(tenant-b) as agent-b after a refused reload = %v, want the grants in force to stay", err)
	}
	if err := schemas(a, "tenant-a"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Schemas(tenant-a) as agent-a after a refused reload = %v, want PermissionDenied", err)
	}
	_, body := scrape(t, e.app.AdminAddr(), "/metrics")
	if got := sample(t, body, `toolsd_config_reloads_total{result="failure"}`); got != 1 {
		t.Errorf("toolsd_config_reloads_total{result=\"failure\"} = %v, want 1", got)
	}
}

// TestReloadedGrantsAndOpenProviderStreams: a provider stream open before a reload that
// moved provider-a from tenant-a to tenant-c keeps registering under the grants it was
// admitted with (tenant-a, not tenant-c), and a stream opened after it gets the new ones.
func TestReloadedGrantsAndOpenProviderStreams(t *testing.T) {
	dir := t.TempDir()
	const operator = "    - {identity: operator, role: operator}\n"
	const inA = "    - {identity: provider-a, role: provider, scopes: [\"tenant-a/**\"]}\n"
	const inC = "    - {identity: provider-a, role: provider, scopes: [\"tenant-c/**\"]}\n"
	cfgPath, extra := grantsConfig(t, dir, inA+operator)
	e := start(t, extra)
	conn := dialWith(t, e.app.Addr(), grpc.WithPerRPCCredentials(bearer(tokenProviderA)))
	before, err := connectRaw(t, conn, "before")
	if err != nil {
		t.Fatalf("Connect() as provider-a = %v", err)
	}
	registers := func(p *rawProvider, scope, tool string) []string {
		t.Helper()
		return statusCodes(p.register(t, scope, def(tool)))
	}
	if got := registers(before, "tenant-a", "a_before"); !slices.Equal(got, []string{""}) {
		t.Fatalf("provider-a registering into tenant-a = %q, want accepted", got)
	}

	writeFile(t, cfgPath, strings.Replace(baseConfig+extra, inA, inC, 1))
	if _, err := e.app.ReloadFile(cfgPath); err != nil {
		t.Fatalf("ReloadFile() with provider-a moved to tenant-c = %v", err)
	}
	if got := registers(before, "tenant-a", "a_kept"); !slices.Equal(got, []string{""}) {
		t.Errorf("the stream open before the reload registering into tenant-a = %q, want accepted (its grants)", got)
	}
	if got := registers(before, "tenant-c", "c_before"); !slices.Equal(got, []string{"PERMISSION_DENIED"}) {
		t.Errorf("the stream open before the reload registering into tenant-c = %q, want [PERMISSION_DENIED]", got)
	}
	after, err := connectRaw(t, conn, "after")
	if err != nil {
		t.Fatalf("Connect() as provider-a after the reload = %v", err)
	}
	if got := registers(after, "tenant-c", "c_after"); !slices.Equal(got, []string{""}) {
		t.Errorf("a stream opened after the reload registering into tenant-c = %q, want accepted", got)
	}
	if got := registers(after, "tenant-a", "a_after"); !slices.Equal(got, []string{"PERMISSION_DENIED"}) {
		t.Errorf("a stream opened after the reload registering into tenant-a = %q, want [PERMISSION_DENIED]", got)
	}
}
