package app_test

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/internal/config"
)

// handProvider speaks ProviderService by hand, so it can misbehave in ways the SDK never
// would.
type handProvider struct {
	stream toolsdv1.ProviderService_ConnectClient
	id     string // the provider id of its welcome
}

func connectHand(t *testing.T, e *env, tools ...string) *handProvider {
	t.Helper()
	p := helloHand(t, e.conn, "raw")
	defs := make([]*toolsdv1.ToolDefinition, len(tools))
	for i, name := range tools {
		defs[i] = &toolsdv1.ToolDefinition{Name: name, Description: "raw tool", ParametersJson: `{"type":"object"}`}
	}
	p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1, Tools: defs}}})
	for _, st := range p.recv(t).GetRegisterResult().GetTools() {
		if st.GetErrorCode() != "" {
			t.Fatalf("registering %s: %s %s", st.GetName(), st.GetErrorCode(), st.GetErrorMessage())
		}
	}
	return p
}

// helloHand opens a provider stream on conn and says hello as name.
func helloHand(t *testing.T, conn grpc.ClientConnInterface, name string) *handProvider {
	t.Helper()
	stream, err := toolsdv1.NewProviderServiceClient(conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := &handProvider{stream: stream}
	p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: name}}})
	m := p.recv(t)
	if m.GetWelcome() == nil {
		t.Fatalf("first message = %v, want welcome", m)
	}
	p.id = m.GetWelcome().GetProviderId()
	return p
}

// serve answers, until the stream ends, each execute request with the messages answer
// returns for it (a result, progress, anything), in order.
func (p *handProvider) serve(answer func(*toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest) {
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
			for _, out := range answer(ex) {
				if p.stream.Send(out) != nil {
					return
				}
			}
		}
	}()
}

// result is a provider's result message.
func result(r *toolsdv1.ExecuteResult) *toolsdv1.ProviderServiceConnectRequest {
	return &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Result{Result: r}}
}

func (p *handProvider) send(t *testing.T, m *toolsdv1.ProviderServiceConnectRequest) {
	t.Helper()
	if err := p.stream.Send(m); err != nil {
		t.Fatalf("provider Send() = %v", err)
	}
}

func (p *handProvider) recv(t *testing.T) *toolsdv1.ProviderServiceConnectResponse {
	t.Helper()
	m, err := p.stream.Recv()
	if err != nil {
		t.Fatalf("provider Recv() = %v", err)
	}
	return m
}

