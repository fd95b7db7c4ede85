package app_test

import (
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestClientNotReadingWhileApprovalWaitsIsCutOff: a client that stops reading is cut off
// after limits.write_timeout (with its allowance for a large message) also when the only
// calls left are waiting for its approval, so that no put waits on the outbox: the
// approval request may sit behind results the client never takes, and the call must not
// wait out limits.approval_timeout (here an hour) for an answer to it.
func TestClientNotReadingWhileApprovalWaitsIsCutOff(t *testing.T) {
	e := start(t, `
limits: {outbox_size: 2, write_timeout: 100ms, approval_timeout: 1h}
policy:
  rules:
    - {tool: echo, decision: ask}
`)
	runProvider(t, e.app.Addr(), sizedTool("sized"), echoTool())
	stream, err := toolsdv1.NewToolServiceClient(dialFixedWindow(t, e.app.Addr())).ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Two results larger than the client's flow control window: the second leaves the
	// outbox's writer waiting on a client that reads nothing.
	calls := []*toolsdv1.ToolCall{
		call("c0", "sized", `{"bytes":262144}`),
		call("c1", "sized", `{"bytes":262144}`),
		call("ask", "echo", `{"text":"may I?"}`),
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-unread-ask", Calls: calls})); err != nil {
		t.Fatal(err)
	}
	other := dial(t, e.app.Addr())
	reader := &env{app: e.app, conn: other, tools: toolsdv1.NewToolServiceClient(other)}
	waitFor(t, "every result in the log", func() bool { return len(reader.readSession(t, "s-unread-ask")) == 2*len(calls) })
	assertCompleteLog(t, reader, "s-unread-ask", len(calls))
	last := reader.readSession(t, "s-unread-ask")[2*len(calls)-1].GetToolResult()
	if id, code := last.GetMessage().GetCallId(), last.GetError().GetCode(); id != "ask" || code != "ABORTED_BEFORE_DISPATCH" {
		t.Errorf("the asked call's logged result = %s %s, want ask ABORTED_BEFORE_DISPATCH (the batch was cut off)", id, code)
	}
	readUntilCutOff(t, stream)
}
