package app_test

import (
	"context"
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// TestHookContentReplacementKeepsTheValue: a post-execute hook that replaces a result's
// content alone changes what the model reads and what the session log records, not the
// tool's canonical value, which the agent still gets in value_json (as README says: a
// hook that must withhold the value replaces it, or blocks).
func TestHookContentReplacementKeepsTheValue(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), provider.NewTool("token", "Issues a token.", func(context.Context, provider.Call, map[string]any) (map[string]any, error) {
		return map[string]any{"token": "s3cret"}, nil
	}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := toolsdv1.NewHookServiceClient(dial(t, e.app.Addr())).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
		Name:          "redactor",
		Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
	}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if r := m.GetRequest(); r != nil {
				redacted := "a token was issued"
				_ = stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{
					RequestId: r.GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE, ReplaceContent: &redacted,
				}}})
			}
		}
	}()
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-hook-value", Calls: []*toolsdv1.ToolCall{call("c1", "token", `{}`)}}, batchOptions{})
	if len(out.results) != 1 {
		t.Fatalf("results = %v, want 1", out.results)
	}
	if r := out.results[0]; r.GetContent() != "a token was issued" || r.GetValueJson() != `{"token":"s3cret"}` {
		t.Errorf("result = %v, want the hook's content beside the tool's value", r)
	}
	for _, ev := range e.readSession(t, "s-hook-value") {
		if res := ev.GetToolResult(); res != nil && res.GetMessage().GetContent() != "a token was issued" {
			t.Errorf("logged tool/result = %v, want the hook's content", res)
		}
	}
}