// TestMisbehavingProviderFailsOnlyItsCalls: invalid UTF-8, malformed JSON and results for
// ids toolsd never issued cost the provider one call each, never its stream.
func TestMisbehavingProviderFailsOnlyItsCalls(t *testing.T) {
	e := start(t, "")
	p := connectHand(t, e, "raw")
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		id := ex.GetRequestId()
		switch ex.GetCallId() {
		case "bad-utf8":
			// A stale id first: dropped and counted, never delivered.
			return []*toolsdv1.ProviderServiceConnectRequest{
				result(&toolsdv1.ExecuteResult{RequestId: id + 1000, Content: []byte("stale")}),
				result(&toolsdv1.ExecuteResult{RequestId: id, Content: []byte("caf\xe9")}),
			}
		case "bad-json":
			return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{RequestId: id, ValueJson: []byte(`{"a":1,"a":2}`)})}
		}
		return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{RequestId: id, ValueJson: []byte(`{"ok":true}`)})}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-raw", MaxParallel: 1, Calls: []*toolsdv1.ToolCall{
		call("bad-utf8", "raw", `{}`), call("bad-json", "raw", `{}`), call("fine", "raw", `{}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"INVALID_RESULT", "INVALID_RESULT", ""}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if got := out.results[2].GetContent(); got != `{"ok":true}` {
		t.Errorf("content after the bad results = %q, want the provider's stream to still work", got)
	}
	for _, r := range out.results {
		if r.GetContent() == "stale" {
			t.Error("a result for an id toolsd never issued was delivered")
		}
	}
	_, metrics := scrape(t, e.app.AdminAddr(), "/metrics")
	if !hasLine(metrics, "toolsd_broker_stale_results_total 1") {
		t.Error("the stale result was not counted")
	}
}

// badTextCodec sends protobuf with each "@@BAD@@" turned into as many bytes that are not
// UTF-8, as a provider in a language whose protobuf library does not check could.
type badTextCodec struct{}

func (badTextCodec) Name() string { return "proto" }

func (badTextCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(bytes.ReplaceAll(b, []byte("@@BAD@@"), []byte("\xff\xfe\xfd@@@@")))}, nil
}

func (badTextCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// truncatingCodec sends each message less its last three bytes: not protobuf.
type truncatingCodec struct{}

func (truncatingCodec) Name() string { return "proto" }

func (truncatingCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b[:max(0, len(b)-3)])}, nil
}

func (truncatingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// TestMessageNotProtobufIsInvalidArgument: a request that is not protobuf at all is
// refused as the client's error (INVALID_ARGUMENT, BAD_REQUEST), not gRPC's INTERNAL,
// which blames toolsd and is logged as its own error; nothing of a refused batch is
// logged, and the client's next, valid request runs.
func TestMessageNotProtobufIsInvalidArgument(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	cut := grpc.ForceCodecV2(truncatingCodec{})

	_, err := e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "team"}, cut)
	if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
		t.Errorf("Schemas(truncated) = %v, want InvalidArgument, BAD_REQUEST", err)
	}
	_, err = e.execute(t, &toolsdv1.Batch{SessionId: "s-cut", Calls: []*toolsdv1.ToolCall{call("c0", "fine", `{}`)}},
		batchOptions{callOpts: []grpc.CallOption{cut}})
	if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
		t.Errorf("ExecuteBatch(truncated batch) = %v, want InvalidArgument, BAD_REQUEST", err)
	}
	if events := e.readSession(t, "s-cut"); len(events) != 0 {
		t.Errorf("the refused batch logged %d events", len(events))
	}
	if got := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-cut", Calls: []*toolsdv1.ToolCall{call("c0", "fine", `{}`)}}, batchOptions{}); got.results[0].GetContent() != "ok" {
		t.Errorf("a valid batch after the refusal = %v", got.results[0])
	}
}

// TestProviderTextNotUTF8KeepsItsStream: a registration whose text is not UTF-8 (which
// protobuf refuses to decode) costs the provider the tool whose name is bad, never its
// stream: the text is repaired, the other tools register and their calls run.
func TestProviderTextNotUTF8KeepsItsStream(t *testing.T) {
	e := start(t, "")
	conn, err := grpc.NewClient("passthrough:///"+e.app.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(badTextCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	p := helloHand(t, conn, "raw @@BAD@@")
	p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1, Tools: []*toolsdv1.ToolDefinition{
		{Name: "described", Description: "caf@@BAD@@", ParametersJson: `{"type":"object"}`},
		{Name: "bad_@@BAD@@", Description: "named badly", ParametersJson: `{"type":"object"}`},
	}}}})
	var codes []string
	for _, st := range p.recv(t).GetRegisterResult().GetTools() {
		codes = append(codes, st.GetErrorCode())
	}
	if diff := cmp.Diff([]string{"", "INVALID_ARGUMENT"}, codes); diff != "" {
		t.Fatalf("registration codes (-want +got):\n%s", diff)
	}
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		return []*toolsdv1.ProviderServiceConnectRequest{result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Content: []byte("ran")})}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-bad-text", Calls: []*toolsdv1.ToolCall{call("c0", "described", `{}`)}}, batchOptions{})
	if got := out.results[0].GetContent(); got != "ran" {
		t.Errorf("call after the bad registration = %q (%s), want the provider's answer", got, out.results[0].GetError().GetCode())
	}
}

func hasLine(body, line string) bool {
	return slices.Contains(lines(body), line)
}

func lines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// TestProviderReregistersAfterToolsdRestarts: the SDK reconnects to a new toolsd on the
// same address and registers its tools again.
func TestProviderReregistersAfterToolsdRestarts(t *testing.T) {
	cfg, err := config.Parse([]byte(baseConfig), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	run := func(lis net.Listener) (stop func()) {
		a, err := app.New(cfg, app.WithLogger(zaptest.NewLogger(t)), app.WithListener(lis))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() = %v", err)
			}
		}
	}
	stop1 := run(lis)
	runProvider(t, addr, constTool("survivor", "still here"))
	stop1()

	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("re-listening on %s: %v", addr, err)
	}
	stop2 := run(lis2)
	defer stop2()
	client := toolsdv1.NewToolServiceClient(dial(t, addr))
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Schemas(t.Context(), &toolsdv1.SchemasRequest{})
		if err == nil && len(resp.GetTools()) == 1 && resp.GetTools()[0].GetName() == "survivor" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Schemas() on the new toolsd = %v, %v; want the provider's tool registered again", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestValueOnlyResultCountsDerivedContent: content toolsd derives from a value-only
// result counts against max_result_bytes, as the welcome's comment says: a value over
// half the limit fails, the same value with content of its own does not.
func TestValueOnlyResultCountsDerivedContent(t *testing.T) {
	e := start(t, "limits: {max_result_bytes: 64KiB}\n")
	p := connectHand(t, e, "raw")
	value := []byte(`"` + strings.Repeat("x", 40<<10) + `"`) // 40 KiB: under the limit on the wire
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		r := &toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), ValueJson: value}
		if ex.GetCallId() == "with-content" {
			r.Content = []byte("forty KiB of x")
		}
		return []*toolsdv1.ProviderServiceConnectRequest{result(r)}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-derived", Calls: []*toolsdv1.ToolCall{
		call("value-only", "raw", `{}`), call("with-content", "raw", `{}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"RESULT_TOO_LARGE", ""}, resultCodes(out.results)); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
}

