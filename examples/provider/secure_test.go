package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolsd/toolsd/examples/internal/securetoolsd"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestServesSecureToolsd runs the provider, with the flags README's Security section
// asks of it, against a toolsd that serves TLS and authenticates it by a bearer token
// or a client certificate, and against the quick start's plaintext one without them,
// and calls its echo tool.
func TestServesSecureToolsd(t *testing.T) {
	for _, mode := range securetoolsd.Modes {
		t.Run(string(mode), func(t *testing.T) {
			s := securetoolsd.Start(t, mode, "")
			args := append(s.Args(securetoolsd.Provider), "-notes", filepath.Join(t.TempDir(), "notes.txt"))
			o, err := parseFlags(args)
			if err != nil {
				t.Fatalf("parseFlags(%q) = %v", args, err)
			}
			securetoolsd.Background(t, "run()", func(ctx context.Context) error { return run(ctx, o) })

			agent := s.Dial(t, securetoolsd.Agent)
			securetoolsd.WaitForTool(t, agent, "echo")
			results := securetoolsd.Execute(t, agent, "secure-provider",
				&toolsdv1.ToolCall{CallId: "c1", Name: "echo", ArgumentsJson: `{"text": "over TLS"}`})
			if len(results) != 1 || results[0].GetIsError() || results[0].GetContent() != "over TLS" {
				t.Errorf("ExecuteBatch(echo) results = %v, want one with content %q", results, "over TLS")
			}
		})
	}
}
