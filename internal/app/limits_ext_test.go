package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/pkg/provider"
)

type sizeArgs struct {
	Bytes int `json:"bytes"`
}

// sizedTool answers with a string of the requested size.
func sizedTool(name string) provider.Tool {
	return provider.NewTool(name, "Answers with that many bytes.", func(_ context.Context, _ provider.Call, a sizeArgs) (string, error) {
		return strings.Repeat("x", a.Bytes), nil
	})
}

// echoTool answers with its text; its schema accepts any object.
func echoTool() provider.Tool {
	return provider.NewTool("echo", "Echoes.", func(_ context.Context, _ provider.Call, a map[string]any) (string, error) {
		return fmt.Sprint(a["text"]), nil
	})
}

// TestArgumentLimits checks the per-call argument limits: each failing call gets an
// INVALID_ARGUMENTS result while its siblings run, and every call is logged as sent.
func TestArgumentLimits(t *testing.T) {
	e := start(t, "limits: {max_argument_bytes: 1KiB, max_json_depth: 5}\n")
	runProvider(t, e.app.Addr(), echoTool())
	deep := strings.Repeat(`{"a":`, 6) + "1" + strings.Repeat("}", 6)
	okDepth := strings.Repeat(`{"a":`, 5) + "1" + strings.Repeat("}", 5)
	big := `{"text":"` + strings.Repeat("y", 1100) + `"}`
	calls := []*toolsdv1.ToolCall{
		call("big", "echo", big),
		call("ok", "echo", `{"text":"fine"}`),
		call("deep", "echo", deep),
		call("depth-ok", "echo", okDepth),
		call("dup", "echo", `{"text":"a","text":"b"}`),
		call("escaped-dup", "echo", `{"text":"a","t\u0065xt":"b"}`),
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-args", Calls: calls}, batchOptions{})
	want := []string{"INVALID_ARGUMENTS", "", "INVALID_ARGUMENTS", "", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS"}
	if diff := cmp.Diff(want, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	for i, r := range out.results {
		if r.GetIsError() && !strings.Contains(r.GetError().GetMessage(), "invalid arguments") {
			t.Errorf("result %d message = %q, want it to say the arguments are invalid", i, r.GetError().GetMessage())
		}
	}
	if got := out.results[1].GetContent(); got != "fine" {
		t.Errorf("sibling content = %q, want fine", got)
	}
	assertCompleteLog(t, e, "s-args", len(calls))
	for _, ev := range e.readSession(t, "s-args") {
		if c := ev.GetToolCall(); c != nil && c.GetCallId() == "big" && c.GetArgumentsJson() != big {
			t.Errorf("logged arguments of the oversized call are %d bytes, want the %d sent", len(c.GetArgumentsJson()), len(big))
		}
	}
}

// TestRequestSizeLimit checks max_request_bytes: a batch over it is refused as a whole
// with ResourceExhausted before anything is logged.
func TestRequestSizeLimit(t *testing.T) {
	e := start(t, "limits: {max_request_bytes: 64KiB}\n")
	runProvider(t, e.app.Addr(), echoTool())
	batchOf := func(session string, n int) *toolsdv1.Batch {
		return &toolsdv1.Batch{SessionId: session, Calls: []*toolsdv1.ToolCall{call("c", "echo", `{"text":"`+strings.Repeat("z", n)+`"}`)}}
	}
	for name, tc := range map[string]struct {
		bytes  int
		want   codes.Code
		reason string // "" when the transport refuses the message before toolsd sees it
	}{
		"just under": {bytes: 60 << 10, want: codes.OK},
		// Under the transport's limit, which also fits provider results of 1MiB.
		"just over":        {bytes: 66 << 10, want: codes.ResourceExhausted, reason: "REQUEST_TOO_LARGE"},
		"over the results": {bytes: 1100 << 10, want: codes.ResourceExhausted},
		"far over":         {bytes: 2 << 20, want: codes.ResourceExhausted},
	} {
		t.Run(name, func(t *testing.T) {
			session := "s-size-" + strings.ReplaceAll(name, " ", "-")
			b := batchOf(session, tc.bytes)
			out, err := e.execute(t, b, batchOptions{})
			if got := status.Code(err); got != tc.want || (tc.reason != "" && reason(err) != tc.reason) {
				t.Fatalf("ExecuteBatch(%d bytes) = %v, want %v %s", proto.Size(b), err, tc.want, tc.reason)
			}
			events := e.readSession(t, session)
			if tc.want == codes.OK {
				if len(out.results) != 1 || out.results[0].GetIsError() {
					t.Errorf("results = %v, want one success", out.results)
				}
				return
			}
			if len(events) != 0 {
				t.Errorf("refused batch logged %d events, want none", len(events))
			}
		})
	}
}

// TestRequestSizeLimitLaterMessages: max_request_bytes holds for every client message
// of a batch stream, not only the batch: an approval or cancel over it ends the stream
// with REQUEST_TOO_LARGE, as the batch would, and cancels the batch, whose log is
// completed. (Over gRPC's own receive limit the transport does the same, without
// details.)
func TestRequestSizeLimitLaterMessages(t *testing.T) {
	e := start(t, "limits: {max_request_bytes: 64KiB}\n")
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	big := strings.Repeat("r", 100<<10)
	for name, m := range map[string]*toolsdv1.ExecuteBatchRequest{
		"approval": {Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: "c", Reason: big}}},
		"cancel":   {Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: big}}},
	} {
		t.Run(name, func(t *testing.T) {
			session := "s-later-size-" + name
			out, err := e.execute(t, &toolsdv1.Batch{SessionId: session, Calls: []*toolsdv1.ToolCall{call("c", "block", `{"label":"x"}`)}}, batchOptions{
				onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
					<-started
					if err := s.Send(m); err != nil {
						t.Errorf("Send(%s) = %v", name, err)
					}
					// A client that still wants the batch to end.
					_ = s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{}}})
				},
			})
			if status.Code(err) != codes.ResourceExhausted || reason(err) != "REQUEST_TOO_LARGE" {
				t.Errorf("ExecuteBatch() = %v after %v, want ResourceExhausted with reason REQUEST_TOO_LARGE", err, out.order)
			}
			<-stopped
			waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, session)) == 2 })
			assertCompleteLog(t, e, session, 1)
		})
	}
}

