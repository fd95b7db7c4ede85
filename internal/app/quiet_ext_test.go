package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/session"
	"github.com/toolsd/toolsd/pkg/provider"
)

// A single-call batch starts quietly (limits.accepted_hold): its accepted message is
// held back and no reader of client messages runs, so that a quick call's accepted and
// result leave in one write. With a hold of a minute, these tests see only what the
// hold does, never its timer: accepted is not written while the call runs, it still
// leads every other message, and progress or an approval request ends the hold (an
// approval is answered, so the reader runs).
func TestSingleCallQuietStart(t *testing.T) {
	e := start(t, `
limits: {accepted_hold: 1m}
policy:
  rules:
    - {tool: ask_echo, decision: ask, reason: "needs a human"}
`)
	started, stopped := make(chan string, 4), make(chan string, 4)
	release := make(chan struct{})
	gated := provider.NewTool("gated", "Answers once released.", func(ctx context.Context, _ provider.Call, _ map[string]any) (string, error) {
		started <- "gated"
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	chatty := provider.NewTool("chatty", "Reports progress, then answers.", func(_ context.Context, c provider.Call, _ map[string]any) (string, error) {
		c.Progress("halfway", 1, 2)
		c.Progress("done", 2, 2)
		return "ok", nil
	})
	askEcho := provider.NewTool("ask_echo", "Echoes, once approved.", func(_ context.Context, _ provider.Call, a map[string]any) (string, error) {
		return fmt.Sprint(a["text"]), nil
	})
	runProvider(t, e.app.Addr(), echoTool(), gated, eventuallyTool(stopped), chatty, askEcho)

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

	t.Run("accepted waits for the result", func(t *testing.T) {
		stream, err := e.tools.ExecuteBatch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-quiet-wait", Calls: []*toolsdv1.ToolCall{call("c0", "gated", `{}`)}})); err != nil {
			t.Fatal(err)
		}
		msgs := make(chan *toolsdv1.ExecuteBatchResponse, 8)
		go func() {
			defer close(msgs)
			for {
				m, err := stream.Recv()
				if err != nil {
					return
				}
				msgs <- m
			}
		}()
		<-started
		// Before the hold, accepted was written before the call was dispatched; it
		// would be here by now on any machine that is not stalled.
		select {
		case m := <-msgs:
			t.Fatalf("got %s while the call ran, want nothing before its result", messageKind(m))
		case <-time.After(50 * time.Millisecond):
		}
		close(release)
		var kinds []string
		for m := range msgs {
			kinds = append(kinds, messageKind(m))
		}
		if want := []string{"accepted", "result", "settled"}; !slices.Equal(kinds, want) {
			t.Errorf("messages = %v, want %v", kinds, want)
		}
	})

	t.Run("cancel sent during the hold", func(t *testing.T) {
		// Documented on BatchAccepted: read when the hold ends, so a call that
		// finishes within it is not stopped, and its result says so.
		kinds, codes, settled := executeThenCancel(t, e, "s-quiet-cancel", "eventually", `{"ms":100}`)
		if !slices.Equal(kinds, []string{"accepted", "result", "settled"}) || settled.GetCancelled() || !slices.Equal(codes, []string{""}) {
			t.Errorf("messages = %v, codes = %v, settled.cancelled = %v; want accepted, result, settled, a success, not cancelled", kinds, codes, settled.GetCancelled())
		}
	})

	t.Run("progress follows accepted", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-quiet-progress", Calls: []*toolsdv1.ToolCall{call("c0", "chatty", `{}`)}}, batchOptions{})
		// Progress is best-effort, but nothing here fills the outbox.
		if want := []string{"accepted", "progress", "progress", "result", "settled"}; !slices.Equal(out.order, want) {
			t.Errorf("messages = %v, want %v", out.order, want)
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

// TestSingleCallQuietStartEnds runs a call that blocks until cancelled with a short
// hold and with none: accepted arrives while the call runs (the client cancels only
// once it has it). With no hold, a cancel sent right after the batch is read at once and
// stops a call that would otherwise finish by itself.
func TestSingleCallQuietStartEnds(t *testing.T) {
	for _, hold := range []string{"1ms", "0s"} {
		t.Run("accepted_hold "+hold, func(t *testing.T) {
			e := start(t, "limits: {accepted_hold: "+hold+"}\n")
			started, stopped := make(chan string, 1), make(chan string, 4)
			runProvider(t, e.app.Addr(), blockTool("block", started, stopped), eventuallyTool(stopped))
			out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-quiet-ends", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"slow"}`)}}, batchOptions{
				onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
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
			if hold != "0s" {
				return
			}
			_, codes, settled := executeThenCancel(t, e, "s-quiet-at-once", "eventually", `{"ms":60000}`)
			if len(codes) != 1 || (codes[0] != "ABORTED" && codes[0] != "ABORTED_BEFORE_DISPATCH") || !settled.GetCancelled() {
				t.Errorf("codes = %v, settled.cancelled = %v; want ABORTED or ABORTED_BEFORE_DISPATCH, cancelled", codes, settled.GetCancelled())
			}
			assertCompleteLog(t, e, "s-quiet-at-once", 1)
		})
	}
}

// eventuallyTool answers after {"ms": N} milliseconds unless cancelled first; a cancel
// is reported on stopped.
func eventuallyTool(stopped chan<- string) provider.Tool {
	return provider.NewTool("eventually", "Answers after a while unless cancelled.", func(ctx context.Context, _ provider.Call, a struct {
		MS int `json:"ms"`
	}) (string, error) {
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			return "finished", nil
		case <-ctx.Done():
			stopped <- "eventually"
			return "", ctx.Err()
		}
	})
}

// executeThenCancel sends a one-call batch and a cancel right after it, and reads the
// stream to settled: the message kinds, the result codes, and settled.
func executeThenCancel(t *testing.T, e *env, sessionID, tool, args string) (kinds, codes []string, settled *toolsdv1.BatchSettled) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := e.tools.ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: sessionID, Calls: []*toolsdv1.ToolCall{call("c0", tool, args)}})); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "changed my mind"}}}); err != nil {
		t.Fatal(err)
	}
	for settled == nil {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv() = %v after %v", err, kinds)
		}
		kinds = append(kinds, messageKind(m))
		if r := m.GetResult(); r != nil {
			codes = append(codes, resultCodes([]*toolsdv1.ToolResult{r})...)
		}
		settled = m.GetSettled()
	}
	return kinds, codes, settled
}

