package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// writeFile writes text to path, as an operator's edit or a secret manager's rotation does.
func writeFile(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestReloadAppliesTheTokenFile is what SIGHUP does after an operator revoked a token by
// deleting its line and issued another: from its next RPC the revoked token is refused
// (UNAUTHENTICATED, INVALID_TOKEN) and the new one accepted, while a stream the revoked
// token opened keeps running (a stream is authenticated once, when it opens). A token
// file the reload cannot read is refused whole: the reload counts as failed and the
// tokens in force stay.
func TestReloadAppliesTheTokenFile(t *testing.T) {
	const tokenAgentANew = "agent-a-token-renewed-0b5d8e2f6a"
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.txt")
	writeFile(t, tokens, tokenAgentA+" agent-a\n"+tokenOperator+" operator\n")
	text := baseConfig + fmt.Sprintf(`
auth:
  token_file: %s
  grants:
    - {identity: agent-a, role: agent, scopes: ["tenant-a/**"]}
    - {identity: operator, role: operator}
`, tokens)
	cfgPath := filepath.Join(dir, "toolsd.yaml")
	writeFile(t, cfgPath, text)
	e := start(t, text[len(baseConfig):])
	agentA, agentANew, operator := e.as(t, tokenAgentA), e.as(t, tokenAgentANew), e.as(t, tokenOperator)
	schemas := func(c *env) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := c.tools.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: "tenant-a"})
		return err
	}
	unknown := func(session string, step uint64) *toolsdv1.Batch {
		return &toolsdv1.Batch{SessionId: session, Scope: "tenant-a", Step: step, Calls: []*toolsdv1.ToolCall{call("c", "nope", `{}`)}}
	}

	agentA.mustExecute(t, unknown("s-revoked", 0), batchOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	watch, err := agentA.tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: "s-revoked"})
	if err != nil {
		t.Fatalf("WatchSession(s-revoked) as agent-a = %v", err)
	}
	for range 2 { // the call and its result: the watch is open and authenticated
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("WatchSession(s-revoked) as agent-a: Recv() = %v", err)
		}
	}
	if err := schemas(agentANew); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Schemas with a token not yet in token_file = %v, want Unauthenticated", err)
	}

	writeFile(t, tokens, tokenAgentANew+" agent-a\n"+tokenOperator+" operator\n")
	if _, err := e.app.ReloadFile(cfgPath); err != nil {
		t.Fatalf("ReloadFile() with agent-a's token replaced = %v", err)
	}
	if err := schemas(agentA); status.Code(err) != codes.Unauthenticated || reason(err) != "INVALID_TOKEN" {
		t.Errorf("Schemas with the token revoked by the reload = %v (reason %q), want Unauthenticated, INVALID_TOKEN", err, reason(err))
	}
	if err := schemas(agentANew); err != nil {
		t.Errorf("Schemas with the token the reload added = %v, want nil", err)
	}
	// The watch the revoked token opened runs on: it streams the operator's next step.
	operator.mustExecute(t, unknown("s-revoked", 1), batchOptions{})
	for range 2 {
		if _, err := watch.Recv(); err != nil {
			t.Fatalf("the watch opened before the revocation: Recv() = %v, want the next step's events", err)
		}
	}

	writeFile(t, tokens, "short agent-a\n")
	if _, err := e.app.ReloadFile(cfgPath); err == nil {
		t.Fatal("ReloadFile() with a token file toolsd cannot read = nil, want it refused")
	}
	if err := schemas(agentANew); err != nil {
		t.Errorf("Schemas after a refused reload = %v, want the tokens in force to stay", err)
	}
	if err := schemas(agentA); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Schemas with the revoked token after a refused reload = %v, want Unauthenticated", err)
	}
	_, body := scrape(t, e.app.AdminAddr(), "/metrics")
	if got := sample(t, body, `toolsd_config_reloads_total{result="failure"}`); got != 1 {
		t.Errorf("toolsd_config_reloads_total{result=\"failure\"} = %v, want 1", got)
	}
}
