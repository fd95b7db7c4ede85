package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/toolsd/toolsd/examples/provider/exampletools"
	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/logtest"
	"github.com/toolsd/toolsd/pkg/provider"
)

type blockArgs struct {
	Label string `json:"label"`
}

// blockTool returns a tool that reports each start on started and then waits for its
// context to end, reporting that on stopped.
func blockTool(name string, started, stopped chan<- string) provider.Tool {
	return provider.NewTool(name, "Blocks until cancelled.", func(ctx context.Context, _ provider.Call, a blockArgs) (string, error) {
		started <- a.Label
		<-ctx.Done()
		stopped <- a.Label
		return "", ctx.Err()
	})
}

func TestBatchEndToEnd(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)

	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-e2e", Turn: 1, Step: 2, Calls: []*toolsdv1.ToolCall{
		call("c0", "echo", `{"text":"hello"}`),
		call("c1", "no_such_tool", `{}`),
		call("c2", "add", `{"a":1,`),
		call("c3", "add", `{"a":"x","b":1}`),
		call("c4", "add", `{"a":1,"b":2}`),
		call("c5", "fail", `{"message":"boom"}`),
		call("c6", "sleep", `{"ms":30}`),
	}}, batchOptions{})

	wantCodes := []string{"", "UNKNOWN_TOOL", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "", "TOOL_ERROR", ""}
	if diff := cmp.Diff(wantCodes, resultCodes(out.results)); diff != "" {
		t.Errorf("result codes (-want +got):\n%s", diff)
	}
	for i, r := range out.results {
		if int(r.GetIndex()) != i || r.GetCallId() != out.results[i].GetCallId() {
			t.Errorf("result %d has index %d, want model order", i, r.GetIndex())
		}
		if r.GetIsError() && r.GetContent() != "Error: "+r.GetError().GetMessage() {
			t.Errorf("result %d content = %q, want %q", i, r.GetContent(), "Error: "+r.GetError().GetMessage())
		}
		if r.GetCallSeq() != out.accepted.GetCallSeqs()[i] {
			t.Errorf("result %d call_seq = %d, want %d", i, r.GetCallSeq(), out.accepted.GetCallSeqs()[i])
		}
	}
	if got := out.results[0].GetContent(); got != "hello" {
		t.Errorf("echo content = %q, want hello", got)
	}
	if got := out.results[4].GetContent(); got != "3" {
		t.Errorf("add content = %q, want 3", got)
	}
	if got := out.results[5].GetContent(); got != "Error: boom" {
		t.Errorf("fail content = %q, want %q", got, "Error: boom")
	}

	events := e.readSession(t, "s-e2e")
	if len(events) != 14 {
		t.Fatalf("ReadSession() returned %d events, want 14 (7 calls, 7 results)", len(events))
	}
	callSeq := map[string]uint64{}
	for i, ev := range events {
		if ev.GetSeq() != uint64(i+1) {
			t.Errorf("event %d has seq %d, want dense seqs", i, ev.GetSeq())
		}
		if ev.GetTurn() != 1 || ev.GetStep() != 2 {
			t.Errorf("event %d turn/step = %d/%d, want 1/2", i, ev.GetTurn(), ev.GetStep())
		}
		switch ev.GetType() {
		case "tool/call":
			callSeq[ev.GetToolCall().GetCallId()] = ev.GetSeq()
		case "tool/result":
			msg := ev.GetToolResult().GetMessage()
			if want := []uint64{callSeq[msg.GetCallId()]}; !slices.Equal(ev.GetSourceEventSeqs(), want) {
				t.Errorf("result for %s cites %v, want %v", msg.GetCallId(), ev.GetSourceEventSeqs(), want)
			}
		}
	}
	// The malformed arguments are logged exactly as the model sent them.
	if got := events[2].GetToolCall().GetArgumentsJson(); got != `{"a":1,` {
		t.Errorf("logged arguments = %q, want the raw text", got)
	}
}

