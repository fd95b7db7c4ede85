package hook_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/pipeline"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestAPanicHandlingAHookMessageEndsOnlyItsStream: a panic while a hook's message is
// handled (here, in the logger, as a decision for no pending request is logged) ran on
// the stream's receive goroutine, which nothing recovered, and took the whole process
// down. It now ends that hook's stream with INTERNAL and is counted; the call pending
// on it fails as on any stream that drops (closed, or open if the hook asked), and
// other hooks go on.
func TestAPanicHandlingAHookMessageEndsOnlyItsStream(t *testing.T) {
	tests := map[string]struct {
		failOpen bool
		want     pipeline.Verdict
	}{
		"fail-closed": {want: pipeline.Verdict{Decision: pipeline.Deny, Code: tool.CodePolicyUnavailable}},
		"fail-open":   {failOpen: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			boom := zap.Hooks(func(e zapcore.Entry) error {
				if e.Message == "decision for no pending request ignored" {
					panic("a logger bug")
				}
				return nil
			})
			log := zaptest.NewLogger(t, zaptest.Level(zap.DebugLevel), zaptest.WrapOptions(boom))
			e := newEnv(t, hook.WithLogger(log), hook.WithTimeout(time.Minute))
			hello := helloFor("doomed", sub(pre, "", "", 0))
			hello.FailOpen = tc.failOpen
			h := e.connect(t, hello, nil)
			done := make(chan pipeline.Verdict, 1)
			go func() {
				done <- e.hub.PreExecute().PreExecute(context.Background(), newExec("echo", `{}`), newTool("echo"))
			}()
			h.next()
			h.decide(&toolsdv1.HookDecision{RequestId: 999, Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW})
			select {
			case got := <-done:
				if got.Decision != tc.want.Decision || got.Code != tc.want.Code {
					t.Errorf("PreExecute() = %+v, want %+v", got, tc.want)
				}
			case <-time.After(waitTimeout):
				t.Fatal("call still waiting after its hook's stream ended")
			}
			<-h.done
			if status.Code(h.endErr) != codes.Internal {
				t.Errorf("stream of the message that panicked ended with %v, want Internal", h.endErr)
			}
			e.obs.waitFor(t, "panicked", func(n int) bool { return n == 1 })

			e.connect(t, helloFor("fine", sub(pre, "", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "no")))
			if got := e.hub.PreExecute().PreExecute(t.Context(), newExec("echo", `{}`), newTool("echo")); got.Decision != pipeline.Deny {
				t.Errorf("PreExecute() through another hook after the panic = %+v, want its deny", got)
			}
		})
	}
}
