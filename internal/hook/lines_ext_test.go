package hook_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/logtest"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestReceiveLoopLinesEndWithTheStream: the stream's receive loop is not awaited by the
// handler, so a line it writes about a message it read (here a decision nobody awaits,
// its line slow to write) must be written before the stream ends, not when the hub, and
// the test that owns the logger, may be gone.
func TestReceiveLoopLinesEndWithTheStream(t *testing.T) {
	const ignored = "decision for no pending request ignored"
	observed, logs := observer.New(zap.DebugLevel)
	writing := make(chan struct{}, 1)
	e := newEnv(t, hook.WithLogger(zap.New(logtest.SlowLineCore{Core: observed, Msg: ignored, Delay: 200 * time.Millisecond, Writing: writing})))
	h := e.connect(t, helloFor("a", sub(pre, "", "", 0)), nil)
	h.decide(&toolsdv1.HookDecision{RequestId: 987654, Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW})
	select {
	case <-writing:
	case <-time.After(waitTimeout):
		t.Fatal("the stray decision was never logged")
	}
	e.hub.Shutdown("test over") // returns once the stream's handler has
	if n := logs.FilterMessage(ignored).Len(); n != 1 {
		t.Errorf("%d lines for the stray decision when the stream had ended, want 1", n)
	}
}

// TestWarningsCutTheCallID: a call id is the model's (only the request size bounds
// it); the warnings about a call's hooks quote it cut, so calls with huge ids whose
// hooks misbehave cannot write as much log per call.
func TestWarningsCutTheCallID(t *testing.T) {
	tests := map[string]struct {
		msg    string
		opts   []hook.Option
		stage  toolsdv1.HookStage
		answer *toolsdv1.HookDecision
	}{
		"hook failed": {
			msg:    "hook failed",
			stage:  pre,
			answer: &toolsdv1.HookDecision{Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_BLOCK}, // not valid before execution
		},
		"hook contexts dropped": {
			msg:    "hook contexts dropped",
			opts:   []hook.Option{hook.WithMaxContexts(1, 1024)},
			stage:  post,
			answer: &toolsdv1.HookDecision{AddContext: []string{"kept", "dropped"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			observed, logs := observer.New(zap.InfoLevel)
			e := newEnv(t, append(tc.opts, hook.WithLogger(zap.New(observed)))...)
			e.connect(t, helloFor("h", sub(tc.stage, "", "", 0)), always(tc.answer))
			ex := newExec("echo", `{}`)
			ex.CallID = strings.Repeat("c", 256<<10)
			disp := &dispatcher{fn: func(*tool.Exec) tool.Result { return tool.Result{Content: "ok"} }}
			e.newPipeline(disp).Run(t.Context(), ex)
			lines := logs.FilterMessage(tc.msg).All()
			if len(lines) != 1 {
				t.Fatalf("%d %q lines, want 1", len(lines), tc.msg)
			}
			if id, _ := lines[0].ContextMap()["call_id"].(string); len(id) > 256 || !strings.HasPrefix(id, "cccc") {
				t.Errorf("call_id logged as %d bytes, want its start, at most 256", len(id))
			}
		})
	}
}