func TestBatchRequestErrors(t *testing.T) {
	e := start(t, "limits: {max_calls_per_batch: 2}\n")
	ok := call("c", "echo", `{}`)
	for name, tc := range map[string]struct {
		first *toolsdv1.ExecuteBatchRequest
	}{
		"missing session id": {first: batchReq(&toolsdv1.Batch{Calls: []*toolsdv1.ToolCall{ok}})},
		"empty batch":        {first: batchReq(&toolsdv1.Batch{SessionId: "bad"})},
		"duplicate call ids": {first: batchReq(&toolsdv1.Batch{SessionId: "bad", Calls: []*toolsdv1.ToolCall{ok, ok}})},
		"missing call id":    {first: batchReq(&toolsdv1.Batch{SessionId: "bad", Calls: []*toolsdv1.ToolCall{call("", "echo", "{}")}})},
		"over the call limit": {first: batchReq(&toolsdv1.Batch{SessionId: "bad", Calls: []*toolsdv1.ToolCall{
			call("a", "echo", "{}"), call("b", "echo", "{}"), call("c", "echo", "{}")}})},
		"bad scope":        {first: batchReq(&toolsdv1.Batch{SessionId: "bad", Scope: "a//b", Calls: []*toolsdv1.ToolCall{ok}})},
		"unknown tool set": {first: batchReq(&toolsdv1.Batch{SessionId: "bad", ToolSetId: "nope", Calls: []*toolsdv1.ToolCall{ok}})},
		"approval first":   {first: &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: "c"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			stream, err := e.tools.ExecuteBatch(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(tc.first); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if got := status.Code(err); got != codes.InvalidArgument && got != codes.NotFound {
				t.Errorf("ExecuteBatch() = %v, want InvalidArgument or NotFound", err)
			}
		})
	}
	if events := e.readSession(t, "bad"); len(events) != 0 {
		t.Errorf("rejected batches logged %d events, want none", len(events))
	}
}

// TestBatchRequestErrorsNameTheField: a refused batch's BadRequest names the field by
// its path in the request, as batch.calls[i].call_id does, so that a client can point
// at it; the session id is batch.session_id, not a top-level session_id.
func TestBatchRequestErrorsNameTheField(t *testing.T) {
	e := start(t, "")
	ok := call("c", "echo", `{}`)
	for name, tc := range map[string]struct {
		batch *toolsdv1.Batch
		field string
	}{
		"missing session id":   {batch: &toolsdv1.Batch{Calls: []*toolsdv1.ToolCall{ok}}, field: "batch.session_id"},
		"session id too long":  {batch: &toolsdv1.Batch{SessionId: strings.Repeat("s", 300), Calls: []*toolsdv1.ToolCall{ok}}, field: "batch.session_id"},
		"no calls":             {batch: &toolsdv1.Batch{SessionId: "s"}, field: "batch.calls"},
		"call without call id": {batch: &toolsdv1.Batch{SessionId: "s", Calls: []*toolsdv1.ToolCall{call("", "echo", `{}`)}}, field: "batch.calls[0].call_id"},
		"call id too long":     {batch: &toolsdv1.Batch{SessionId: "s", Calls: []*toolsdv1.ToolCall{ok, call(strings.Repeat("c", 257), "echo", `{}`)}}, field: "batch.calls[1].call_id"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.execute(t, tc.batch, batchOptions{})
			var fields []string
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						fields = append(fields, v.GetField())
					}
				}
			}
			if status.Code(err) != codes.InvalidArgument || !slices.Equal(fields, []string{tc.field}) {
				t.Errorf("ExecuteBatch() = %v with field violations %v, want InvalidArgument naming %s", err, fields, tc.field)
			}
		})
	}
}

