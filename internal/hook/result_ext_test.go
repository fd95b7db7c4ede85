package hook_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/hook"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestResultNotifications(t *testing.T) {
	e := newEnv(t)
	e.connect(t, helloFor("deny-ls", sub(pre, "ls", "", 0)), always(verdict(toolsdv1.HookVerdict_HOOK_VERDICT_DENY, "no ls")))
	h := e.connect(t, helloFor("audit", sub(result, "", "", 0)), nil)
	p := e.newPipeline(&dispatcher{})
	p.Run(t.Context(), newExec("echo", `{}`))
	p.Run(t.Context(), newExec("ls", `{}`))

	got := h.next()
	if got.GetStage() != result || got.GetDeadline() != nil || got.GetCall().GetTool() != "echo" {
		t.Errorf("first notification = %v, want RESULT for echo without deadline", got)
	}
	if want := (&toolsdv1.HookResult{Content: "ok"}); !proto.Equal(want, got.GetResult()) {
		t.Errorf("first result = %v, want %v", got.GetResult(), want)
	}
	got = h.next()
	want := &toolsdv1.HookResult{Content: "Error: no ls", IsError: true,
		Error: &toolsdv1.ToolError{Code: string(tool.CodeDenied), Message: "no ls", Reason: `hook "deny-ls": no ls`, Tool: "ls"}}
	if !proto.Equal(want, got.GetResult()) {
		t.Errorf("second result = %v, want %v", got.GetResult(), want)
	}
}

// TestResultQueueFull checks that a hook that stopped reading never blocks a call: its
// notifications queue up to the limit, then are dropped and counted.
func TestResultQueueFull(t *testing.T) {
	e := newEnv(t, hook.WithResultQueue(2))
	e.connect(t, helloFor("stuck", sub(result, "", "", 0)), nil, noRead)
	observe := e.hub.ResultObserver()
	big := tool.Result{Content: strings.Repeat("x", 100<<10)}
	const calls = 20
	for range calls {
		observe(newExec("echo", `{}`), big, 0) // returns at once, or the test hangs
	}
	e.obs.waitFor(t, "failure:stuck:result:true", func(n int) bool { return n > 0 })
	if n := e.obs.get("failure:stuck:result:true"); n > calls {
		t.Errorf("dropped %d notifications of %d", n, calls)
	}
	if n := len(e.hub.Hooks()); n != 1 {
		t.Errorf("Hooks() = %d, want the slow hook to stay connected", n)
	}
}

// TestNotificationsLostWhenStreamDrops checks that the result notifications still
// queued for a hook when its stream drops are counted lost, not silently discarded.
func TestNotificationsLostWhenStreamDrops(t *testing.T) {
	const calls = 20
	e := newEnv(t, hook.WithResultQueue(2*calls))
	h := e.connect(t, helloFor("stuck", sub(result, "", "", 0)), nil, noRead)
	observe := e.hub.ResultObserver()
	// Far more than the connection's 64 KiB windows: the writer blocks on the first
	// ones and the rest wait in the queue.
	big := tool.Result{Content: strings.Repeat("x", 100<<10)}
	for range calls {
		observe(newExec("echo", `{}`), big, 0)
	}
	_ = h.cc.Close()
	e.obs.waitFor(t, "lost:stuck", func(n int) bool { return n > 0 })
	waitUntil(t, "the hook to leave", func() bool { return len(e.hub.Hooks()) == 0 })
	if n := e.obs.get("lost:stuck"); n > calls {
		t.Errorf("lost notifications = %d of %d", n, calls)
	}
	if n := e.obs.get("failure:stuck:result:true"); n != 0 {
		t.Errorf("notifications dropped for a full queue = %d, want 0", n)
	}
}
