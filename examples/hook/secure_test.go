package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/examples/hook/examplehook"
	"github.com/toolsd/toolsd/examples/internal/securetoolsd"
	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestGuardsSecureToolsd runs the hook, with the flags README's Security section asks of
// it, against a toolsd that serves TLS and authenticates it by a bearer token or a
// client certificate, and against the quick start's plaintext one without them, and
// sees it deny a call. toolsd requires the hook, so calls fail
// POLICY_UNAVAILABLE until it is connected.
func TestGuardsSecureToolsd(t *testing.T) {
	for _, mode := range securetoolsd.Modes {
		t.Run(string(mode), func(t *testing.T) {
			s := securetoolsd.Start(t, mode, "hooks: {required: [{name: "+examplehook.Name+", stage: pre_execute}]}\n")
			s.RunProvider(t, exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
			args := s.Args(securetoolsd.Hook)
			o, err := parseFlags(args)
			if err != nil {
				t.Fatalf("parseFlags(%q) = %v", args, err)
			}
			securetoolsd.Background(t, "run()", func(ctx context.Context) error { return run(ctx, o) })

			agent := s.Dial(t, securetoolsd.Agent)
			var got *toolsdv1.ToolResult
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				results := securetoolsd.Execute(t, agent, "secure-hook",
					&toolsdv1.ToolCall{CallId: "c1", Name: "echo", ArgumentsJson: `{"text": "rm -rf /"}`})
				if len(results) != 1 {
					t.Fatalf("ExecuteBatch(echo) results = %v, want one", results)
				}
				if got = results[0]; got.GetError().GetCode() != "POLICY_UNAVAILABLE" {
					break // the hook is connected
				}
			}
			if got.GetError().GetCode() != "DENIED" || !strings.Contains(got.GetError().GetReason(), examplehook.DenyReason) {
				t.Errorf("ExecuteBatch(echo rm -rf) result = %v, want DENIED by the hook (%q)", got, examplehook.DenyReason)
			}
		})
	}
}