// TestDuplicateCallIDIsQuotedCut: a batch refused for a duplicated call id quotes that
// id cut short, as other refusals quote client-chosen text: the id is the client's, of
// any size the request allows, and the status carries it in its message and again in
// its BadRequest.
func TestDuplicateCallIDIsQuotedCut(t *testing.T) {
	e := start(t, "")
	id := strings.Repeat("c", 256) // the longest allowed
	_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-dup", Calls: []*toolsdv1.ToolCall{
		call(id, "echo", `{}`), call(id, "echo", `{}`),
	}}, batchOptions{})
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "duplicates calls[0].call_id") {
		t.Fatalf("ExecuteBatch(duplicate call ids) = %v, want InvalidArgument naming the duplicate", err)
	}
	if strings.Contains(st.Message(), id) {
		t.Errorf("the refusal %q quotes the %d-byte call id whole, want it cut short", st.Message(), len(id))
	}
}

func batchReq(b *toolsdv1.Batch) *toolsdv1.ExecuteBatchRequest {
	return &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: b}}
}

func TestProviderKilledMidCall(t *testing.T) {
	e := start(t, "")
	started, stopped := make(chan string, 1), make(chan string, 1)
	_, stop := runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	if names := e.schemaNames(t, ""); !slices.Contains(names, "block") {
		t.Fatalf("Schemas() = %v, want block", names)
	}
	go func() {
		<-started
		stop()
	}()
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-kill", Calls: []*toolsdv1.ToolCall{call("c", "block", `{"label":"x"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"PROVIDER_GONE"}) {
		t.Errorf("codes = %v, want [PROVIDER_GONE]", got)
	}
	if names := e.schemaNames(t, ""); slices.Contains(names, "block") {
		t.Errorf("Schemas() after the provider died = %v, want block gone", names)
	}
}

// TestLongDenialReasonIsCut: a denial's reason becomes the call's result (content,
// message and reason), which max_result_bytes bounds like any other, and which a client
// with gRPC's default receive limit (4 MiB) must be able to take. A reason of any size
// up to max_request_bytes is cut, as a hook's reason is, at 4 KiB.
func TestLongDenialReasonIsCut(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: echo, decision: ask}
`)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	reason := strings.Repeat("r", 1536<<10) // under max_request_bytes (4 MiB)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-long-denial", Calls: []*toolsdv1.ToolCall{call("c", "echo", `{"text":"a"}`)}},
		batchOptions{approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Reason: reason}
		}})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"APPROVAL_DENIED"}) {
		t.Fatalf("codes = %v, want [APPROVAL_DENIED]", got)
	}
	r := out.results[0]
	if n := proto.Size(r); n > 16<<10 {
		t.Errorf("the denial's result is %d bytes, want the %d-byte reason cut", n, len(reason))
	}
	if got := r.GetError().GetReason(); !strings.HasPrefix(got, "rrrr") || !strings.HasSuffix(got, "…") {
		t.Errorf("error.reason = %.40q…, want the reason's start, cut", got)
	}
}

func TestApprovals(t *testing.T) {
	e := start(t, `
limits: {approval_timeout: 300ms}
policy:
  rules:
    - {tool: echo, decision: ask, reason: "echo needs a human"}