// TestOversizedLaterMessageIsTheCancelReason: a later message over max_request_bytes
// cancels the batch with its own cause, so the provider's cancel says why (as a client's
// cancel or a slow client's cut-off does): the stream is ended after the cause is
// recorded, since ending it ends the batch's parent context.
func TestOversizedLaterMessageIsTheCancelReason(t *testing.T) {
	e := start(t, "limits: {max_request_bytes: 64KiB, accepted_hold: 0s}\n")
	p := connectHand(t, e, "raw")
	stream, err := e.tools.ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-later-size-reason", Calls: []*toolsdv1.ToolCall{call("c", "raw", `{}`)}})); err != nil {
		t.Fatal(err)
	}
	ex := p.recv(t).GetExecute()
	if ex == nil {
		t.Fatal("provider got no execute")
	}
	big := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: strings.Repeat("r", 100<<10)}}}
	if err := stream.Send(big); err != nil {
		t.Fatal(err)
	}
	c := p.recv(t).GetCancel()
	if c.GetRequestId() != ex.GetRequestId() || !strings.Contains(c.GetReason(), "max_request_bytes") {
		t.Errorf("provider's cancel = %v, want request %d cancelled for the message over max_request_bytes", c, ex.GetRequestId())
	}
	p.send(t, result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Cancelled: true}))
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.ResourceExhausted || reason(err) != "REQUEST_TOO_LARGE" {
		t.Errorf("ExecuteBatch() = %v, want ResourceExhausted with reason REQUEST_TOO_LARGE", err)
	}
	waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, "s-later-size-reason")) == 2 })
}

// TestOversizedLaterMessageIsTheRPCsCode: the RPC's log line (and so its metrics)
// carries the status the client got for a later message that is too large, as it does
// for a client cut off for not reading, not Canceled: one over max_request_bytes, which
// toolsd refuses, and one over gRPC's own receive limit (max_result_bytes, 1 MiB, +
// 64 KiB), which the transport refuses, ending the stream before the reader's Recv
// returns.
func TestOversizedLaterMessageIsTheRPCsCode(t *testing.T) {
	for name, size := range map[string]int{"max_request_bytes": 100 << 10, "transport": 2 << 20} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			e := start(t, "limits: {max_request_bytes: 64KiB}\n", app.WithLogger(zap.New(core)))
			started, stopped := make(chan string, 1), make(chan string, 1)
			runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
			big := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: strings.Repeat("r", size)}}}
			id := "s-later-code-" + name
			_, err := e.execute(t, &toolsdv1.Batch{SessionId: id, Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"x"}`)}}, batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
				<-started
				if err := s.Send(big); err != nil {
					t.Errorf("Send(big cancel) = %v", err)
				}
			}})
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("ExecuteBatch() = %v, want ResourceExhausted", err)
			}
			<-stopped
			code := loggedField(t, logs, "finished call", "grpc.method", "ExecuteBatch", "grpc.code")
			if code != "ResourceExhausted" {
				t.Errorf("logged grpc.code = %v, want ResourceExhausted, the status the client got", code)
			}
			waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, id)) == 2 })
		})
	}
}

// TestInvalidUTF8Arguments sends arguments_json with invalid UTF-8, which the Go
// client cannot marshal, as raw bytes: the RPC fails and nothing is logged.
func TestInvalidUTF8Arguments(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), echoTool())
	good := batchReq(&toolsdv1.Batch{SessionId: "s-utf8", Calls: []*toolsdv1.ToolCall{
		call("ok", "echo", `{"text":"fine"}`), call("bad", "echo", `{"text":"@@"}`),
	}})
	wire, err := proto.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(wire), "@@")
	wire[i], wire[i+1] = 0xff, 0xfe
	stream, err := e.conn.NewStream(t.Context(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		toolsdv1.ToolService_ExecuteBatch_FullMethodName, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&wire); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var reply []byte
	err = stream.RecvMsg(&reply)
	// The client's bytes, refused as its error and naming the field (gRPC alone would
	// answer INTERNAL).
	if status.Code(err) != codes.InvalidArgument || !slices.Equal(fieldViolations(err), []string{"batch.calls[1].arguments_json"}) {
		t.Errorf("ExecuteBatch(invalid UTF-8) = %v, want InvalidArgument naming batch.calls[1].arguments_json", err)
	}
	if events := e.readSession(t, "s-utf8"); len(events) != 0 {
		t.Errorf("refused batch logged %d events, want none", len(events))
	}
	// The connection and toolsd are fine.
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-utf8", Calls: []*toolsdv1.ToolCall{call("ok", "echo", `{"text":"fine"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{""}) {
		t.Errorf("next batch codes = %v, want success", got)
	}
}

