package app_test

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestEmptyArgumentsAreTheEmptyObject: arguments_json "" (what some model APIs send for
// a tool that takes no arguments) is the empty object: it is validated, logged and sent
// to the provider and hooks as {}. Whitespace alone is still malformed JSON.
func TestEmptyArgumentsAreTheEmptyObject(t *testing.T) {
	e := start(t, "")
	p := helloHand(t, e.conn, "raw")
	p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{
		{Name: "noargs", Description: "takes nothing", ParametersJson: `{"type":"object"}`},
		{Name: "needs", Description: "takes a", ParametersJson: `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
	}}}})
	for _, st := range p.recv(t).GetRegisterResult().GetTools() {
		if st.GetErrorCode() != "" {
			t.Fatalf("registering %s: %s %s", st.GetName(), st.GetErrorCode(), st.GetErrorMessage())
		}
	}
	var mu sync.Mutex
	sent, hooked := map[string]string{}, map[string]string{}
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		mu.Lock()
		sent[ex.GetCallId()] = ex.GetArgumentsJson()
		mu.Unlock()
		return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ok")})}
	})
	answerPostExecute(t, e, "watcher", func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		mu.Lock()
		hooked[req.GetCall().GetCallId()] = req.GetCall().GetArgumentsJson()
		mu.Unlock()
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ACCEPT}
	})

	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-empty", Calls: []*toolsdv1.ToolCall{
		call("c-empty", "noargs", ""),
		call("c-space", "noargs", " "),
		call("c-needs-empty", "needs", ""),
		call("c-needs-object", "needs", "{}"),
	}}, batchOptions{})

	if diff := cmp.Diff([]string{"", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS"}, resultCodes(out.results)); diff != "" {
		t.Errorf("result codes (-want +got):\n%s", diff)
	}
	if got, want := out.results[2].GetError().GetMessage(), out.results[3].GetError().GetMessage(); got != want {
		t.Errorf("a required property's refusal of \"\" = %q, want that of {}: %q", got, want)
	}
	mu.Lock()
	if got := sent["c-empty"]; got != "{}" {
		t.Errorf("the provider was sent %q, want {}", got)
	}
	if got := hooked["c-empty"]; got != "{}" {
		t.Errorf("the post-execute hook saw %q, want {}", got)
	}
	mu.Unlock()
	logged := map[string]string{}
	for _, ev := range e.readSession(t, "s-empty") {
		if c := ev.GetToolCall(); c != nil {
			logged[c.GetCallId()] = c.GetArgumentsJson()
		}
	}
	want := map[string]string{"c-empty": "{}", "c-space": " ", "c-needs-empty": "{}", "c-needs-object": "{}"}
	if diff := cmp.Diff(want, logged); diff != "" {
		t.Errorf("logged arguments (-want +got):\n%s", diff)
	}
}