`)
	runProvider(t, e.app.Addr(), exampletools.Tools(filepath.Join(t.TempDir(), "notes.txt"))...)
	calls := []*toolsdv1.ToolCall{
		call("yes", "echo", `{"text":"a"}`),
		call("no", "echo", `{"text":"b"}`),
		call("silent", "echo", `{"text":"c"}`),
		call("free", "add", `{"a":1,"b":1}`),
	}
	t.Run("answered on the stream", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-approve", Calls: calls}, batchOptions{
			approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
				switch r.GetCallId() {
				case "yes":
					return &toolsdv1.ApprovalDecision{CallId: "yes", Approved: true}
				case "no":
					return &toolsdv1.ApprovalDecision{CallId: "no", Reason: "not today"}
				}
				return nil // let it time out
			},
		})
		want := []string{"", "APPROVAL_DENIED", "APPROVAL_TIMEOUT", ""}
		if diff := cmp.Diff(want, resultCodes(out.results)); diff != "" {
			t.Errorf("codes (-want +got):\n%s", diff)
		}
		asked := map[string]*toolsdv1.ApprovalRequest{}
		for _, r := range out.approvals {
			asked[r.GetCallId()] = r
		}
		if r := asked["yes"]; len(out.approvals) != 3 || r.GetReason() != "echo needs a human" || r.GetArgumentsJson() != `{"text":"a"}` || r.GetTool() != "echo" {
			t.Errorf("approval requests = %v, want 3 (yes, no, silent) carrying tool, reason and arguments", out.approvals)
		}
	})
	t.Run("half-closed client cannot answer", func(t *testing.T) {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-approve-2", Calls: calls[:1]}, batchOptions{})
		if got := resultCodes(out.results); !slices.Equal(got, []string{"APPROVAL_UNAVAILABLE"}) {
			t.Errorf("codes = %v, want [APPROVAL_UNAVAILABLE]", got)
		}
	})
}

// TestApprovalDecisionsAreRecorded: the proto promises an approval's reason is recorded,
// and a denial's reaches the model in its result; an approval's decision and reason
// leave a log line, so that who let a call run can be audited. The line is written
// before the call goes on (here made slow to write): one written after could come when
// the batch, and the test that owns the logger, had already ended.
func TestApprovalDecisionsAreRecorded(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	core := logtest.SlowLineCore{Core: observed, Msg: "approval answered", Delay: 50 * time.Millisecond}
	e := start(t, `
policy:
  rules:
    - {tool: echo, decision: ask, reason: "echo needs a human"}
`, app.WithLogger(zap.New(core)))
	runProvider(t, e.app.Addr(), echoTool())
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-approval-log", Calls: []*toolsdv1.ToolCall{
		call("yes", "echo", `{"text":"a"}`), call("no", "echo", `{"text":"b"}`),
	}}, batchOptions{
		approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
			return &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Approved: r.GetCallId() == "yes", Reason: "decided by " + r.GetCallId()}
		},
	})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"", "APPROVAL_DENIED"}) {
		t.Fatalf("codes = %v, want [\"\" APPROVAL_DENIED]", got)
	}
	got := map[string]string{}
	for _, l := range logs.FilterMessage("approval answered").All() {
		f := l.ContextMap()
		if f["batch_id"] != out.accepted.GetBatchId() {
			continue
		}
		got[f["call_id"].(string)] = fmt.Sprint(f["approved"], " ", f["reason"])
	}
	want := map[string]string{"yes": "true decided by yes", "no": "false decided by no"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("approval log lines by call id (-want +got):\n%s", diff)
	}
}

func TestCancelMidBatch(t *testing.T) {
	e := start(t, "")
	started, stopped := make(chan string, 4), make(chan string, 4)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	batch := &toolsdv1.Batch{SessionId: "s-cancel", MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("c0", "block", `{"label":"first"}`),
		call("c1", "block", `{"label":"second"}`),
		call("c2", "block", `{"label":"third"}`),
	}}
	out := e.mustExecute(t, batch, batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
		<-started
		if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "user pressed stop"}}}); err != nil {
			t.Errorf("Send(cancel) = %v", err)
		}
	}})
	want := []string{"ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"}
	if diff := cmp.Diff(want, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if !out.settled.GetCancelled() {
		t.Error("settled.cancelled = false, want true")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Error("the provider never saw the cancellation")
	}
	assertCompleteLog(t, e, "s-cancel", 3)
}

// TestStrayMessagesLogBounded checks that a client sending approvals nobody awaits
// writes a bounded number of warnings, with its ids clipped.
func TestStrayMessagesLogBounded(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	e := start(t, "", app.WithLogger(zap.New(core)))
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	batch := &toolsdv1.Batch{SessionId: "s-strays", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"x"}`)}}
	e.mustExecute(t, batch, batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
		<-started
		for i := range 100 {
			id := fmt.Sprint("nobody-asked-", i)
			if i == 0 {
				id = strings.Repeat("x", 10000)
			}
			if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: id}}}); err != nil {
				t.Errorf("Send(approval) = %v", err)
			}
		}
		// Read in order after the strays, the cancel ends the batch.
		if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}}); err != nil {
			t.Errorf("Send(cancel) = %v", err)
		}
	}})
	<-stopped
	strays := logs.FilterMessage("approval for a call that is not awaiting one").All()
	if len(strays) != 10 {
		t.Errorf("%d warnings for stray approvals, want the first 10", len(strays))
	}
	if n := logs.FilterMessage("further stray messages on this batch are not logged").Len(); n != 1 {
		t.Errorf("%d notes that further strays go unlogged, want 1", n)
	}
	if len(strays) > 0 {
		if id, _ := strays[0].ContextMap()["call_id"].(string); len(id) > 200 {
			t.Errorf("a 10,000-byte call id was logged as %d bytes, want it clipped", len(id))
		}
	}
}

