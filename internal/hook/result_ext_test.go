package hook_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

// TestShutdownSendsQueuedNotificationsFirst checks that a graceful shutdown sends a
// reading hook the result notifications still queued for it, in order, before its
// goodbye: they are the final results of the shutdown's drain, not losses. The hook
// reads nothing until the hub has removed it (the shutdown's teardown has begun), so
// the notifications wait in the queue behind a writer blocked on flow control.
func TestShutdownSendsQueuedNotificationsFirst(t *testing.T) {
	const calls = 8
	e := newEnv(t)
	h := e.connect(t, helloFor("audit", sub(result, "", "", 0)), nil, noRead)
	observe := e.hub.ResultObserver()
	// Far more than the connection's 64 KiB windows: the writer blocks on the first
	// ones and the rest wait in the queue.
	pad := strings.Repeat("x", 100<<10)
	for i := range calls {
		observe(newExec("echo", `{}`), tool.Result{Content: fmt.Sprint(i, pad)}, 0)
	}
	shutdownDone := make(chan struct{})
	go func() {
		defer close(shutdownDone)
		e.hub.Shutdown("maintenance")
	}()
	e.obs.waitFor(t, "connected", func(n int) bool { return n == 0 })

	var got []string
	for {
		m, err := h.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("stream end = %v, want EOF", err)
			}
			break
		}
		switch msg := m.GetMsg().(type) {
		case *toolsdv1.HookServiceConnectResponse_Request:
			r := msg.Request
			got = append(got, fmt.Sprintf("%d:%s", r.GetRequestId(), strings.TrimSuffix(r.GetResult().GetContent(), pad)))
		case *toolsdv1.HookServiceConnectResponse_Goodbye:
			got = append(got, "goodbye:"+msg.Goodbye.GetReason())
		}
	}
	<-shutdownDone
	var want []string
	for i := range calls {
		want = append(want, fmt.Sprintf("%d:%d", i+1, i))
	}
	want = append(want, "goodbye:maintenance")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages after the welcome (-want +got):\n%s", diff)
	}
	if n := e.obs.get("lost:audit") + e.obs.get("lost:"); n != 0 {
		t.Errorf("notifications lost = %d, want 0", n)
	}
}
