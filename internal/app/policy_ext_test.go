package app_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestCELRuleDeniesOneCallOfABatch: the rule matches one call's arguments; its siblings
// run, and a private reason stays out of the model's content.
func TestCELRuleDeniesOneCallOfABatch(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {scope: "**", tool: echo, when: 'args.text.contains("forbidden")', decision: deny, reason: "echo may not say forbidden"}
    - {scope: "support/**", tool: add, when: 'double(args.a) > 100.0', decision: deny, reason: "big sums need a manager", private: true}
`)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-cel", Scope: "support/bot", Calls: []*toolsdv1.ToolCall{
		call("c1", "echo", `{"text":"fine"}`),
		call("c2", "echo", `{"text":"this is forbidden"}`),
		call("c3", "add", `{"a":500,"b":1}`),
		call("c4", "add", `{"a":5,"b":1}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"", "DENIED", "DENIED", ""}, resultCodes(out.results)); diff != "" {
		t.Fatalf("codes (-want +got):\n%s", diff)
	}
	if got := out.results[1].GetContent(); got != "Error: echo may not say forbidden" {
		t.Errorf("public denial content = %q", got)
	}
	if r := out.results[2]; r.GetContent() != "Error: call denied by policy" || r.GetError().GetReason() != "big sums need a manager" {
		t.Errorf("private denial = %v, want generic content and the reason for users only", r)
	}
	if got := out.results[3].GetContent(); got != "6" {
		t.Errorf("sibling add = %q, want 6", got)
	}
}