// TestStrayLineWrittenBeforeTheBatchEnds: the goroutine that reads a batch's stream
// is not awaited by the handler, so a line it writes about a message (here a stray
// approval, its line slow to write) must be written before the batch ends, not when
// the batch, and with it the test that owns the logger, may be over.
func TestStrayLineWrittenBeforeTheBatchEnds(t *testing.T) {
	const stray = "approval for a call that is not awaiting one"
	observed, logs := observer.New(zap.InfoLevel)
	writing := make(chan struct{}, 1)
	core := logtest.SlowLineCore{Core: observed, Msg: stray, Delay: 200 * time.Millisecond, Writing: writing}
	e := start(t, "", app.WithLogger(zap.New(core)))
	started, release := make(chan struct{}, 1), make(chan struct{})
	runProvider(t, e.app.Addr(), gateTool("gated", started, release), constTool("quick", "ok"))
	// Two calls: a single call's accepted message may be held (limits.accepted_hold).
	batch := &toolsdv1.Batch{SessionId: "s-stray-line", Calls: []*toolsdv1.ToolCall{call("c0", "gated", `{}`), call("c1", "quick", `{}`)}}
	out := e.mustExecute(t, batch, batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
		<-started
		if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: "nobody-asked"}}}); err != nil {
			t.Errorf("Send(approval) = %v", err)
		}
		<-writing // the stray was read and its line is being written
		close(release)
		if err := s.CloseSend(); err != nil {
			t.Errorf("CloseSend() = %v", err)
		}
	}})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"", ""}) {
		t.Errorf("codes = %v, want two successes", got)
	}
	// The stream has ended, and with it the handler.
	if n := logs.FilterMessage(stray).Len(); n != 1 {
		t.Errorf("%d lines for the stray approval when the batch had ended, want 1", n)
	}
}

// TestEveryCallHasALogLine: the calls a cancel skips before they start get their
// "tool call" line too, with their code.
func TestEveryCallHasALogLine(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	e := start(t, "", app.WithLogger(zap.New(core)))
	started, stopped := make(chan string, 4), make(chan string, 4)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	batch := &toolsdv1.Batch{SessionId: "s-lines", MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("c0", "block", `{"label":"first"}`), call("c1", "block", `{"label":"second"}`), call("c2", "block", `{"label":"third"}`),
	}}
	e.mustExecute(t, batch, batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
		<-started
		if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{}}}); err != nil {
			t.Errorf("Send(cancel) = %v", err)
		}
	}})
	codes := map[string]string{}
	for _, l := range logs.FilterMessage("tool call").All() {
		f := l.ContextMap()
		if f["session_id"] == "s-lines" {
			codes[f["call_id"].(string)], _ = f["code"].(string)
		}
	}
	want := map[string]string{"c0": "ABORTED", "c1": "ABORTED_BEFORE_DISPATCH", "c2": "ABORTED_BEFORE_DISPATCH"}
	if diff := cmp.Diff(want, codes); diff != "" {
		t.Errorf("tool call lines by call id (-want +got):\n%s", diff)
	}
}