// failingResults is a session store whose appends of tool/result events fail.
type failingResults struct{ session.Store }

var errDiskGone = errors.New("disk gone")

func (f failingResults) Append(ctx context.Context, sessionID string, events ...session.Event) ([]session.Event, error) {
	for _, ev := range events {
		if ev.Type == session.TypeToolResult {
			return nil, errDiskGone
		}
	}
	return f.Store.Append(ctx, sessionID, events...)
}

// TestResultLogFailureAfterAccepted fails the log's result appends: the batch's calls
// are in the log, so the client still gets accepted (held, for a single call) before
// the error that ends the stream, and no result.
func TestResultLogFailureAfterAccepted(t *testing.T) {
	e := start(t, "limits: {accepted_hold: 1m}\n", app.WithSessionStoreWrapper(func(s session.Store) session.Store { return failingResults{s} }))
	runProvider(t, e.app.Addr(), echoTool())
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d calls", n), func(t *testing.T) {
			var calls []*toolsdv1.ToolCall
			for i := range n {
				calls = append(calls, call(fmt.Sprintf("c%d", i), "echo", `{"text":"hi"}`))
			}
			out, err := e.execute(t, &toolsdv1.Batch{SessionId: fmt.Sprintf("s-log-fails-%d", n), Calls: calls}, batchOptions{})
			if status.Code(err) != codes.Internal {
				t.Errorf("ExecuteBatch() = %v, want Internal", err)
			}
			if !slices.Equal(out.order, []string{"accepted"}) || len(out.accepted.GetCallSeqs()) != n {
				t.Errorf("messages = %v, accepted = %v; want only accepted, with %d call seqs", out.order, out.accepted, n)
			}
		})
	}
}
