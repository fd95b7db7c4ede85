package node_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNodeExamplesExplainTheirFlags runs provider.mjs and agent.mjs as a newcomer might
// first: with --help, which prints their flags and exits 0, and with a flag they do not
// have, a flag without its value, an argument that is not a flag, a value that is not a
// number or connection flags that cannot work together, each of which names what is wrong on stderr, prints the usage, and exits 2, as
// Go programs do, rather than end in a stack trace.
func TestNodeExamplesExplainTheirFlags(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)

	for _, tc := range []struct {
		script string
		flags  []string
	}{
		{"provider.mjs", []string{"--addr", "--name", "--scope", "--retake-window-ms", "--shutdown-grace-ms", "--welcome-timeout-ms", "--tls", "--ca", "--cert", "--key", "--server-name", "--token", "--token-file"}},
		{"agent.mjs", []string{"--addr", "--scope", "--session", "--deny", "--tls", "--ca", "--cert", "--key", "--server-name", "--token", "--token-file"}},
	} {
		program := strings.TrimSuffix(tc.script, ".mjs")
		t.Run(program, func(t *testing.T) {
			for _, help := range []string{"--help", "-h"} {
				stdout, stderr, code := runScript(t, node, tc.script, help)
				if code != 0 || stderr != "" {
					t.Errorf("node %s %s: exit %d, stderr %q; want exit 0 and no stderr", tc.script, help, code, stderr)
				}
				if !strings.HasPrefix(stdout, "Usage: node "+tc.script) {
					t.Errorf("node %s %s printed %q, want the usage", tc.script, help, stdout)
				}
				for _, f := range tc.flags {
					if !strings.Contains(stdout, "  "+f) {
						t.Errorf("node %s %s does not list %s:\n%s", tc.script, help, f, stdout)
					}
				}
			}
			bad := []struct {
				args []string
				want string
			}{
				{[]string{"--adr", "127.0.0.1:1"}, program + ": Unknown option '--adr'"},
				{[]string{"--addr"}, program + ": Option '--addr <value>' argument missing"},
				{[]string{"127.0.0.1:1"}, program + ": Unexpected argument '127.0.0.1:1'"},
				// A token toolsd would get in clear, a certificate without its key, two tokens.
				{[]string{"--token-file", "token.txt"}, program + ": a bearer token needs TLS"},
				{[]string{"--ca", "ca.pem", "--cert", "client.pem"}, program + ": --cert and --key go together"},
				{[]string{"--tls", "--token", "t0k3n", "--token-file", "token.txt"}, program + ": --token and --token-file both give the bearer token"},
			}
			if program == "provider" {
				bad = append(bad, struct {
					args []string
					want string
				}{[]string{"--retake-window-ms", "2m"}, "provider: --retake-window-ms 2m: is not a number"})
			}
			for _, b := range bad {
				stdout, stderr, code := runScript(t, node, tc.script, b.args...)
				if code != 2 {
					t.Errorf("node %s %v: exit %d, want 2", tc.script, b.args, code)
				}
				first, rest, _ := strings.Cut(stderr, "\n")
				if !strings.HasPrefix(first, b.want) {
					t.Errorf("node %s %v: stderr begins %q, want %q", tc.script, b.args, first, b.want)
				}
				if !strings.HasPrefix(rest, "Usage: node "+tc.script) || strings.Contains(stderr, "    at ") {
					t.Errorf("node %s %v: stderr after the error is not the usage alone:\n%s", tc.script, b.args, stderr)
				}
				if stdout != "" {
					t.Errorf("node %s %v: stdout %q, want none", tc.script, b.args, stdout)
				}
			}
		})
	}
}

// runScript runs `node script args...` in the example's directory to its end and
// returns what it printed and its exit code.
func runScript(t *testing.T, node, script string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a safety net only
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("node %s %v: %v", script, args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}