func TestClientDisconnectCompletesLog(t *testing.T) {
	e := start(t, "")
	started, stopped := make(chan string, 4), make(chan string, 4)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := e.tools.ExecuteBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-vanish", MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("c0", "block", `{"label":"a"}`), call("c1", "block", `{"label":"b"}`),
	}}))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancel() // the client vanishes mid-batch
	<-stopped
	waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, "s-vanish")) == 4 })
	assertCompleteLog(t, e, "s-vanish", 2)
}

// assertCompleteLog checks that every call in the session has exactly one result.
func assertCompleteLog(t *testing.T, e *env, sessionID string, calls int) {
	t.Helper()
	events := e.readSession(t, sessionID)
	results := map[uint64]int{}
	nCalls := 0
	for _, ev := range events {
		switch ev.GetType() {
		case "tool/call":
			nCalls++
		case "tool/result":
			for _, s := range ev.GetSourceEventSeqs() {
				results[s]++
			}
		}
	}
	if nCalls != calls || len(results) != calls {
		t.Fatalf("log has %d calls and results for %d of them, want %d and %d", nCalls, len(results), calls, calls)
	}
	for seq, n := range results {
		if n != 1 {
			t.Errorf("call seq %d has %d results, want 1", seq, n)
		}
	}
}

func TestTimeoutCancelsProviderCall(t *testing.T) {
	e := start(t, `
policy:
  tools:
    block: {timeout: 100ms}
`)
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-timeout", Calls: []*toolsdv1.ToolCall{call("c", "block", `{"label":"t"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"TOOL_TIMEOUT"}) {
		t.Fatalf("codes = %v, want [TOOL_TIMEOUT]", got)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Error("the provider never observed the cancellation")
	}
}

// A call whose timeout fired is TOOL_TIMEOUT even when the client cancels the batch
// while toolsd still waits (cancel_grace) for a provider that ignores the cancel. The
// provider is driven by hand: the client cancels once the provider has received
// toolsd's cancel, which only the timeout sends (an SDK handler would see its own
// deadline, which can pass before toolsd's timer fires).
func TestTimeoutThenCancelStaysTimeout(t *testing.T) {
	e := start(t, `
limits:
  cancel_grace: 300ms
policy:
  tools:
    stuck: {timeout: 100ms}
`)
	p := connectHand(t, e, "stuck")
	cancelled := make(chan struct{})
	go func() {
		for {
			m, err := p.stream.Recv()
			if err != nil {
				return
			}
			if m.GetCancel() != nil {
				close(cancelled) // and never answer: the tool does not stop
				return
			}
		}
	}()
	sent := make(chan error, 1)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-timeout-cancel", Calls: []*toolsdv1.ToolCall{call("c", "stuck", `{"label":"s"}`)}}, batchOptions{
		onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
			go func() {
				<-cancelled // the timeout fired and was forwarded
				sent <- s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}})
			}()
		},
	})
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("sending cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no cancel sent; results %v", out.results)
	}
	if got := resultCodes(out.results); !slices.Equal(got, []string{"TOOL_TIMEOUT"}) {
		t.Errorf("codes = %v, want [TOOL_TIMEOUT]", got)
	}
}

func TestIdempotentRetryAfterReconnect(t *testing.T) {
	e := start(t, `
retry: {max_attempts: 200, budget: 20s, base_delay: 10ms, max_delay: 20ms}
policy:
  tools:
    flaky: {idempotent: true}
`)
	started, stopped := make(chan string, 2), make(chan string, 2)
	_, stopA := runProvider(t, e.app.Addr(), blockTool("flaky", started, stopped), blockTool("plain", started, stopped))
	done := make(chan *outcome, 1)
	go func() {
		out, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-retry", Calls: []*toolsdv1.ToolCall{
			call("c0", "flaky", `{"label":"f"}`), call("c1", "plain", `{"label":"p"}`),
		}}, batchOptions{})
		if err != nil {
			t.Errorf("ExecuteBatch() = %v", err)
		}
		done <- out
	}()
	<-started
	<-started
	stopA() // both calls are in flight at provider A
	answer := provider.NewTool("flaky", "Blocks until cancelled.", func(context.Context, provider.Call, blockArgs) (string, error) {
		return "answered by B", nil
	})
	runProvider(t, e.app.Addr(), answer)
	out := <-done
	if out == nil || len(out.results) != 2 {
		t.Fatalf("outcome = %v, want two results", out)
	}
	if got := out.results[0]; got.GetIsError() || got.GetContent() != "answered by B" {
		t.Errorf("idempotent call result = %v, want it retried on provider B", got)
	}
	if got := out.results[1].GetError().GetCode(); got != "PROVIDER_GONE" {
		t.Errorf("non-idempotent call code = %q, want PROVIDER_GONE (never retried)", got)
	}
}

