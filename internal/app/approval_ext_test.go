package app_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
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
	stream := openFixedWindow(t, e.app.Addr())
	// Two results larger than the client's flow control window: the second leaves the
	// outbox's writer waiting on a client that reads nothing.
	calls := twoLargeThen(call("ask", "echo", `{"text":"may I?"}`))
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

// TestApprovalAnsweredAsItsWaitExpires: an answer and the approval wait's expiry that
// come together have one outcome, and the log agrees with the result. Here the wait's
// timer fires while the server records the answer it has taken ("approval answered"),
// before the call has it: the answer stands and the call runs; it used to end
// APPROVAL_TIMEOUT under the logged answer.
func TestApprovalAnsweredAsItsWaitExpires(t *testing.T) {
	expire := make(chan func(), 1)
	after := func(_ time.Duration, f func()) func() bool {
		expire <- f
		return func() bool { return true }
	}
	var answered atomic.Int32
	logger := zaptest.NewLogger(t, zaptest.WrapOptions(zap.Hooks(func(en zapcore.Entry) error {
		if en.Message == "approval answered" {
			answered.Add(1)
			(<-expire)() // the wait's timer fires now
		}
		return nil
	})))
	e := start(t, `
limits: {approval_timeout: 1h}
policy:
  rules:
    - {tool: echo, decision: ask}
`, app.WithLogger(logger), app.WithApprovalTimer(after))
	runProvider(t, e.app.Addr(), echoTool())
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-answer-expiry", Calls: []*toolsdv1.ToolCall{call("ask", "echo", `{"text":"ran"}`)}},
		batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
		}})
	if got := resultCodes(out.results); answered.Load() != 1 || !slices.Equal(got, []string{""}) || out.results[0].GetContent() != "ran" {
		t.Errorf("logged %d answers; result codes %v, content %q; want one answer and the call run (ran)", answered.Load(), got, out.results[0].GetContent())
	}
}

// TestApprovalAfterItsWaitExpiredIsIgnored: once the approval wait has expired, an
// answer to it is one for a call not awaiting an answer: it is logged as such, never as
// "approval answered", and the call ends APPROVAL_TIMEOUT. The order is forced: the
// wait's timer fires, the approver's wait ends and is held before its withdrawal, the
// client answers only then, and the wait is withdrawn once the server has read the answer.
func TestApprovalAfterItsWaitExpiredIsIgnored(t *testing.T) {
	expire := make(chan func(), 1)
	after := func(_ time.Duration, f func()) func() bool {
		expire <- f
		return func() bool { return true }
	}
	held, read := make(chan struct{}), make(chan struct{})
	var readOnce sync.Once
	core, logs := observer.New(zap.InfoLevel)
	logger := zap.New(core, zap.Hooks(func(en zapcore.Entry) error {
		if en.Message == "approval for a call that is not awaiting one" || en.Message == "approval answered" {
			readOnce.Do(func() { close(read) })
		}
		return nil
	}))
	var ended atomic.Int32
	waitEnded := func() {
		if ended.Add(1) != 1 {
			return
		}
		close(held)
		select { // the withdrawal waits until the server has read the answer
		case <-read:
		case <-time.After(time.Minute): // a safety net: the test fails below
		}
	}
	e := start(t, `
limits: {approval_timeout: 1h}
policy:
  rules:
    - {tool: echo, decision: ask}
`, app.WithLogger(logger), app.WithApprovalTimer(after), app.WithApprovalWaitEnded(waitEnded))
	runProvider(t, e.app.Addr(), echoTool())
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-expiry-answer", Calls: []*toolsdv1.ToolCall{
		call("ask", "echo", `{"text":"ran"}`),
	}}, batchOptions{
		approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			(<-expire)() // the wait's timer fires
			select {     // the approver's wait has ended and is held before its withdrawal
			case <-held:
			case <-time.After(time.Minute):
				t.Error("the approval wait did not end after its timer fired")
			}
			return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: true}
		},
	})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"APPROVAL_TIMEOUT"}) {
		t.Errorf("result codes %v, want [APPROVAL_TIMEOUT]", got)
	}
	if n := logs.FilterMessage("approval answered").Len(); n != 0 {
		t.Errorf("logged %d approval answered lines for an expired wait, want 0", n)
	}
	if n := logs.FilterMessage("approval for a call that is not awaiting one").Len(); n != 1 {
		t.Errorf("logged %d lines for an approval of a call not awaiting one, want 1", n)
	}
}
