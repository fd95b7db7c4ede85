package hook_test

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
)

// TestReceiveLoopLinesEndWithTheStream: the stream's receive loop is not awaited by the
// handler, so a line it writes about a message it read (here a decision nobody awaits,
// its line slow to write) must be written before the stream ends, not when the hub, and
// the test that owns the logger, may be gone.
func TestReceiveLoopLinesEndWithTheStream(t *testing.T) {
	const ignored = "decision for no pending request ignored"
	observed, logs := observer.New(zap.DebugLevel)
	writing := make(chan struct{}, 1)
	e := newEnv(t, hook.WithLogger(zap.New(slowLineCore{Core: observed, msg: ignored, delay: 200 * time.Millisecond, writing: writing})))
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

// slowLineCore writes lines with one message only after a delay, or once until is
// closed if it is set; writing, if set, is sent to (without waiting) when such a line
// begins to be written.
type slowLineCore struct {
	zapcore.Core
	msg     string
	delay   time.Duration
	until   <-chan struct{}
	writing chan<- struct{}
}

func (c slowLineCore) With(fields []zapcore.Field) zapcore.Core {
	return slowLineCore{Core: c.Core.With(fields), msg: c.msg, delay: c.delay, until: c.until, writing: c.writing}
}

func (c slowLineCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c slowLineCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Message == c.msg {
		select {
		case c.writing <- struct{}{}:
		default:
		}
		if c.until != nil {
			<-c.until
		} else {
			time.Sleep(c.delay)
		}
	}
	return c.Core.Write(ent, fields)
}
