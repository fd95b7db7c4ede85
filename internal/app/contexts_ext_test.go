package app_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// loggedContexts returns the user/message events of a session, in log order.
func loggedContexts(t *testing.T, e *env, sessionID string) []string {
	t.Helper()
	var out []string
	for _, ev := range e.readSession(t, sessionID) {
		if m := ev.GetUserMessage(); m != nil {
			out = append(out, m.GetContent())
		}
	}
	return out
}

// TestHookContextsPerCallLimits: a post-execute hook's add_context entries are held, per
// call, to limits.max_hook_contexts entries and limits.max_hook_context_bytes bytes: an
// entry past either is dropped (later ones that fit are kept), so a hook cannot make
// the batch's settled message larger than the agent loop can receive. The dropped
// entries are counted for the hook; the kept ones are delivered and logged as before.
func TestHookContextsPerCallLimits(t *testing.T) {
	e := start(t, "limits: {max_hook_contexts: 3, max_hook_context_bytes: 1KiB}\n")
	runProvider(t, e.app.Addr(), echoTool())
	lead, big := strings.Repeat("a", 300), strings.Repeat("c", 800)
	answerPostExecute(t, e, "chatty", func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		// 300 + 1 bytes fit; 800 more do not; "d" does (the third entry); "e" is a fourth.
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), AddContext: []string{lead, "b", big, "d", "e"}}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-limits", Calls: []*toolsdv1.ToolCall{call("c", "echo", `{"text":"hi"}`)}}, batchOptions{})
	want := []string{lead, "b", "d"}
	if got := out.settled.GetAdditionalContexts(); !slices.Equal(got, want) {
		t.Errorf("settled.additional_contexts = %d entries %.20q, want [300 bytes, b, d]", len(got), got)
	}
	if got := loggedContexts(t, e, "s-limits"); !slices.Equal(got, want) {
		t.Errorf("logged user messages = %d entries %.20q, want [300 bytes, b, d]", len(got), got)
	}
	if got := metricValue(t, e.app, "toolsd_hook_contexts_dropped_total", "hook", "chatty"); got != 2 {
		t.Errorf("toolsd_hook_contexts_dropped_total{hook=chatty} = %v, want 2", got)
	}
}

// TestSettledWithinClientReceiveLimit: with the default limits, a batch of the most
// calls whose hook adds the most context to each still settles within a gRPC client's
// default 4 MiB receive limit: the batch's contexts are held to
// limits.max_batch_context_bytes (1 MiB) as encoded in the settled message. Those past
// it are dropped from the message and the log alike, in FIFO order, and counted.
func TestSettledWithinClientReceiveLimit(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), echoTool())
	const calls, contextBytes = 128, 64 << 10 // limits.max_calls_per_batch, max_hook_context_bytes
	answerPostExecute(t, e, "verbose", func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		c := req.GetCall().GetCallId() + strings.Repeat("x", contextBytes-len(req.GetCall().GetCallId()))
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), AddContext: []string{c}}
	})
	b := &toolsdv1.Batch{SessionId: "s-settled"}
	for i := range calls {
		b.Calls = append(b.Calls, call(fmt.Sprintf("c%03d", i), "echo", `{"text":"hi"}`))
	}
	out := e.mustExecute(t, b, batchOptions{})
	// Each context takes 4 bytes more in the message: 15 fit in 1 MiB, 16 do not.
	const kept = 15
	got := out.settled.GetAdditionalContexts()
	if len(got) != kept {
		t.Fatalf("settled.additional_contexts has %d entries, want %d", len(got), kept)
	}
	for i, c := range got {
		if want := fmt.Sprintf("c%03d", i); !strings.HasPrefix(c, want) || len(c) != contextBytes {
			t.Errorf("settled.additional_contexts[%d] = %.8q… (%d bytes), want call %s's %d bytes", i, c, len(c), want, contextBytes)
		}
	}
	if n := proto.Size(out.settled); n > 1<<20 {
		t.Errorf("settled is %d bytes, want at most limits.max_batch_context_bytes (1 MiB)", n)
	}
	if logged := loggedContexts(t, e, "s-settled"); !slices.Equal(logged, got) {
		t.Errorf("logged %d user messages, want the %d settled delivered", len(logged), len(got))
	}
	if n := metricValue(t, e.app, "toolsd_scheduler_contexts_dropped_total"); n != calls-kept {
		t.Errorf("toolsd_scheduler_contexts_dropped_total = %v, want %d", n, calls-kept)
	}
}
