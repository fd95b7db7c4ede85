package hook_test

import (
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// BenchmarkPreExecute measures one pre-execute decision: with no hook subscribed (the
// cost every call pays) and with hooks answering over a bufconn gRPC stream.
func BenchmarkPreExecute(b *testing.B) {
	for name, hooks := range map[string]int{"none": 0, "one": 1, "three": 3} {
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			for range hooks {
				e.connect(b, helloFor("bench", sub(pre, "", "", 0)), func(*toolsdv1.HookRequest) *toolsdv1.HookDecision {
					return &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW}
				}, drainRequests)
			}
			p := e.hub.PreExecute()
			x, t := newExec("echo", `{"text":"hi"}`), newTool("echo")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p.PreExecute(b.Context(), x, t)
			}
		})
	}
}

// drainRequests keeps a benchmark hook from recording its requests.
func drainRequests(o *hookOpts) { o.noRecord = true }
