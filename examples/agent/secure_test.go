package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolsd/toolsd/examples/internal/securetoolsd"
	"github.com/toolsd/toolsd/examples/provider/exampletools"
)

// TestRunsAgainstSecureToolsd runs the agent, with the flags README's Security section
// asks of it, against a toolsd that serves TLS and authenticates it by a JWT or a
// client certificate, and against the quick start's plaintext one without them, with
// the example tools served.
func TestRunsAgainstSecureToolsd(t *testing.T) {
	for _, mode := range securetoolsd.Modes {
		t.Run(string(mode), func(t *testing.T) {
			s := securetoolsd.Start(t, mode, "")
			s.RunProvider(t, exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
			args := append(s.Args(securetoolsd.Agent), "-session", "secure-agent")
			o, err := parseFlags(args)
			if err != nil {
				t.Fatalf("parseFlags(%q) = %v", args, err)
			}
			var out strings.Builder
			if err := run(t.Context(), o, &out); err != nil {
				t.Fatalf("run() = %v, output:\n%s", err, out.String())
			}
			for _, want := range []string{"result 0 call_1: 42", "result 1 call_2: hello from the agent", "settled: 3 results"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("run() printed no %q; output:\n%s", want, out.String())
				}
			}
		})
	}
}
