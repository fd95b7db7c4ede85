package app_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/config"
)

// TestConfigGuardDeniesAfterApprovalUntilReloaded: a guard of the config's policy
// denies a call the rules allowed, and one they asked about and the client approved,
// with GUARD_DENIED in the result and in calls_total; a private guard's reason stays out
// of the model's content. A reload without the guards lets the same calls run.
func TestConfigGuardDeniesAfterApprovalUntilReloaded(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: add, decision: ask, reason: "sums need a look"}
  guards:
    - {scope: "**", tool: echo, when: 'args.text.contains("rm -rf")', reason: "echo may not say rm -rf"}
    - {tool: add, when: 'args.a > 100.0', reason: "limit list 3", user_reason: "big sums are blocked", private: true}
`)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	approve := batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
		return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), RequestId: r.GetRequestId(), Approved: true}
	}}
	batch := func(session string) *outcome {
		return e.mustExecute(t, &toolsdv1.Batch{SessionId: session, Scope: "support/bot", Calls: []*toolsdv1.ToolCall{
			call("c1", "echo", `{"text":"fine"}`),
			call("c2", "echo", `{"text":"rm -rf /"}`),
			call("c3", "add", `{"a":500,"b":1}`),
			call("c4", "add", `{"a":5,"b":1}`),
		}}, approve)
	}

	out := batch("s-guard")
	if diff := cmp.Diff([]string{"", "GUARD_DENIED", "GUARD_DENIED", ""}, resultCodes(out.results)); diff != "" {
		t.Fatalf("codes (-want +got):\n%s", diff)
	}
	if len(out.approvals) != 2 {
		t.Errorf("approval requests = %d, want 2 (both adds asked before the guards)", len(out.approvals))
	}
	if r := out.results[1]; r.GetContent() != "Error: echo may not say rm -rf" {
		t.Errorf("public guard denial = %v, want the guard's reason as content", r)
	}
	if r := out.results[2]; r.GetContent() != "Error: call denied by guard" || r.GetError().GetReason() != "big sums are blocked" {
		t.Errorf("private guard denial = %v, want generic content and the user reason in error.reason", r)
	}
	if got := out.results[3].GetContent(); got != "6" {
		t.Errorf("approved add = %q, want 6", got)
	}
	for _, name := range []string{"echo", "add"} {
		if n := metricValue(t, e.app, "toolsd_pipeline_calls_total", "tool", name, "code", "GUARD_DENIED"); n != 1 {
			t.Errorf("toolsd_pipeline_calls_total{tool=%q,code=GUARD_DENIED} = %v, want 1", name, n)
		}
	}

	cfg, err := config.Parse([]byte(baseConfig+"policy:\n  rules:\n    - {tool: add, decision: ask}\n"), "reload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Reload(cfg); err != nil {
		t.Fatalf("Reload() = %v", err)
	}
	out = batch("s-guard-reloaded")
	if diff := cmp.Diff([]string{"", "", "", ""}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes after a reload without guards (-want +got):\n%s", diff)
	}
}
