package app_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestToolTurnedExclusiveWhileAHookDecides: a call scheduled as parallel from its tool's
// definition is not sent to its provider when the tool is registered again as exclusive
// while a remote hook decides the call, with another call of the batch running: it would
// run beside it. It is ABORTED_BEFORE_DISPATCH, as it is when the registration comes
// before its policy; the call that was running finishes. The provider is driven by hand,
// registering the tool again on its own stream as the Go SDK does when a tool changes.
func TestToolTurnedExclusiveWhileAHookDecides(t *testing.T) {
	e := start(t, "limits: {hook_timeout: 1m}\n")
	p := connectHand(t, e, "write", "hold")
	var sendMu sync.Mutex
	send := func(m *toolsdv1.ProviderServiceConnectRequest) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if err := p.stream.Send(m); err != nil {
			t.Errorf("provider Send() = %v", err)
		}
	}
	holdID, holdRunning, release := make(chan uint64, 1), make(chan struct{}), make(chan struct{})
	registered := make(chan *toolsdv1.RegisterToolsResult, 2)
	var sentMu sync.Mutex
	var sent []string // the tools of the executes the provider received
	go func() {
		for {
			m, err := p.stream.Recv()
			if err != nil {
				return
			}
			if r := m.GetRegisterResult(); r != nil {
				registered <- r
				continue
			}
			ex := m.GetExecute()
			if ex == nil {
				continue
			}
			sentMu.Lock()
			sent = append(sent, ex.GetTool())
			sentMu.Unlock()
			if ex.GetTool() == "hold" {
				holdID <- ex.GetRequestId()
				close(holdRunning)
				continue
			}
			send(result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("written")}))
		}
	}()
	go func() {
		id := <-holdID
		<-release
		send(result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("held")}))
	}()

	// The hook lets every call run; it decides write only once hold runs at the provider
	// and write has been registered again as exclusive.
	hook, err := toolsdv1.NewHookServiceClient(dial(t, e.app.Addr())).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := hook.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: &toolsdv1.HookHello{
		Name: "slow", Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_PRE_EXECUTE}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := hook.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
	}
	var hookMu sync.Mutex
	allow := func(req *toolsdv1.HookRequest) {
		hookMu.Lock()
		defer hookMu.Unlock()
		_ = hook.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{
			RequestId: req.GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_ALLOW,
		}}})
	}
	go func() {
		for {
			m, err := hook.Recv()
			if err != nil {
				return
			}
			req := m.GetRequest()
			if req == nil {
				continue
			}
			if req.GetCall().GetTool() != "write" {
				allow(req)
				continue
			}
			go func() {
				select {
				case <-holdRunning:
				case <-time.After(10 * time.Second):
					t.Error("hold never reached the provider")
				}
				send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Unregister{
					Unregister: &toolsdv1.UnregisterTools{Ref: 2, Names: []string{"write"}},
				}})
				send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 3, Tools: []*toolsdv1.ToolDefinition{{
					Name: "write", Description: "raw tool", ParametersJson: `{"type":"object"}`, Mode: toolsdv1.ExecutionMode_EXECUTION_MODE_EXCLUSIVE,
				}}}}})
				for range 2 {
					if r := <-registered; r.GetTools()[0].GetErrorCode() != "" {
						t.Errorf("registering write again: %v", r)
					}
				}
				allow(req)
			}()
		}
	}()
	waitFor(t, "the hook to connect", func() bool { return hooksConnected(t, e) == "1" })

	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-turned-exclusive", Calls: []*toolsdv1.ToolCall{
		call("c0", "write", `{}`), call("c1", "hold", `{}`),
	}}, batchOptions{onResult: func(toolsdv1.ToolService_ExecuteBatchClient, *toolsdv1.ToolResult) {
		select {
		case <-release:
		default:
			close(release) // write has its result: hold may end
		}
	}})
	if got, want := resultCodes(out.results), []string{"ABORTED_BEFORE_DISPATCH", ""}; !slices.Equal(got, want) {
		t.Errorf("codes = %q, want %q (results %v)", got, want, out.results)
	}
	sentMu.Lock()
	defer sentMu.Unlock()
	if slices.Contains(sent, "write") {
		t.Errorf("the provider was sent %v: write ran beside hold after it was registered as exclusive", sent)
	}
	assertCompleteLog(t, e, "s-turned-exclusive", 2)
}