// rawCodec sends and receives already-encoded protobuf messages.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestRegistrationLimits checks max_tools_per_scope, max_tools_per_provider and
// max_schema_bytes: the tool over a limit is refused with RESOURCE_EXHAUSTED, the ones
// accepted before it stay.
func TestRegistrationLimits(t *testing.T) {
	e := start(t, "limits: {max_tools_per_scope: 3, max_tools_per_provider: 4, max_schema_bytes: 512}\n")
	p, err := connectRaw(t, e.conn, "limits")
	if err != nil {
		t.Fatal(err)
	}
	got := statusCodes(p.register(t, "one", def("t1"), def("t2"), def("t3"), def("t4")))
	if want := []string{"", "", "", "RESOURCE_EXHAUSTED"}; !slices.Equal(got, want) {
		t.Errorf("four tools into a scope of three = %v, want %v", got, want)
	}
	got = statusCodes(p.register(t, "two", def("u1"), def("u2")))
	if want := []string{"", "RESOURCE_EXHAUSTED"}; !slices.Equal(got, want) {
		t.Errorf("the provider's fifth tool = %v, want %v", got, want)
	}
	if names := e.schemaNames(t, "one"); !slices.Equal(names, []string{"t1", "t2", "t3"}) {
		t.Errorf("Schemas(one) = %v, want the three accepted tools", names)
	}
	// A second provider still has room in another scope, but not for a huge schema.
	q, err := connectRaw(t, e.conn, "limits-2")
	if err != nil {
		t.Fatal(err)
	}
	huge := def("huge")
	huge.ParametersJson = `{"type":"object","description":"` + strings.Repeat("d", 600) + `"}`
	sts := q.register(t, "three", huge, def("small"))
	if got := statusCodes(sts); !slices.Equal(got, []string{"RESOURCE_EXHAUSTED", ""}) {
		t.Errorf("a schema over max_schema_bytes = %v, want [RESOURCE_EXHAUSTED \"\"]", got)
	}
	if msg := sts[0].GetErrorMessage(); !strings.Contains(msg, "512") {
		t.Errorf("error message = %q, want it to name the limit", msg)
	}
}

// TestResultSizeLimit checks max_result_bytes: an oversized result fails its call with
// RESULT_TOO_LARGE, and the provider's stream carries the next call.
func TestResultSizeLimit(t *testing.T) {
	e := start(t, "limits: {max_result_bytes: 4KiB}\n")
	runProvider(t, e.app.Addr(), sizedTool("sized"))
	for _, tc := range []struct {
		bytes int
		want  string
	}{{100, ""}, {8 << 10, "RESULT_TOO_LARGE"}, {100 << 10, "RESULT_TOO_LARGE"}, {200, ""}} {
		out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-result", Calls: []*toolsdv1.ToolCall{
			call(fmt.Sprint("c", tc.bytes), "sized", fmt.Sprintf(`{"bytes":%d}`, tc.bytes)),
		}}, batchOptions{})
		if got := resultCodes(out.results); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("a %d-byte result = %v, want [%s]", tc.bytes, got, tc.want)
		}
	}
	assertCompleteLog(t, e, "s-result", 4)
}

// TestProviderLimits checks max_providers (a further stream is refused with
// ResourceExhausted) and max_in_flight_per_provider (a further call fails with
// PROVIDER_OVERLOADED while its sibling runs).
func TestProviderLimits(t *testing.T) {
	e := start(t, "limits: {max_providers: 1, max_in_flight_per_provider: 1}\n")
	started, stopped := make(chan string, 2), make(chan string, 2)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	if _, err := connectRaw(t, e.conn, "one-too-many"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Connect() past max_providers = %v, want ResourceExhausted", err)
	}
	release := make(chan struct{})
	first := make(chan *outcome, 1)
	go func() {
		out, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-inflight", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"a"}`)}},
			batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
				<-release
				if err := s.Send(&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{}}}); err != nil {
					t.Error(err)
				}
			}})
		if err != nil || out == nil {
			t.Errorf("ExecuteBatch() = %v", err)
			out = &outcome{}
		}
		first <- out
	}()
	<-started // the provider's only slot is taken
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-inflight", Calls: []*toolsdv1.ToolCall{call("c1", "block", `{"label":"b"}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"PROVIDER_OVERLOADED"}) {
		t.Errorf("a call past max_in_flight_per_provider = %v, want [PROVIDER_OVERLOADED]", got)
	}
	close(release)
	if got := resultCodes((<-first).results); !slices.Equal(got, []string{"ABORTED"}) {
		t.Errorf("the running call, cancelled = %v, want [ABORTED]", got)
	}
	assertCompleteLog(t, e, "s-inflight", 2)
}

// TestSlowClientIsCutOff runs a batch of large results for a client that never reads:
// toolsd cuts it off with ResourceExhausted once the outbox stays full past the write
// timeout, and the session log still gets every result.
func TestSlowClientIsCutOff(t *testing.T) {
	clock := newStandingClock()
	e := start(t, "limits: {outbox_size: 2, write_timeout: 100ms}\n", app.WithSendClock(clock.now))
	runProvider(t, e.app.Addr(), sizedTool("sized"))
	const n = 60
	calls := make([]*toolsdv1.ToolCall, n)
	for i := range calls {
		calls[i] = call(fmt.Sprint("c", i), "sized", `{"bytes":65536}`)
	}
	stream, err := e.tools.ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-slow", Calls: calls})); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the batch to be cut off", func() bool {
		return rpcCount(t, e.app, "grpc_server_handled_total", "grpc_method", "ExecuteBatch", "grpc_code", "ResourceExhausted") == 1
	})
	// Read the log from another connection while this client reads nothing. The reads,
	// megabytes under the race detector, are not timed: however slowly the test reads,
	// toolsd does not cut this reader off too.
	other := dial(t, e.app.Addr())
	reader := &env{app: e.app, conn: other, tools: toolsdv1.NewToolServiceClient(other)}
	readLog(t, clock, reader, "s-slow", n)
	if received := readUntilCutOff(t, stream); received >= n {
		t.Errorf("received %d results, want fewer than %d", received, n)
	}
}

