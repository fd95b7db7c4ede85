package node_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolsd/toolsd/examples/internal/securetoolsd"
)

// TestNodeExamplesReachSecureToolsd runs provider.mjs and agent.mjs, with the flags
// README's Security section asks of them, against a toolsd that serves TLS and
// authenticates them by bearer tokens (the agent's a JWT) or client certificates, and
// against the quick start's plaintext one without them.
func TestNodeExamplesReachSecureToolsd(t *testing.T) {
	node, npm := requireNode(t)
	installDeps(t, npm)
	for _, mode := range securetoolsd.Modes {
		t.Run(string(mode), func(t *testing.T) {
			s := securetoolsd.Start(t, mode, "")
			provider := startNode(t, node, "provider.mjs", nodeFlags(s.Args(securetoolsd.Provider))...)
			provider.waitFor(t, 1, "provider: registered shout", "provider: registered wait")

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			args := append([]string{"agent.mjs"}, nodeFlags(s.Args(securetoolsd.Agent))...)
			out, err := exec.CommandContext(ctx, node, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("node %q = %v, output:\n%s", args, err, out)
			}
			for _, want := range []string{"result 0 call_1: waited 200 ms", "result 1 call_2: HELLO FROM NODE", "settled: 2 results"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("node agent.mjs printed no %q; output:\n%s", want, out)
				}
			}
		})
	}
}

// nodeFlags spells the Go examples' flags (-ca ca.pem ...: each with its value) as
// the Node examples take them (--ca ca.pem ...).
func nodeFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if i%2 == 0 {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}