// Cancellation is quiescent: a call that timed out still holds the batch's barrier
// until its tool has stopped, so an exclusive call after it runs alone.
func TestExclusiveWaitsForATimedOutCallToStop(t *testing.T) {
	e := start(t, `
policy:
  tools:
    lingers: {timeout: 100ms}
`)
	var active, overlap atomic.Int64
	lingers := provider.NewTool("lingers", "Cleans up slowly after a cancel.", func(ctx context.Context, _ provider.Call, _ blockArgs) (string, error) {
		active.Add(1)
		defer active.Add(-1)
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond) // clean-up still touching shared state
		return "", ctx.Err()
	})
	solo := provider.NewTool("solo", "Must run alone.", func(context.Context, provider.Call, blockArgs) (string, error) {
		overlap.Store(active.Load())
		return "ok", nil
	}, provider.Exclusive())
	runProvider(t, e.app.Addr(), lingers, solo)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-barrier", Calls: []*toolsdv1.ToolCall{
		call("c0", "lingers", `{"label":"a"}`), call("c1", "solo", `{"label":"b"}`),
	}}, batchOptions{})
	if got, want := resultCodes(out.results), []string{"TOOL_TIMEOUT", ""}; !slices.Equal(got, want) {
		t.Errorf("codes = %q, want %q", got, want)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("the exclusive call ran while %d other call(s) of its batch were still running", n)
	}
}

// TestDenialThenCancelStaysDenied: a client that denies a call and then cancels the
// batch (or half-closes) gets the denial as the call's result, with its reason, not
// ABORTED_BEFORE_DISPATCH (or APPROVAL_UNAVAILABLE): the answer came first, and it is
// the more specific outcome.
func TestDenialThenCancelStaysDenied(t *testing.T) {
	e := start(t, `
policy:
  rules:
    - {tool: echo, decision: ask, reason: "echo needs a human"}
`)
	runProvider(t, e.app.Addr(), echoTool())
	for i := range 30 {
		sid := fmt.Sprint("s-deny-cancel-", i)
		var stream toolsdv1.ToolService_ExecuteBatchClient
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: sid, Calls: []*toolsdv1.ToolCall{call("c0", "echo", `{"text":"a"}`)}}, batchOptions{
			onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) { stream = s },
			approve: func(r *toolsdv1.ApprovalRequest) *toolsdv1.ApprovalDecision {
				d := &toolsdv1.ApprovalDecision{CallId: r.GetCallId(), Reason: "not this one"}
				if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: d}}); err != nil {
					t.Errorf("Send(denial) = %v", err)
				}
				if i%2 == 1 {
					if err := stream.CloseSend(); err != nil {
						t.Errorf("CloseSend() = %v", err)
					}
					return nil
				}
				// The batch may already have ended with the denial: Send then
				// reports io.EOF (the status comes from Recv), which is fine.
				if err := stream.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}}); err != nil && !errors.Is(err, io.EOF) {
					t.Errorf("Send(cancel) = %v", err)
				}
				return nil
			},
		})
		if len(out.results) != 1 || out.results[0].GetError().GetCode() != "APPROVAL_DENIED" || out.results[0].GetError().GetReason() != "not this one" {
			t.Fatalf("batch %d: results = %v, want APPROVAL_DENIED with the client's reason", i, out.results)
		}
		assertCompleteLog(t, e, sid, 1)
	}
}