// readLog waits until session id's log holds n calls and their results and checks it
// (assertCompleteLog), reading through r with clock standing still: the log's results
// are large, and a reader slowed by the race detector on a busy machine would be cut
// off under the tests' short limits.write_timeout. A client cut off meanwhile is cut
// off once the clock runs again.
func readLog(t *testing.T, clock *standingClock, r *env, id string, n int) {
	t.Helper()
	waitFor(t, "every result in the log", func() (done bool) {
		clock.stand(func() { done = len(r.readSession(t, id)) == 2*n })
		return done
	})
	clock.stand(func() { assertCompleteLog(t, r, id, n) })
}

// standingClock is a send clock (app.WithSendClock) that stands still while the test
// reads a large session log (see [standingClock.stand]): toolsd times those sends
// against limits.write_timeout, and a test that reads slowly, under the race detector on
// a busy machine, would be cut off as a slow client. Otherwise it runs with the
// monotonic clock, so a client that reads nothing is still cut off.
type standingClock struct {
	mu    sync.Mutex
	epoch time.Time
	stood time.Duration // the time it stood still, which it does not count
	since time.Time     // when it began standing still; zero while it runs
}

func newStandingClock() *standingClock { return &standingClock{epoch: time.Now()} }

// now reads the clock in nanoseconds, never 0.
func (c *standingClock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now()
	if !c.since.IsZero() {
		t = c.since
	}
	return int64(t.Sub(c.epoch)-c.stood) + 1
}

// stand runs f with the clock standing still, so that no send made meanwhile counts as
// stalled. Calls must not overlap.
func (c *standingClock) stand(f func()) {
	c.mu.Lock()
	c.since = time.Now()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.stood += time.Since(c.since)
		c.since = time.Time{}
		c.mu.Unlock()
	}()
	f()
}

// TestSlowClientIsCutOffSingleCall is the same for a lone call, whose messages the
// handler writes itself while they cannot block: a result larger than the client's flow
// control window must not leave the handler stuck writing what follows it.
func TestSlowClientIsCutOffSingleCall(t *testing.T) {
	clock := newStandingClock()
	e := start(t, "limits: {write_timeout: 100ms}\n", app.WithSendClock(clock.now))
	runProvider(t, e.app.Addr(), sizedTool("sized"))
	stream := openFixedWindow(t, e.app.Addr())
	batch := &toolsdv1.Batch{SessionId: "s-slow-one", Calls: []*toolsdv1.ToolCall{call("c0", "sized", `{"bytes":262144}`)}}
	if err := stream.Send(batchReq(batch)); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	readLog(t, clock, e, "s-slow-one", 1)
	// Read only once toolsd has given up on the client, or reading would make room.
	waitFor(t, "the batch to be cut off", func() bool {
		return rpcCount(t, e.app, "grpc_server_handled_total", "grpc_method", "ExecuteBatch", "grpc_code", "ResourceExhausted") == 1
	})
	readUntilCutOff(t, stream)
}

// TestClientNotReadingWhileCallsRunIsCutOff: a client that stops reading is cut off
// after limits.write_timeout (with its allowance for a large message) also when nothing
// is left to put but a call that runs on: the outbox's writer waits on the client with
// no put waiting for room. The running call is cancelled as for any cut-off client (the
// tool here ends only then), and every result is logged.
func TestClientNotReadingWhileCallsRunIsCutOff(t *testing.T) {
	clock := newStandingClock()
	e := start(t, "limits: {write_timeout: 200ms}\n", app.WithSendClock(clock.now))
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), sizedTool("sized"), blockTool("block", started, stopped))
	stream := openFixedWindow(t, e.app.Addr())
	// Two results larger than the client's flow control window: the second leaves the
	// writer waiting on a client that reads nothing, while the third call runs.
	calls := twoLargeThen(call("run", "block", `{"label":"run"}`))
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-unread-run", Calls: calls})); err != nil {
		t.Fatal(err)
	}
	awaitRunning(t, started)
	awaitCancelled(t, stopped)
	other := dial(t, e.app.Addr())
	reader := &env{app: e.app, conn: other, tools: toolsdv1.NewToolServiceClient(other)}
	readLog(t, clock, reader, "s-unread-run", len(calls))
	readUntilCutOff(t, stream)
}

// TestClientNotReadingProgressIsCutOff is the same for a lone call whose progress the
// client does not read: a single-call batch writes its first messages itself, but its
// progress goes through the outbox's writer, which then waits on the client.
func TestClientNotReadingProgressIsCutOff(t *testing.T) {
	clock := newStandingClock()
	e := start(t, "limits: {write_timeout: 200ms}\n", app.WithSendClock(clock.now))
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), provider.NewTool("chatty", "Reports progress, then blocks until cancelled.",
		func(ctx context.Context, c provider.Call, _ blockArgs) (string, error) {
			for i := range 4 { // 240 KB: more than the client's flow control window
				c.Progress(strings.Repeat("p", 60000), float64(i), 4)
			}
			started <- "chatty"
			<-ctx.Done()
			stopped <- "chatty"
			return "", ctx.Err()
		}))
	stream := openFixedWindow(t, e.app.Addr())
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-unread-progress", Calls: []*toolsdv1.ToolCall{call("c0", "chatty", `{"label":"chatty"}`)}})); err != nil {
		t.Fatal(err)
	}
	awaitRunning(t, started)
	awaitCancelled(t, stopped)
	readLog(t, clock, e, "s-unread-progress", 1)
	readUntilCutOff(t, stream)
}