// TestProviderRefusesArguments: a provider that says it could not read a call's
// arguments (invalid_arguments with is_error) fails the call INVALID_ARGUMENTS with its
// message, as toolsd's own validation does, in the stream and the log; an idempotent
// tool's call is not sent again. invalid_arguments without is_error is ignored: the
// success stands.
func TestProviderRefusesArguments(t *testing.T) {
	e := start(t, `
retry: {max_attempts: 5, budget: 20s, base_delay: 1ms, max_delay: 2ms}
policy:
  tools:
    raw: {idempotent: true}
`)
	p := connectHand(t, e, "raw")
	var sent atomic.Int32
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		sent.Add(1)
		r := &toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), InvalidArguments: true}
		if ex.GetCallId() == "refused" {
			r.IsError, r.ErrorMessage = true, []byte("at: not a date")
		} else {
			r.Content = []byte("done")
		}
		return []*toolsdv1.ProviderServiceConnectRequest{result(r)}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-refused-args", Calls: []*toolsdv1.ToolCall{
		call("refused", "raw", `{}`), call("unerred", "raw", `{}`),
	}}, batchOptions{})
	want := []*toolsdv1.ToolResult{
		{CallId: "refused", Content: "Error: at: not a date", IsError: true,
			Error: &toolsdv1.ToolError{Code: "INVALID_ARGUMENTS", Message: "at: not a date", Tool: "raw"}},
		{CallId: "unerred", Content: "done"},
	}
	ignore := protocmp.IgnoreFields(&toolsdv1.ToolResult{}, "index", "seq", "call_seq")
	if diff := cmp.Diff(want, out.results, protocmp.Transform(), ignore); diff != "" {
		t.Errorf("results mismatch (-want +got):\n%s", diff)
	}
	var logged []*toolsdv1.ToolResult
	for _, ev := range e.readSession(t, "s-refused-args") {
		if tr := ev.GetToolResult(); tr != nil {
			m := tr.GetMessage()
			logged = append(logged, &toolsdv1.ToolResult{CallId: m.GetCallId(), Content: m.GetContent(), IsError: m.GetIsError(), Error: tr.GetError()})
		}
	}
	if diff := cmp.Diff(want, logged, protocmp.Transform()); diff != "" {
		t.Errorf("logged results mismatch (-want +got):\n%s", diff)
	}
	if got := sent.Load(); got != 2 {
		t.Errorf("provider was sent %d calls, want 2 (none retried)", got)
	}
	if got := metricValue(t, e.app, "toolsd_pipeline_calls_total", "tool", "raw", "code", "INVALID_ARGUMENTS"); got != 1 {
		t.Errorf("calls_total{tool=raw,code=INVALID_ARGUMENTS} = %v, want 1", got)
	}
}
