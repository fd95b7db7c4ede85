package hook_test

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/logtest"
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
