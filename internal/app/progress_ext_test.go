package app_test

import (
	"strings"
	"testing"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestLargeProgressDoesNotFailTheBatch: a provider's progress message as large as
// toolsd receives reaches the agent loop cut short, not as a message over the loop's
// (gRPC's default) receive limit that would fail its whole batch.
func TestLargeProgressDoesNotFailTheBatch(t *testing.T) {
	e := start(t, "")
	p := connectHand(t, e, "chatty")
	go func() {
		for {
			m, err := p.stream.Recv()
			if err != nil {
				return
			}
			ex := m.GetExecute()
			if ex == nil {
				continue
			}
			// 64 bytes under toolsd's 4 MiB receive limit with the message's framing.
			msg := []byte(strings.Repeat("x", 4<<20-64))
			for _, r := range []*toolsdv1.ProviderServiceConnectRequest{
				{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{Progress: &toolsdv1.ExecuteProgress{RequestId: ex.GetRequestId(), Message: msg}}},
				{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("done")}}},
			} {
				if err := p.stream.Send(r); err != nil {
					return
				}
			}
		}
	}()
	callID := "call-" + strings.Repeat("c", 100)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-progress", Calls: []*toolsdv1.ToolCall{call(callID, "chatty", `{}`)}}, batchOptions{})
	if len(out.results) != 1 || out.results[0].GetContent() != "done" {
		t.Fatalf("results = %v, want one with content done", out.results)
	}
	for _, pr := range out.progress {
		if n := len(pr.GetMessage()); n > 64<<10 {
			t.Errorf("progress message of %d bytes reached the client, want at most 64 KiB", n)
		}
	}
}
