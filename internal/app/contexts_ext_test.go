package app_test

import (
	"slices"
	"strings"
	"testing"

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
