package app_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/pkg/provider"
)

// A single-call batch holds its accepted message back for a moment and starts no reader
// of client messages: a quick call then answers in one write. These tests hold what must
// not change for the client: accepted leads every other message, a slow call's accepted
// arrives while the call runs, and approvals and cancels still reach the batch.
func TestSingleCallQuietStart(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: ask_echo, decision: ask, reason: "needs a human"}
`)
	started, stopped := make(chan string, 4), make(chan string, 4)
	reported := make(chan struct{}, 1)
	chatty := provider.NewTool("chatty", "Reports progress, then answers.", func(_ context.Context, c provider.Call, _ map[string]any) (string, error) {
		c.Progress("halfway", 1, 2)
		c.Progress("done", 2, 2)
		reported <- struct{}{}
		return "ok", nil
	})
	askEcho := provider.NewTool("ask_echo", "Echoes, once approved.", func(_ context.Context, _ provider.Call, a map[string]any) (string, error) {
		return fmt.Sprint(a["text"]), nil
	})
	runProvider(t, e.app.Addr(), echoTool(), chatty, askEcho, blockTool("block", started, stopped))

	t.Run("quick call", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-quiet-quick", Calls: []*toolsdv1.ToolCall{call("c0", "echo", `{"text":"hi"}`)}}, batchOptions{})
		if diff := cmp.Diff([]string{"accepted", "result", "settled"}, out.order); diff != "" {
			t.Fatalf("messages (-want +got):\n%s", diff)
		}
		seqs := out.accepted.GetCallSeqs()
		if len(seqs) != 1 || out.results[0].GetCallSeq() != seqs[0] || out.accepted.GetBatchId() == "" {
			t.Errorf("accepted = %v, result call_seq = %d: want a batch id and the result's call seq", out.accepted, out.results[0].GetCallSeq())
		}
	})

	t.Run("slow call is accepted while it runs, and its cancel is read", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-quiet-slow", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"slow"}`)}}, batchOptions{
			onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
				// The call blocks until cancelled: accepted came while it ran, and only
				// a reader started by then can see this cancel.
				<-started
				if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}}); err != nil {
					t.Errorf("Send(cancel) = %v", err)
				}
			},
		})
		if got := resultCodes(out.results); !slices.Equal(got, []string{"ABORTED"}) || !out.settled.GetCancelled() {
			t.Errorf("codes = %v, settled.cancelled = %v; want [ABORTED], true", got, out.settled.GetCancelled())
		}
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Error("the provider never saw the cancellation")
		}
	})

	t.Run("cancel sent with the batch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		stream, err := e.tools.ExecuteBatch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-quiet-cancel", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"early"}`)}})); err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "changed my mind"}}}); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		var settled *toolsdv1.BatchSettled
		for settled == nil {
			m, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv() = %v after %v", err, kinds)
			}
			kinds = append(kinds, messageKind(m))
			settled = m.GetSettled()
		}
		if !slices.Equal(kinds, []string{"accepted", "result", "settled"}) || !settled.GetCancelled() {
			t.Errorf("messages = %v, settled.cancelled = %v; want accepted, result, settled and cancelled", kinds, settled.GetCancelled())
		}
		assertCompleteLog(t, e, "s-quiet-cancel", 1)
	})

	t.Run("progress follows accepted", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-quiet-progress", Calls: []*toolsdv1.ToolCall{call("c0", "chatty", `{}`)}}, batchOptions{})
		<-reported
		if len(out.order) < 3 || out.order[0] != "accepted" || !slices.Equal(out.order[len(out.order)-2:], []string{"result", "settled"}) {
			t.Fatalf("messages = %v, want accepted first and result, settled last", out.order)
		}
		for _, k := range out.order[1 : len(out.order)-2] {
			if k != "progress" {
				t.Errorf("messages = %v, want only progress between accepted and the result", out.order)
			}
		}
		// Progress is best-effort, but nothing here fills the outbox.
		if len(out.progress) != 2 {
			t.Errorf("progress = %v, want both updates", out.progress)
		}
	})

	t.Run("approval follows accepted and is answered", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-quiet-ask", Calls: []*toolsdv1.ToolCall{call("c0", "ask_echo", `{"text":"yes"}`)}}, batchOptions{
			approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
				return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
			},
		})
		if diff := cmp.Diff([]string{"accepted", "approval", "result", "settled"}, out.order); diff != "" {
			t.Errorf("messages (-want +got):\n%s", diff)
		}
		if got := resultCodes(out.results); !slices.Equal(got, []string{""}) || out.results[0].GetContent() != "yes" {
			t.Errorf("codes = %v, result = %v; want the approved call's answer", got, out.results[0])
		}
	})
}