// TestCutOffClientGetsItsStatusAtOnce: a client cut off for not reading gets its status
// (ResourceExhausted, SLOW_CLIENT) when it is cut off, not once the batch has ended: the
// cut ends the RPC itself. Here a call that holds on after its cancellation (within
// cancel_grace) keeps the batch running until the client has read its status; the
// call's result, which comes only after that, is still logged.
func TestCutOffClientGetsItsStatusAtOnce(t *testing.T) {
	e := start(t, "limits: {write_timeout: 100ms, cancel_grace: 1m}\n")
	started, stopped, release := make(chan string, 1), make(chan string, 1), make(chan struct{})
	var once sync.Once
	releaseCall := func() { once.Do(func() { close(release) }) }
	runProvider(t, e.app.Addr(), sizedTool("sized"), provider.NewTool("stubborn", "Answers only once released, cancelled or not.",
		func(ctx context.Context, _ provider.Call, a blockArgs) (string, error) {
			started <- a.Label
			<-ctx.Done()
			stopped <- a.Label
			<-release
			return "released", nil
		}))
	t.Cleanup(releaseCall) // before the provider's stop, which waits for the call
	stream := openFixedWindow(t, e.app.Addr())
	// Two results larger than the client's flow control window leave the writer waiting
	// on a client that reads nothing, while the third call runs.
	calls := twoLargeThen(call("run", "stubborn", `{"label":"run"}`))
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-cut-status", Calls: calls})); err != nil {
		t.Fatal(err)
	}
	awaitRunning(t, started)
	awaitCancelled(t, stopped) // the client has been cut off
	ended := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				ended <- err
				return
			}
			if m.GetSettled() != nil {
				ended <- errors.New("settled: the batch ended before the client saw its status")
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if status.Code(err) != codes.ResourceExhausted || reason(err) != "SLOW_CLIENT" {
			t.Errorf("ExecuteBatch().Recv() = %v, want ResourceExhausted SLOW_CLIENT", err)
		}
	case <-time.After(30 * time.Second): // a safety net: the status is due when the client is cut off
		t.Error("a client cut off 30s ago has no status while a call of its batch still runs, want SLOW_CLIENT from the cut on")
		releaseCall()
		t.Logf("once the call was released: Recv() = %v", <-ended)
	}
	releaseCall()
	waitFor(t, "every result in the log", func() bool { return len(e.readSession(t, "s-cut-status")) == 2*len(calls) })
	assertCompleteLog(t, e, "s-cut-status", len(calls))
}

// awaitRunning waits for a tool to report its start.
func awaitRunning(t *testing.T, started <-chan string) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(30 * time.Second): // a safety net
		t.Fatal("the call did not start within 30s")
	}
}

// awaitCancelled waits for a tool that blocks until cancelled to be cancelled, which
// only cutting its batch's client off does.
func awaitCancelled(t *testing.T, stopped <-chan string) {
	t.Helper()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second): // a safety net: the cut comes after a few write timeouts
		t.Fatal("the call still runs 30s after its client stopped reading, want it cancelled once the client is cut off after write_timeout")
	}
}

// slowLink is a link that carries bytesPerTimeout bytes per write timeout of the clock
// toolsd's sends are timed by (see [app.WithSendClock]): each read moves that clock by
// the time its bytes took. Each read also takes a whole write timeout of real time, so
// that sends timed by the real clock would find their reader stalled many times over,
// however fast the machine: only the send clock decides.
type slowLink struct {
	now             atomic.Int64
	timeout         time.Duration
	bytesPerTimeout int64
}

func newSlowLink(timeout time.Duration, bytesPerTimeout int64) *slowLink {
	l := &slowLink{timeout: timeout, bytesPerTimeout: bytesPerTimeout}
	l.now.Store(1)
	return l
}

// clock is the send clock of the app whose peer reads over l.
func (l *slowLink) clock() int64 { return l.now.Load() }

// dial connects to addr over l.
func (l *slowLink) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return slowConn{c, l}, nil
}

// slowConn reads over a slowLink.
type slowConn struct {
	net.Conn
	link *slowLink
}

func (c slowConn) Read(b []byte) (int, error) {
	if len(b) > 4096 {
		b = b[:4096]
	}
	n, err := c.Conn.Read(b)
	c.link.now.Add(int64(n) * int64(c.link.timeout) / c.link.bytesPerTimeout)
	time.Sleep(c.link.timeout)
	return n, err
}

// TestSlowLinkGetsALargeResult: a client reading steadily over a link that takes
// longer than the write timeout to carry one large result still gets the result and
// settled, and the batch ends with OK. While the result drains, the next message's Send
// waits without a write completing; the wait allowed grows with the size of the message
// ahead of it. The link takes ~3 write timeouts of the send clock over the result, and
// hundreds of real ones.
func TestSlowLinkGetsALargeResult(t *testing.T) {
	const timeout = time.Millisecond
	link := newSlowLink(timeout, 300<<10) // 900 KB take ~3 write timeouts
	e := start(t, fmt.Sprintf("limits: {write_timeout: %s}\n", timeout), app.WithSendClock(link.clock))
	runProvider(t, e.app.Addr(), sizedTool("sized"))
	conn, err := grpc.NewClient("passthrough:///"+e.app.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithContextDialer(link.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	stream, err := toolsdv1.NewToolServiceClient(conn).ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-slow-link", Calls: []*toolsdv1.ToolCall{call("c0", "sized", `{"bytes":900000}`)}})); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var kinds []string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %v: Recv() = %v, want settled", kinds, err)
		}
		kinds = append(kinds, messageKind(m))
		if m.GetSettled() != nil {
			break
		}
	}
	// The result was written by the handler itself (a lone call's first messages are):
	// the wait allowed behind it counts its size too, so the batch ends as it should.
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after settled: Recv() = %v, want the stream's end (OK)", err)
	}
}

