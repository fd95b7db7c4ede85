package app_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestLargeProgressDoesNotFailTheBatch: a provider's progress message as large as
// toolsd receives reaches the agent loop cut short, not as a message over the loop's
// (gRPC's default) receive limit that would fail its whole batch.
func TestLargeProgressDoesNotFailTheBatch(t *testing.T) {
	e := start(t, "")
	p := connectHand(t, e, "chatty")
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		// 64 bytes under toolsd's 4 MiB receive limit with the message's framing.
		msg := []byte(strings.Repeat("x", 4<<20-64))
		return []*toolsdv1.ProviderServiceConnectRequest{
			{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{Progress: &toolsdv1.ExecuteProgress{RequestId: ex.GetRequestId(), Message: msg}}},
			result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("done")}),
		}
	})
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

// TestProgressNeverFollowsItsResult: a call that times out while its provider is still
// reporting progress gets its result, and no progress of it reaches the client after
// that result. The provider's progress is forwarded from its stream's receive loop,
// which can be in the middle of forwarding one report when the call gives up waiting
// (cancel_grace 0) and its result is committed; invalid UTF-8 makes each report slow to
// forward, so that this happens within a few batches.
func TestProgressNeverFollowsItsResult(t *testing.T) {
	e := start(t, `
limits: {cancel_grace: 0s}
policy:
  tools:
    flood: {timeout: 10ms}
`)
	p := connectHand(t, e, "flood", "slow")
	var (
		mu      sync.Mutex // one sender at a time on the provider's stream
		stopped sync.Map   // request ids the provider was told to cancel
	)
	send := func(m *toolsdv1.ProviderServiceConnectRequest) error {
		mu.Lock()
		defer mu.Unlock()
		return p.stream.Send(m)
	}
	report := []byte(strings.Repeat("\xffa", 32<<10))
	go func() {
		for {
			m, err := p.stream.Recv()
			if err != nil {
				return
			}
			if c := m.GetCancel(); c != nil {
				stopped.Store(c.GetRequestId(), true)
				continue
			}
			ex := m.GetExecute()
			if ex == nil {
				continue
			}
			id := ex.GetRequestId()
			switch ex.GetTool() {
			case "flood": // reports progress until cancelled, and a little after
				go func() {
					for extra := 0; extra < 3; {
						if _, ok := stopped.Load(id); ok {
							extra++
						}
						if send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Progress{Progress: &toolsdv1.ExecuteProgress{RequestId: id, Message: report}}}) != nil {
							return
						}
					}
				}()
			case "slow": // answers once the flood's result is surely committed
				go func() {
					time.Sleep(60 * time.Millisecond)
					_ = send(&toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: &toolsdv1.ExecuteResult{RequestId: id, Content: []byte("slow")}}})
				}()
			}
		}
	}()
	for i := range 40 {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: fmt.Sprint("s-progress-late-", i), Calls: []*toolsdv1.ToolCall{
			call("f", "flood", `{}`), call("s", "slow", `{}`),
		}}, batchOptions{})
		if got := resultCodes(out.results); !slices.Equal(got, []string{"TOOL_TIMEOUT", ""}) {
			t.Fatalf("batch %d: codes = %v, want [TOOL_TIMEOUT ]", i, got)
		}
		// Only the first call reports progress, and its result is the first.
		if first := slices.Index(out.order, "result"); slices.Contains(out.order[first:], "progress") {
			t.Fatalf("batch %d: messages = %v, want no progress after the first call's result", i, out.order)
		}
	}
}
