package app_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
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

// TestToolResultLimitAboveGlobalRefused: a tool's max_result_bytes can only lower
// limits.max_result_bytes: the provider stream refuses a larger result before the
// tool's own limit is consulted (and tells providers the global limit in its welcome),
// so a higher one is refused when the config is loaded or reloaded rather than
// silently ignored.
func TestToolResultLimitAboveGlobalRefused(t *testing.T) {
	const over = "limits: {max_result_bytes: 64KiB}\npolicy:\n  tools:\n    raw: {max_result_bytes: 128KiB}\n"
	cfg, err := config.Parse([]byte(baseConfig+over), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	if _, err := app.New(cfg); err == nil || !strings.Contains(err.Error(), "policy.tools.raw.max_result_bytes") {
		t.Errorf("app.New(tool limit over the global one) = %v, want an error naming tools.raw.max_result_bytes", err)
	}

	e := start(t, "limits: {max_result_bytes: 64KiB}\n")
	if err := e.app.Reload(cfg); err == nil || !strings.Contains(err.Error(), "policy.tools.raw.max_result_bytes") {
		t.Errorf("Reload(tool limit over the global one) = %v, want an error naming tools.raw.max_result_bytes", err)
	}
	under, err := config.Parse([]byte(baseConfig+"limits: {max_result_bytes: 64KiB}\npolicy:\n  tools:\n    raw: {max_result_bytes: 32KiB}\n"), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	if err := e.app.Reload(under); err != nil {
		t.Errorf("Reload(tool limit under the global one) = %v", err)
	}
}

// TestReloadToolResultLimitAboveFilesGlobalRefused: a reload whose file lowers
// limits.max_result_bytes under one of its tools' max_result_bytes is refused, though
// the running limit (which a reload does not change) is higher: the file is one toolsd
// would refuse at its next start, so the reload must not accept it.
func TestReloadToolResultLimitAboveFilesGlobalRefused(t *testing.T) {
	e := start(t, "")
	cfg, err := config.Parse([]byte(baseConfig+"limits: {max_result_bytes: 64KiB}\npolicy:\n  tools:\n    raw: {max_result_bytes: 128KiB}\n"), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	if _, err := app.New(cfg); err == nil {
		t.Fatal("app.New(tool limit over the file's global one) = nil, want an error")
	}
	if err := e.app.Reload(cfg); err == nil || !strings.Contains(err.Error(), "policy.tools.raw.max_result_bytes") {
		t.Errorf("Reload(tool limit over the file's global one) = %v, want an error naming tools.raw.max_result_bytes", err)
	}
}

// TestReloadToolResultLimitOverTheRunningGlobalSaysSo: a reload keeps the running
// limits.max_result_bytes, so a file raising it together with a tool's
// max_result_bytes is refused while the tool's is over the running one; the refusal
// says the limit it names is the running one, which the file no longer holds, and that
// the file's takes effect at the next start.
func TestReloadToolResultLimitOverTheRunningGlobalSaysSo(t *testing.T) {
	e := start(t, "limits: {max_result_bytes: 64KiB}\n")
	cfg, err := config.Parse([]byte(baseConfig+"limits: {max_result_bytes: 256KiB}\npolicy:\n  tools:\n    raw: {max_result_bytes: 128KiB}\n"), "test.yaml")
	if err != nil {
		t.Fatalf("config.Parse() = %v", err)
	}
	err = e.app.Reload(cfg)
	for _, want := range []string{"tools.raw.max_result_bytes", "running", "65536", "262144", "next start"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Reload(tool limit over the running global one, under the file's) = %v, want an error containing %q", err, want)
		}
	}
}