// TestProviderOnSlowLinkGetsLargeArguments: a provider reading steadily over a link
// that takes longer than the write timeout to carry one call's arguments is not taken
// for stuck: the next call's Send waits while the first drains, and the wait allowed
// grows with the size of the message ahead of it (as for agents). The link takes ~3
// write timeouts of the send clock over one call's arguments, and hundreds of real ones.
func TestProviderOnSlowLinkGetsLargeArguments(t *testing.T) {
	const timeout = time.Millisecond
	link := newSlowLink(timeout, 133<<10) // 400 KB take ~3 write timeouts
	e := start(t, fmt.Sprintf("limits: {write_timeout: %s}\n", timeout), app.WithSendClock(link.clock))
	stop := runProviderWith(t, e.app.Addr(), []provider.Option{
		provider.WithWindows(64<<10, 64<<10),
		provider.WithDialOptions(grpc.WithContextDialer(link.dial)),
	}, provider.NewTool("measure", "Says how long its text is.", func(_ context.Context, _ provider.Call, a struct {
		Text string `json:"text"`
	}) (string, error) {
		return fmt.Sprint(len(a.Text)), nil
	}))
	defer stop()
	args := fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 400_000))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-slow-provider", Calls: []*toolsdv1.ToolCall{
		call("c0", "measure", args), call("c1", "measure", args),
	}}, batchOptions{})
	for i, r := range out.results {
		if r.GetIsError() || r.GetContent() != "400000" {
			t.Errorf("result %d = %q (%s), want 400000", i, r.GetContent(), r.GetError().GetCode())
		}
	}
}

// readUntilCutOff reads a batch stream to its end, which must be toolsd cutting the
// client off (ResourceExhausted, SLOW_CLIENT) before settled; it returns the results
// that got through.
func readUntilCutOff(t *testing.T, stream grpc.BidiStreamingClient[toolsdv1.ExecuteBatchRequest, toolsdv1.ExecuteBatchResponse]) (results int) {
	t.Helper()
	for {
		m, err := stream.Recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || reason(err) != "SLOW_CLIENT" {
				t.Errorf("ExecuteBatch().Recv() = %v, want ResourceExhausted SLOW_CLIENT", err)
			}
			return results
		}
		if m.GetResult() != nil {
			results++
		}
		if m.GetSettled() != nil {
			t.Fatal("the slow client got the whole batch: nothing was cut off")
		}
	}
}

// openFixedWindow opens an ExecuteBatch stream on a connection with fixed 64 KiB flow
// control windows (see dialFixedWindow).
func openFixedWindow(t *testing.T, addr string) toolsdv1.ToolService_ExecuteBatchClient {
	t.Helper()
	stream, err := toolsdv1.NewToolServiceClient(dialFixedWindow(t, addr)).ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// twoLargeThen is a batch's calls: two results larger than a fixed-window client's flow
// control window (the second leaves the writer waiting on a client that reads
// nothing), then c.
func twoLargeThen(c *toolsdv1.ToolCall) []*toolsdv1.ToolCall {
	return []*toolsdv1.ToolCall{
		call("c0", "sized", `{"bytes":262144}`),
		call("c1", "sized", `{"bytes":262144}`),
		c,
	}
}

// dialFixedWindow connects with a fixed 64 KiB flow-control window: a client that does
// not read never makes room.
func dialFixedWindow(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestConnectionTimeout checks connection_timeout: a client that connects and sends
// nothing is disconnected.
func TestConnectionTimeout(t *testing.T) {
	e := start(t, "limits: {connection_timeout: 200ms}\n")
	c, err := net.Dial("tcp", e.app.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, c) // the server's settings, then the end
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a silent connection was still open after 5s, want it closed after connection_timeout")
	}
}

// TestProgressToASlowClientBlocksNobody sends a lone call's progress, many times over,
// to a client that reads nothing and asks for gzip (which makes small messages cost
// more of the stream's write quota than their size): the provider's receive loop must
// not wait on that client, so another client's call on the same provider completes.
func TestProgressToASlowClientBlocksNobody(t *testing.T) {
	e := start(t, "")
	reported := make(chan struct{})
	chatty := provider.NewTool("chatty", "Reports progress, often.", func(_ context.Context, c provider.Call, _ map[string]any) (string, error) {
		for range 20000 {
			c.Progress("", 0, 0)
		}
		close(reported)
		return "ok", nil
	})
	runProvider(t, e.app.Addr(), chatty, echoTool())
	slow, err := toolsdv1.NewToolServiceClient(dialFixedWindow(t, e.app.Addr())).ExecuteBatch(t.Context(), grpc.UseCompressor(gzip.Name))
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Send(batchReq(&toolsdv1.Batch{SessionId: "s-chatty", Calls: []*toolsdv1.ToolCall{call("c0", "chatty", "{}")}})); err != nil {
		t.Fatal(err)
	}
	<-reported
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := batchReq(&toolsdv1.Batch{SessionId: "s-other", Calls: []*toolsdv1.ToolCall{call("c0", "echo", `{"text":"hi"}`)}})
	if err := runBatch(ctx, e.tools, req); err != nil {
		t.Fatalf("another client's call on the same provider: %v", err)
	}
}

// TestLargestPayloadsPass sends calls with the largest arguments and results the
// default limits allow, several at once through one provider stream: the fixed
// flow-control windows (1 MiB a stream, 4 MiB a connection) must move them all.
func TestLargestPayloadsPass(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), sizedTool("sized"), echoTool())
	const half = 500 << 10 // content and value of a result together: just under 1 MiB
	var calls []*toolsdv1.ToolCall
	for i := range 3 {
		calls = append(calls, call(fmt.Sprint("r", i), "sized", fmt.Sprintf(`{"bytes":%d}`, half)))
	}
	text := strings.Repeat("z", 1000<<10) // arguments just under 1 MiB
	calls = append(calls, call("a0", "echo", `{"text":"`+text+`"}`))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-large", Calls: calls}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"", "", "", ""}) {
		t.Fatalf("result codes = %v, want four successes", got)
	}
	for i, r := range out.results[:3] {
		if len(r.GetContent()) != half {
			t.Errorf("result %d: %d bytes of content, want %d", i, len(r.GetContent()), half)
		}
	}
	if out.results[3].GetContent() != text {
		t.Errorf("echo of %d bytes came back as %d bytes", len(text), len(out.results[3].GetContent()))
	}
}

// TestFlowControlWindows checks stream_window and connection_window: the server's first
// SETTINGS grant the fixed stream window and a WINDOW_UPDATE the connection window, and
// no bandwidth-estimation ping follows a peer's data; with both 0, gRPC's estimation
// pings.
func TestFlowControlWindows(t *testing.T) {
	for _, tc := range []struct {
		name, cfg          string
		stream, conn       uint32 // want; 0: gRPC's default 64 KiB
		wantEstimatingPing bool
	}{
		{name: "defaults", cfg: "", stream: 1 << 20, conn: 4 << 20},
		{name: "set", cfg: "limits: {stream_window: 256KiB, connection_window: 512KiB}\n", stream: 256 << 10, conn: 512 << 10},
		{name: "estimated", cfg: "limits: {stream_window: 0, connection_window: 0}\n", wantEstimatingPing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.cfg)
			stream, conn, pinged := handshakeWindows(t, e.app.Addr())
			if tc.stream != 0 && stream != tc.stream {
				t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE = %d, want %d", stream, tc.stream)
			}
			if tc.conn != 0 && conn != tc.conn {
				t.Errorf("connection window = %d, want %d", conn, tc.conn)
			}
			if pinged != tc.wantEstimatingPing {
				t.Errorf("bandwidth-estimation ping after data = %v, want %v", pinged, tc.wantEstimatingPing)
			}
		})
	}
}

// handshakeWindows speaks raw HTTP/2 to addr: it reads the windows the server grants,
// then opens a stream with one DATA frame followed by a PING of its own, and reports
// whether the server pinged between the two (the server handles frames, and queues what
// they make it write, in order).
func handshakeWindows(t *testing.T, addr string) (stream, conn uint32, pinged bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/toolsd.v1.ToolService/Nope"},
		{":authority", "toolsd"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, true, []byte{0, 0, 0, 0, 0}); err != nil { // one empty gRPC message
		t.Fatal(err)
	}
	mine := [8]byte{'t', 'o', 'o', 'l', 's', 'd'}
	if err := fr.WritePing(false, mine); err != nil {
		t.Fatal(err)
	}
	conn = 65535
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			stream = 65535
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				stream = v
			}
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				conn += f.Increment
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == mine {
				return stream, conn, pinged
			}
			if !f.IsAck() {
				pinged = true
			}
		}
	}
}

// TestKeepaliveDropsDeadPeers checks keepalive_time and keepalive_timeout: a peer that
// completes the HTTP/2 handshake but never answers pings is disconnected.
func TestKeepaliveDropsDeadPeers(t *testing.T) {
	e := start(t, "limits: {keepalive_time: 1s, keepalive_timeout: 100ms}\n")
	c, err := net.Dial("tcp", e.app.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(8 * time.Second)); err != nil {
		t.Fatal(err)
	}
	pings := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a peer that ignores pings was still connected after 8s")
		}
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			pings++ // never answered
		}
	}
	if pings == 0 {
		t.Error("the connection closed without a keepalive ping")
	}
}

// The largest result max_result_bytes allows (at most 8 MiB) fits the session log's
// limit for one event (16 MiB) with room to spare: it is logged and delivered, and its
// batch's other results with it. (A result over the event limit would fail only its
// call: the scheduler's TestExecuteResultTooLargeForTheLog.)
func TestLargestResultFitsTheLog(t *testing.T) {
	e := start(t, "limits: {max_result_bytes: 8MiB}\n")
	big := provider.NewTool("big", "Almost 8 MiB of text.", func(context.Context, provider.Call, noArgs) (string, error) {
		return strings.Repeat("x", 8<<20-64), nil
	})
	small := provider.NewTool("small", "A few bytes.", func(context.Context, provider.Call, noArgs) (string, error) {
		return "fine", nil
	})
	runProvider(t, e.app.Addr(), big, small)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-big", Calls: []*toolsdv1.ToolCall{
		call("c0", "small", `{}`), call("c1", "big", `{}`), call("c2", "small", `{}`),
	}}, batchOptions{callOpts: []grpc.CallOption{grpc.MaxCallRecvMsgSize(32 << 20)}})
	if got, want := resultCodes(out.results), []string{"", "", ""}; !slices.Equal(got, want) {
		t.Errorf("codes = %q, want %q", got, want)
	}
	if n := len(out.results[1].GetContent()); n != 8<<20-64 {
		t.Errorf("big result's content is %d bytes, want %d", n, 8<<20-64)
	}
	assertCompleteLog(t, e, "s-big", 3)
}

// TestLargestValueMeetsItsOutputSchema: a value as large as max_result_bytes allows (at
// most 8 MiB), sent with a short content, is checked against the tool's output schema
// and delivered; the output schema's check held values to a limit of its own, 4 MiB,
// and failed a valid 6 MiB one as malformed JSON (INVALID_RESULT).
func TestLargestValueMeetsItsOutputSchema(t *testing.T) {
	e := start(t, "limits: {max_result_bytes: 8MiB}\n")
	lines := make([]string, 6<<10) // a KiB each with its quotes and comma
	for i := range lines {
		lines[i] = strings.Repeat("x", 1<<10-3)
	}
	big := provider.NewTool("rows", "Six MiB of rows.", func(context.Context, provider.Call, noArgs) (provider.Result, error) {
		return provider.Result{Content: "6 MiB of rows", Value: lines}, nil
	}, provider.WithOutputSchema(`{"type":"array","items":{"type":"string"}}`))
	runProvider(t, e.app.Addr(), big)
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-rows", Calls: []*toolsdv1.ToolCall{call("c0", "rows", `{}`)}},
		batchOptions{callOpts: []grpc.CallOption{grpc.MaxCallRecvMsgSize(32 << 20)}})
	if got := resultCodes(out.results); !slices.Equal(got, []string{""}) {
		t.Fatalf("codes = %q (%s), want one success", got, out.results[0].GetContent())
	}
	if n, want := len(out.results[0].GetValueJson()), 6<<20+1; n != want { // [ and ], no last comma
		t.Errorf("value is %d bytes, want %d", n, want)
	}
	assertCompleteLog(t, e, "s-rows", 1)
}

// TestHeaderSizeLimit checks max_header_bytes: a request whose metadata is over it
// (here a huge authorization header, which authentication would otherwise hash) is
// refused by the transport, and the connection serves the next request.
func TestHeaderSizeLimit(t *testing.T) {
	e := start(t, "limits: {max_header_bytes: 16KiB}\n")
	huge := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+strings.Repeat("x", 64<<10))
	_, err := e.tools.Schemas(huge, &toolsdv1.SchemasRequest{})
	if err == nil || !strings.Contains(err.Error(), "header list size") {
		t.Errorf("Schemas() with 64 KiB of metadata = %v, want refused for its header list size", err)
	}
	if _, err := e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{}); err != nil {
		t.Errorf("Schemas() after the refusal = %v, want served", err)
	}
}

// TestResultOverTheLogsEventLimitIsObservedAsRecorded: an error result within
// max_result_bytes whose event is over the session log's limit (its message is in the
// event twice: as content, "Error: …", and as error.message) fails its call with
// RESULT_TOO_LARGE, and the call's log line (and so its metrics) says RESULT_TOO_LARGE
// too, as the client and the session log do, not the tool's own TOOL_ERROR.
func TestResultOverTheLogsEventLimitIsObservedAsRecorded(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	e := start(t, "limits: {max_result_bytes: 8MiB}\n", app.WithLogger(zap.New(core)))
	msg := strings.Repeat("x", 8<<20-len("Error: "))
	runProvider(t, e.app.Addr(), provider.NewTool("loud", "Fails at length.", func(context.Context, provider.Call, noArgs) (string, error) {
		return "", errors.New(msg)
	}))
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-loud", Calls: []*toolsdv1.ToolCall{call("c0", "loud", `{}`)}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"RESULT_TOO_LARGE"}) {
		t.Fatalf("codes = %q, want [RESULT_TOO_LARGE]", got)
	}
	assertCompleteLog(t, e, "s-loud", 1)
	for _, ev := range e.readSession(t, "s-loud") {
		if r := ev.GetToolResult(); r != nil && r.GetError().GetCode() != "RESULT_TOO_LARGE" {
			t.Errorf("logged result code = %q, want RESULT_TOO_LARGE", r.GetError().GetCode())
		}
	}
	code := loggedField(t, logs, "tool call", "call_id", "c0", "code")
	if code != "RESULT_TOO_LARGE" {
		t.Errorf("call log line's code = %v, want RESULT_TOO_LARGE, the code the client and the session log got", code)
	}
}

// TestRestrictionLimits: a scope holds at most 64 restrictions, each of whose allow and
// deny lists names at most 4096 tools; past either, Restrict is RESOURCE_EXHAUSTED
// (LIMIT_EXCEEDED), and lifting a restriction makes room again.
func TestRestrictionLimits(t *testing.T) {
	e := start(t, "")
	restrict := func(allow, deny []string) (string, error) {
		r, err := e.tools.Restrict(t.Context(), &toolsdv1.RestrictRequest{Scope: "team", Allow: allow, Deny: deny})
		return r.GetRestrictionId(), err
	}
	names := func(prefix string, n int) []string {
		list := make([]string, n)
		for i := range list {
			list[i] = fmt.Sprintf("%s%d", prefix, i)
		}
		return list
	}
	exhausted := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || reason(err) != "LIMIT_EXCEEDED" {
			t.Errorf("Restrict(%s) = %v, want RESOURCE_EXHAUSTED, LIMIT_EXCEEDED", what, err)
		}
	}
	_, err := restrict(nil, names("d", 4097))
	exhausted("4097 denied names", err)
	// Each list is bounded on its own: a restriction may name 4096 of each.
	first, err := restrict(names("a", 4096), names("d", 4096))
	if err != nil {
		t.Fatalf("Restrict(4096 allowed and 4096 denied names) = %v, want a restriction", err)
	}
	for i := 1; i < 64; i++ {
		if _, err := restrict(nil, []string{fmt.Sprintf("t%d", i)}); err != nil {
			t.Fatalf("Restrict(restriction %d of 64) = %v", i+1, err)
		}
	}
	_, err = restrict(nil, []string{"one-too-many"})
	exhausted("a 65th restriction", err)
	if _, err := e.tools.Unrestrict(t.Context(), &toolsdv1.UnrestrictRequest{RestrictionId: first}); err != nil {
		t.Fatal(err)
	}
	if _, err := restrict(nil, []string{"one-too-many"}); err != nil {
		t.Errorf("Restrict(after one of 64 was lifted) = %v, want a restriction", err)
	}
}
