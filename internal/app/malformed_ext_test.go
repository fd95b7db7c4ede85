package app_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
	"github.com/toolsd/toolsd/internal/app"
	"github.com/toolsd/toolsd/pkg/provider"
)

// maxRefusalBytes bounds a refusal of a request that carries a megabyte of text: what
// it echoes of the text is cut short.
const maxRefusalBytes = 4 << 10

// fieldViolations lists the BadRequest field paths of a status error.
func fieldViolations(err error) []string {
	var fields []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	return fields
}

// TestRegisterToolRefusalsAreBounded: a definition RegisterTool cannot map (a negative
// timeout or max_content_bytes) is refused with a status that quotes the tool's name
// cut short, however long the name is, as every other refusal of client text does.
func TestRegisterToolRefusalsAreBounded(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	long := strings.Repeat("n", 1<<20)
	for name, def := range map[string]*toolsdv1.ToolDefinition{
		"negative timeout":           {Name: long, ParametersJson: `{"type":"object"}`, Timeout: durationpb.New(-1)},
		"invalid timeout":            {Name: long, ParametersJson: `{"type":"object"}`, Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}},
		"negative max_content_bytes": {Name: long, ParametersJson: `{"type":"object"}`, MaxContentBytes: -1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: def})
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
				t.Fatalf("RegisterTool(%s) = %v, want InvalidArgument, reason BAD_REQUEST", name, err)
			}
			if n := proto.Size(st.Proto()); n > maxRefusalBytes {
				t.Errorf("the refusal is %d bytes, want the %d-byte name cut short", n, len(long))
			}
		})
	}
}

// TestRegisterToolRefusesUnknownModes: a mode that is not an ExecutionMode value (a
// newer client's, or garbage) is refused, on RegisterTool as on a provider's stream; it
// was registered as unspecified, so the tool ran in parallel whatever its author meant.
func TestRegisterToolRefusesUnknownModes(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	for _, mode := range []toolsdv1.ExecutionMode{3, 99, -1} {
		_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: &toolsdv1.ToolDefinition{
			Name: "moded", ParametersJson: `{"type":"object"}`, Mode: mode,
		}})
		if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
			t.Errorf("RegisterTool(mode %d) = %v, want InvalidArgument, reason BAD_REQUEST", mode, err)
		}
	}
	if got := e.schemaNames(t, ""); !slices.Equal(got, []string{"fine"}) {
		t.Errorf("Schemas() = %v, want only fine", got)
	}
}

// TestRegisterToolRefusalsNameTheField: a definition RegisterTool cannot map is refused
// with a BadRequest naming the field by its path in the request (tool.timeout, not
// tool), as ExecuteBatch names batch.calls[i].call_id.
func TestRegisterToolRefusalsNameTheField(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	for name, tc := range map[string]struct {
		def   *toolsdv1.ToolDefinition
		field string
	}{
		"negative timeout":           {def: &toolsdv1.ToolDefinition{Timeout: durationpb.New(-1)}, field: "tool.timeout"},
		"invalid timeout":            {def: &toolsdv1.ToolDefinition{Timeout: &durationpb.Duration{Nanos: 2e9}}, field: "tool.timeout"},
		"negative max_content_bytes": {def: &toolsdv1.ToolDefinition{MaxContentBytes: -5}, field: "tool.max_content_bytes"},
		"unknown mode":               {def: &toolsdv1.ToolDefinition{Mode: 7}, field: "tool.mode"},
		"no tool":                    {field: "tool"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.def != nil {
				tc.def.Name, tc.def.ParametersJson = "a", `{"type":"object"}`
			}
			_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: tc.def})
			if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || !slices.Equal(got, []string{tc.field}) {
				t.Errorf("RegisterTool(%s) = %v with field violations %v, want InvalidArgument naming %s", name, err, got, tc.field)
			}
		})
	}
}

// TestRegisterToolBadDefinitionIsBadRequest: every definition field RegisterTool refuses
// on its own (text not UTF-8, an unknown mode, a negative timeout or max_content_bytes)
// is INVALID_ARGUMENT, BAD_REQUEST with a BadRequest naming the field: the text when the
// request is decoded, the rest when the definition is mapped, both before the registry
// sees it. (The README listed these under a reason of their own, INVALID_DEFINITION,
// which no RPC sent.)
func TestRegisterToolBadDefinitionIsBadRequest(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	bad := grpc.ForceCodecV2(badTextCodec{})
	for name, tc := range map[string]struct {
		def   *toolsdv1.ToolDefinition
		field string
	}{
		"description not UTF-8": {def: &toolsdv1.ToolDefinition{Description: "caf@@BAD@@"}, field: "tool.description"},
		"title not UTF-8":       {def: &toolsdv1.ToolDefinition{Annotations: &toolsdv1.ToolAnnotations{Title: "T@@BAD@@"}}, field: "tool.annotations.title"},
		"condition not UTF-8":   {def: &toolsdv1.ToolDefinition{Condition: `"@@BAD@@" == ""`}, field: "tool.condition"},
		"unknown mode":          {def: &toolsdv1.ToolDefinition{Mode: 7}, field: "tool.mode"},
		"negative timeout":      {def: &toolsdv1.ToolDefinition{Timeout: durationpb.New(-1)}, field: "tool.timeout"},
		"negative max_content":  {def: &toolsdv1.ToolDefinition{MaxContentBytes: -1}, field: "tool.max_content_bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.def.Name, tc.def.ParametersJson = "a", `{"type":"object"}`
			_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: tc.def}, bad)
			if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(got, []string{tc.field}) {
				t.Errorf("RegisterTool(%s) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming %s", name, err, got, tc.field)
			}
		})
	}
	if got := e.schemaNames(t, ""); !slices.Equal(got, []string{"fine"}) {
		t.Errorf("Schemas() = %v, want only fine", got)
	}
}

// TestResolveToolSetSessionIDIsBounded: ResolveToolSet's optional session_id is held to
// the limit every other RPC holds a session id to, and refused before it reaches the
// session store; it was read whatever its size.
func TestResolveToolSetSessionIDIsBounded(t *testing.T) {
	e := start(t, "")
	_, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: strings.Repeat("s", 257)})
	if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(got, []string{"session_id"}) {
		t.Errorf("ResolveToolSet(257-byte session id) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming session_id", err, got)
	}
	for _, id := range []string{"", strings.Repeat("s", 256)} {
		if _, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{SessionId: id}); err != nil {
			t.Errorf("ResolveToolSet(%d-byte session id) = %v, want a tool set", len(id), err)
		}
	}
}

// TestApproveQuarantinedNeedsAName: ApproveQuarantined without a name is a malformed
// request (INVALID_ARGUMENT, BAD_REQUEST naming name), as UnregisterTool without one
// is; it was looked up and answered NOT_FOUND, as if some tool "" might be held back.
func TestApproveQuarantinedNeedsAName(t *testing.T) {
	e := start(t, "")
	_, err := e.tools.ApproveQuarantined(t.Context(), &toolsdv1.ApproveQuarantinedRequest{ContentHash: strings.Repeat("0", 64)})
	if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(got, []string{"name"}) {
		t.Errorf("ApproveQuarantined(no name) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming name", err, got)
	}
}

// TestBatchMustComeFirst: an ExecuteBatch stream whose first message is not a batch (a
// cancel, a message with no oneof set) or that half-closes before sending one ends with
// INVALID_ARGUMENT, BAD_REQUEST naming batch, and nothing is logged.
func TestBatchMustComeFirst(t *testing.T) {
	e := start(t, "")
	for name, first := range map[string]*toolsdv1.ExecuteBatchRequest{
		"cancel first": {Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "r"}}},
		"empty first":  {},
		"nothing sent": nil,
	} {
		t.Run(name, func(t *testing.T) {
			stream, err := e.tools.ExecuteBatch(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if first != nil {
				if err := stream.Send(first); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(got, []string{"batch"}) {
				t.Errorf("ExecuteBatch(%s) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming batch", name, err, got)
			}
		})
	}
}

// TestLaterMessagesThatMeanNothing: on a running batch, a second batch message, a
// message with no oneof set, an approval nobody asked for and a second cancel are
// ignored: the second batch's call neither runs nor is logged, the stream goes on, the
// first cancel cancels the batch, which settles as cancelled.
func TestLaterMessagesThatMeanNothing(t *testing.T) {
	e := start(t, "")
	started, stopped := make(chan string, 2), make(chan string, 2)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	send := func(s toolsdv1.ToolService_ExecuteBatchClient, m *toolsdv1.ExecuteBatchRequest) {
		if err := s.Send(m); err != nil {
			t.Errorf("Send(%v) = %v", m, err)
		}
	}
	cancel := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "stop"}}}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-later", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"first"}`)}},
		batchOptions{onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
			<-started
			send(s, batchReq(&toolsdv1.Batch{SessionId: "s-later", Calls: []*toolsdv1.ToolCall{call("c1", "block", `{"label":"second"}`)}}))
			send(s, &toolsdv1.ExecuteBatchRequest{})
			send(s, &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{Approved: true}}})
			send(s, cancel)
			send(s, cancel)
		}})
	if got := <-stopped; got != "first" {
		t.Errorf("stopped call %q, want first", got)
	}
	if !out.settled.GetCancelled() || len(out.results) != 1 || out.results[0].GetCallId() != "c0" {
		t.Errorf("batch = %d results, settled %v; want c0's result only, settled cancelled", len(out.results), out.settled)
	}
	var ids []string
	for _, ev := range e.readSession(t, "s-later") {
		if c := ev.GetToolCall(); c != nil {
			ids = append(ids, c.GetCallId())
		}
	}
	if !slices.Equal(ids, []string{"c0"}) {
		t.Errorf("logged calls %v, want only c0", ids)
	}
	select {
	case label := <-started:
		t.Errorf("call %q of a second batch message ran", label)
	default:
	}
}

// TestHookReplacementsThatAreNotJSON: a post-execute hook's replace_value_json that is
// not strict JSON (cut short, duplicate keys, a lone value after another) fails that
// call with INVALID_RESULT; the hook's stream and the batch's other calls go on.
func TestHookReplacementsThatAreNotJSON(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), echoTool())
	replacements := map[string]string{
		"cut":    `{"a":`,
		"dup":    `{"a":1,"a":2}`,
		"two":    `1 2`,
		"bare":   `nope`,
		"fine":   `{"a":1}`,
		"keep":   "",
		"spaces": "  ",
	}
	answerPostExecute(t, e, "replacer", func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), Verdict: toolsdv1.HookVerdict_HOOK_VERDICT_REPLACE,
			ReplaceValueJson: replacements[req.GetCall().GetCallId()]}
	})
	ids := slices.Sorted(maps.Keys(replacements))
	calls := make([]*toolsdv1.ToolCall, len(ids))
	for i, id := range ids {
		calls[i] = call(id, "echo", `{"text":"hi"}`)
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-replace", Calls: calls}, batchOptions{})
	want := map[string]string{"cut": "INVALID_RESULT", "dup": "INVALID_RESULT", "two": "INVALID_RESULT", "bare": "INVALID_RESULT",
		"fine": "", "keep": "", "spaces": "INVALID_RESULT"}
	for _, r := range out.results {
		if got := r.GetError().GetCode(); got != want[r.GetCallId()] {
			t.Errorf("call %s (replacement %q) = %q %q, want code %q", r.GetCallId(), replacements[r.GetCallId()], got, r.GetContent(), want[r.GetCallId()])
		}
	}
}

// TestProviderRegistrationsThatMeanNothing: on a provider's stream, register and
// unregister messages that carry nothing valid are answered, each tool on its own,
// with an error code and a message that quotes the provider's text cut short; a
// message with no tools is answered with its ref and no statuses. The stream goes on.
func TestProviderRegistrationsThatMeanNothing(t *testing.T) {
	e := start(t, "")
	p := helloHand(t, e.conn, "raw")
	long := strings.Repeat("x", 1<<20)
	obj := `{"type":"object"}`
	register := func(ref uint64, scope string, defs ...*toolsdv1.ToolDefinition) []*toolsdv1.ToolRegistrationStatus {
		t.Helper()
		p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
			Register: &toolsdv1.RegisterTools{Ref: ref, Scope: scope, Tools: defs}}})
		res := p.recv(t).GetRegisterResult()
		if res.GetRef() != ref {
			t.Fatalf("register result ref = %d, want %d", res.GetRef(), ref)
		}
		return res.GetTools()
	}
	unregister := func(ref uint64, scope string, names ...string) []*toolsdv1.ToolRegistrationStatus {
		t.Helper()
		p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Unregister{
			Unregister: &toolsdv1.UnregisterTools{Ref: ref, Scope: scope, Names: names}}})
		res := p.recv(t).GetRegisterResult()
		if res.GetRef() != ref {
			t.Fatalf("unregister result ref = %d, want %d", res.GetRef(), ref)
		}
		return res.GetTools()
	}
	check := func(what string, sts []*toolsdv1.ToolRegistrationStatus, want ...string) {
		t.Helper()
		var got []string
		for _, st := range sts {
			got = append(got, st.GetErrorCode())
			if st.GetErrorCode() != "" && st.GetErrorMessage() == "" {
				t.Errorf("%s: tool %.20q refused without a message", what, st.GetName())
			}
			if n := len(st.GetErrorMessage()); n > maxRefusalBytes {
				t.Errorf("%s: error message is %d bytes, want what it quotes cut short", what, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: codes %q, want %q", what, got, want)
		}
	}
	check("no tools", register(1, ""))
	check("empty definition", register(2, "", &toolsdv1.ToolDefinition{}), "INVALID_ARGUMENT")
	check("invalid scope", register(3, long, &toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj},
		&toolsdv1.ToolDefinition{Name: "b", ParametersJson: obj}), "INVALID_ARGUMENT", "INVALID_ARGUMENT")
	check("long name", register(4, "", &toolsdv1.ToolDefinition{Name: long, ParametersJson: obj}), "INVALID_ARGUMENT")
	check("unknown mode", register(5, "", &toolsdv1.ToolDefinition{Name: "m", ParametersJson: obj, Mode: 9}), "INVALID_ARGUMENT")
	check("malformed schema", register(6, "", &toolsdv1.ToolDefinition{Name: "s", ParametersJson: `{"type":`}), "INVALID_ARGUMENT")
	check("same name twice", register(7, "", &toolsdv1.ToolDefinition{Name: "twice", ParametersJson: obj},
		&toolsdv1.ToolDefinition{Name: "twice", ParametersJson: obj}), "", "ALREADY_EXISTS")
	check("no names", unregister(100, ""))
	check("unregister nothing", unregister(101, "", "", "never", long), "NOT_FOUND", "NOT_FOUND", "NOT_FOUND")
	check("unregister in an invalid scope", unregister(102, long, "twice"), "INVALID_ARGUMENT")
	if got := e.schemaNames(t, ""); !slices.Equal(got, []string{"twice"}) {
		t.Errorf("Schemas() = %v, want only twice", got)
	}
}

// TestUnaryRequestErrors walks the fields of every unary ToolService request (and the
// two session reads and WatchSchemas) with values that mean nothing: each is refused with its code and
// ErrorInfo reason, with a BadRequest naming the field where toolsd checks the field
// itself, and a megabyte of text in the request comes back cut short.
func TestUnaryRequestErrors(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	pid := p.ProviderID()
	long := strings.Repeat("x", 1<<20)
	obj := `{"type":"object"}`
	tools := e.tools
	regDef := func(d *toolsdv1.ToolDefinition) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := tools.RegisterTool(ctx, &toolsdv1.RegisterToolRequest{ProviderId: pid, Tool: d})
			return err
		}
	}
	for name, tc := range map[string]struct {
		rpc    func(context.Context) error
		code   codes.Code
		reason string
		field  string // the BadRequest field, if any
	}{
		"RegisterTool without provider_id": {rpc: func(ctx context.Context) error {
			_, err := tools.RegisterTool(ctx, &toolsdv1.RegisterToolRequest{Tool: &toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj}})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "provider_id"},
		"RegisterTool with a long provider_id": {rpc: func(ctx context.Context) error {
			_, err := tools.RegisterTool(ctx, &toolsdv1.RegisterToolRequest{ProviderId: long, Tool: &toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj}})
			return err
		}, code: codes.FailedPrecondition, reason: "PROVIDER_NOT_CONNECTED"},
		"RegisterTool in a long scope": {rpc: func(ctx context.Context) error {
			_, err := tools.RegisterTool(ctx, &toolsdv1.RegisterToolRequest{Scope: long, ProviderId: pid, Tool: &toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj}})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"RegisterTool without a name":       {rpc: regDef(&toolsdv1.ToolDefinition{ParametersJson: obj}), code: codes.InvalidArgument, reason: "INVALID_TOOL_NAME"},
		"RegisterTool with a long name":     {rpc: regDef(&toolsdv1.ToolDefinition{Name: long, ParametersJson: obj}), code: codes.InvalidArgument, reason: "INVALID_TOOL_NAME"},
		"RegisterTool of run_code":          {rpc: regDef(&toolsdv1.ToolDefinition{Name: "run_code", ParametersJson: obj}), code: codes.InvalidArgument, reason: "INVALID_TOOL_NAME"},
		"RegisterTool without parameters":   {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a"}), code: codes.InvalidArgument, reason: "INVALID_SCHEMA"},
		"RegisterTool with parameters cut":  {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: `{"type":`}), code: codes.InvalidArgument, reason: "INVALID_SCHEMA"},
		"RegisterTool with long parameters": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: "{" + long}), code: codes.ResourceExhausted, reason: "LIMIT_EXCEEDED"},
		"RegisterTool with a string root":   {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: `{"type":"string"}`}), code: codes.InvalidArgument, reason: "INVALID_SCHEMA"},
		"RegisterTool with an output schema cut": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj, OutputSchemaJson: `[`}),
			code: codes.InvalidArgument, reason: "INVALID_SCHEMA"},
		"RegisterTool with a long description": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj, Description: long}),
			code: codes.ResourceExhausted, reason: "LIMIT_EXCEEDED"},
		"RegisterTool with a long title": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj, Annotations: &toolsdv1.ToolAnnotations{Title: long}}),
			code: codes.ResourceExhausted, reason: "LIMIT_EXCEEDED"},
		"RegisterTool with a condition cut": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj, Condition: "1 +"}),
			code: codes.InvalidArgument, reason: "INVALID_CONDITION"},
		"RegisterTool with a condition that is no bool": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj, Condition: "1"}),
			code: codes.InvalidArgument, reason: "INVALID_CONDITION"},
		"RegisterTool with a long condition": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "a", ParametersJson: obj, Condition: long}),
			code: codes.ResourceExhausted, reason: "LIMIT_EXCEEDED"},
		"RegisterTool of a taken name": {rpc: regDef(&toolsdv1.ToolDefinition{Name: "fine", ParametersJson: obj}), code: codes.AlreadyExists, reason: "TOOL_EXISTS"},

		"UnregisterTool without a name": {rpc: func(ctx context.Context) error {
			_, err := tools.UnregisterTool(ctx, &toolsdv1.UnregisterToolRequest{})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "name"},
		"UnregisterTool of a long name": {rpc: func(ctx context.Context) error {
			_, err := tools.UnregisterTool(ctx, &toolsdv1.UnregisterToolRequest{Name: long})
			return err
		}, code: codes.NotFound, reason: "UNKNOWN_TOOL"},
		"UnregisterTool in a long scope": {rpc: func(ctx context.Context) error {
			_, err := tools.UnregisterTool(ctx, &toolsdv1.UnregisterToolRequest{Name: "fine", Scope: long})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"UnregisterTool for a long provider_id": {rpc: func(ctx context.Context) error {
			_, err := tools.UnregisterTool(ctx, &toolsdv1.UnregisterToolRequest{Name: "fine", ProviderId: long})
			return err
		}, code: codes.FailedPrecondition, reason: "PROVIDER_NOT_CONNECTED"},

		"Schemas of a long scope": {rpc: func(ctx context.Context) error {
			_, err := tools.Schemas(ctx, &toolsdv1.SchemasRequest{Scope: long})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"Schemas of a long tool_set_id": {rpc: func(ctx context.Context) error {
			_, err := tools.Schemas(ctx, &toolsdv1.SchemasRequest{ToolSetId: long})
			return err
		}, code: codes.NotFound, reason: "TOOL_SET_GONE"},

		"Restrict with no lists": {rpc: func(ctx context.Context) error {
			_, err := tools.Restrict(ctx, &toolsdv1.RestrictRequest{Scope: "team"})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_RESTRICTION"},
		"Restrict of the global scope": {rpc: func(ctx context.Context) error {
			_, err := tools.Restrict(ctx, &toolsdv1.RestrictRequest{Deny: []string{"fine"}})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_RESTRICTION"},
		"Restrict of a long scope": {rpc: func(ctx context.Context) error {
			_, err := tools.Restrict(ctx, &toolsdv1.RestrictRequest{Scope: long, Deny: []string{"fine"}})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"Restrict allowing a long name": {rpc: func(ctx context.Context) error {
			_, err := tools.Restrict(ctx, &toolsdv1.RestrictRequest{Scope: "team", Allow: []string{long}})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_TOOL_NAME"},
		"Restrict denying an empty name": {rpc: func(ctx context.Context) error {
			_, err := tools.Restrict(ctx, &toolsdv1.RestrictRequest{Scope: "team", Deny: []string{""}})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_TOOL_NAME"},
		"Restrict naming run_code": {rpc: func(ctx context.Context) error {
			_, err := tools.Restrict(ctx, &toolsdv1.RestrictRequest{Scope: "team", Deny: []string{"run_code"}})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_RESTRICTION"},

		"Unrestrict without an id": {rpc: func(ctx context.Context) error {
			_, err := tools.Unrestrict(ctx, &toolsdv1.UnrestrictRequest{})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "restriction_id"},
		"Unrestrict of a long id": {rpc: func(ctx context.Context) error {
			_, err := tools.Unrestrict(ctx, &toolsdv1.UnrestrictRequest{RestrictionId: long})
			return err
		}, code: codes.NotFound, reason: "UNKNOWN_RESTRICTION"},

		"ResolveToolSet in a long scope": {rpc: func(ctx context.Context) error {
			_, err := tools.ResolveToolSet(ctx, &toolsdv1.ResolveToolSetRequest{Scope: long})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"ResolveToolSet for a long model.provider": {rpc: func(ctx context.Context) error {
			_, err := tools.ResolveToolSet(ctx, &toolsdv1.ResolveToolSetRequest{Model: &toolsdv1.ModelSelection{Provider: long}})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "model.provider"},
		"ResolveToolSet for a long model.reasoning_effort": {rpc: func(ctx context.Context) error {
			_, err := tools.ResolveToolSet(ctx, &toolsdv1.ResolveToolSetRequest{Model: &toolsdv1.ModelSelection{ReasoningEffort: long}})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "model.reasoning_effort"},

		"ReleaseToolSet without an id": {rpc: func(ctx context.Context) error {
			_, err := tools.ReleaseToolSet(ctx, &toolsdv1.ReleaseToolSetRequest{})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "tool_set_id"},
		"ReleaseToolSet of a long id": {rpc: func(ctx context.Context) error {
			_, err := tools.ReleaseToolSet(ctx, &toolsdv1.ReleaseToolSetRequest{ToolSetId: long})
			return err
		}, code: codes.NotFound, reason: "TOOL_SET_GONE"},

		"ApproveQuarantined without a content_hash": {rpc: func(ctx context.Context) error {
			_, err := tools.ApproveQuarantined(ctx, &toolsdv1.ApproveQuarantinedRequest{Name: "fine"})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "content_hash"},
		"ApproveQuarantined in a long scope": {rpc: func(ctx context.Context) error {
			_, err := tools.ApproveQuarantined(ctx, &toolsdv1.ApproveQuarantinedRequest{Scope: long, Name: "fine", ContentHash: long})
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"ApproveQuarantined of a long name": {rpc: func(ctx context.Context) error {
			_, err := tools.ApproveQuarantined(ctx, &toolsdv1.ApproveQuarantinedRequest{Name: long, ContentHash: long})
			return err
		}, code: codes.NotFound, reason: "NOT_QUARANTINED"},

		"ReadSession without a session_id": {rpc: func(ctx context.Context) error {
			s, err := tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "session_id"},
		"ReadSession of a long session_id": {rpc: func(ctx context.Context) error {
			s, err := tools.ReadSession(ctx, &toolsdv1.ReadSessionRequest{SessionId: long})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "session_id"},
		"WatchSession without a session_id": {rpc: func(ctx context.Context) error {
			s, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "session_id"},
		"WatchSession of a long session_id": {rpc: func(ctx context.Context) error {
			s, err := tools.WatchSession(ctx, &toolsdv1.WatchSessionRequest{SessionId: long})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "session_id"},
		"DeleteSession without a session_id": {rpc: func(ctx context.Context) error {
			_, err := tools.DeleteSession(ctx, &toolsdv1.DeleteSessionRequest{})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "session_id"},
		"DeleteSession of a long session_id": {rpc: func(ctx context.Context) error {
			_, err := tools.DeleteSession(ctx, &toolsdv1.DeleteSessionRequest{SessionId: long})
			return err
		}, code: codes.InvalidArgument, reason: "BAD_REQUEST", field: "session_id"},
		"WatchSchemas of a long scope": {rpc: func(ctx context.Context) error {
			s, err := tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{Scope: long})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, code: codes.InvalidArgument, reason: "INVALID_SCOPE"},
		"WatchSchemas of a long tool_set_id": {rpc: func(ctx context.Context) error {
			s, err := tools.WatchSchemas(ctx, &toolsdv1.WatchSchemasRequest{ToolSetId: long})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, code: codes.NotFound, reason: "TOOL_SET_GONE"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.rpc(t.Context())
			st := status.Convert(err)
			if st.Code() != tc.code || reason(err) != tc.reason {
				t.Fatalf("%s = %v, want %v, reason %s", name, err, tc.code, tc.reason)
			}
			var want []string
			if tc.field != "" {
				want = []string{tc.field}
			}
			if got := fieldViolations(err); !slices.Equal(got, want) {
				t.Errorf("%s field violations = %v, want %v", name, got, want)
			}
			if n := proto.Size(st.Proto()); n > maxRefusalBytes {
				t.Errorf("%s refusal is %d bytes, want what it quotes cut short", name, n)
			}
		})
	}
	if got := e.schemaNames(t, ""); !slices.Equal(got, []string{"fine"}) {
		t.Errorf("Schemas() after the refusals = %v, want only fine", got)
	}
}

// TestBatchFieldsThatMeanNothing: a batch in a megabyte-long scope or naming a
// megabyte-long tool set is refused with a status that quotes it cut short; in a batch
// that runs, a call naming no tool or a megabyte-long one is UNKNOWN_TOOL, each result
// bounded, while its siblings run, one with no arguments among them (taken as {}); a
// max_parallel of 2^32-1 means the server's maximum.
func TestBatchFieldsThatMeanNothing(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	long := strings.Repeat("x", 1<<20)
	ok := call("c", "fine", `{}`)
	for name, b := range map[string]*toolsdv1.Batch{
		"long scope":       {SessionId: "s-refused", Scope: long, Calls: []*toolsdv1.ToolCall{ok}},
		"long tool_set_id": {SessionId: "s-refused", ToolSetId: long, Calls: []*toolsdv1.ToolCall{ok}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.execute(t, b, batchOptions{})
			st := status.Convert(err)
			if c := st.Code(); c != codes.InvalidArgument && c != codes.NotFound {
				t.Fatalf("ExecuteBatch(%s) = %v, want InvalidArgument or NotFound", name, err)
			}
			if n := proto.Size(st.Proto()); n > maxRefusalBytes {
				t.Errorf("the refusal is %d bytes, want what it quotes cut short", n)
			}
		})
	}
	if events := e.readSession(t, "s-refused"); len(events) != 0 {
		t.Errorf("refused batches logged %d events, want none", len(events))
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-calls", MaxParallel: ^uint32(0), Calls: []*toolsdv1.ToolCall{
		call("no-name", "", `{}`), call("long-name", long, `{}`), call("no-args", "fine", ``), call("fine", "fine", `{}`),
	}}, batchOptions{})
	if diff := cmp.Diff([]string{"UNKNOWN_TOOL", "UNKNOWN_TOOL", "", ""}, resultCodes(out.results)); diff != "" {
		t.Errorf("result codes (-want +got):\n%s", diff)
	}
	for _, r := range out.results {
		if n := proto.Size(r); n > maxRefusalBytes {
			t.Errorf("result of %s is %d bytes, want what it quotes cut short", r.GetCallId(), n)
		}
	}
}

// TestEmptyHookContextsAreDropped: a post-execute hook's add_context entries with no
// text (empty or only white space) are dropped: an agent loop would otherwise append
// an empty user message to the model's next request, which model APIs refuse. The
// others are delivered and logged as before.
func TestEmptyHookContextsAreDropped(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), echoTool())
	answerPostExecute(t, e, "contexts", func(req *toolsdv1.HookRequest) *toolsdv1.HookDecision {
		return &toolsdv1.HookDecision{RequestId: req.GetRequestId(), AddContext: []string{"", "kept", " \n\t", "also kept"}}
	})
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-contexts", Calls: []*toolsdv1.ToolCall{call("c", "echo", `{"text":"hi"}`)}}, batchOptions{})
	if got := out.settled.GetAdditionalContexts(); !slices.Equal(got, []string{"kept", "also kept"}) {
		t.Errorf("settled.additional_contexts = %q, want [kept, also kept]", got)
	}
	var logged []string
	for _, ev := range e.readSession(t, "s-contexts") {
		if m := ev.GetUserMessage(); m != nil {
			logged = append(logged, m.GetContent())
		}
	}
	if !slices.Equal(logged, []string{"kept", "also kept"}) {
		t.Errorf("logged user messages %q, want [kept, also kept]", logged)
	}
}

// TestToolSetIDsThatReferToNothingHere: a tool set named with another scope than it was
// resolved for is INVALID_ARGUMENT naming the field (tool_set_id, batch.tool_set_id);
// once released, the id is NOT_FOUND, TOOL_SET_GONE, to Schemas, ExecuteBatch and a
// second ReleaseToolSet.
func TestToolSetIDsThatReferToNothingHere(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	set, err := e.tools.ResolveToolSet(t.Context(), &toolsdv1.ResolveToolSetRequest{Scope: "team"})
	if err != nil {
		t.Fatal(err)
	}
	id := set.GetToolSetId()
	batch := &toolsdv1.Batch{SessionId: "s-sets", ToolSetId: id, Calls: []*toolsdv1.ToolCall{call("c", "fine", `{}`)}}
	_, schemasErr := e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{ToolSetId: id})
	_, batchErr := e.execute(t, batch, batchOptions{})
	for rpc, tc := range map[string]struct {
		err   error
		field string
	}{"Schemas": {schemasErr, "tool_set_id"}, "ExecuteBatch": {batchErr, "batch.tool_set_id"}} {
		if got := fieldViolations(tc.err); status.Code(tc.err) != codes.InvalidArgument || reason(tc.err) != "BAD_REQUEST" || !slices.Equal(got, []string{tc.field}) {
			t.Errorf("%s(a set of another scope) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming %s", rpc, tc.err, got, tc.field)
		}
	}
	if _, err := e.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: id}); err != nil {
		t.Fatalf("ReleaseToolSet() = %v", err)
	}
	batch.Scope = "team"
	_, schemasErr = e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "team", ToolSetId: id})
	_, batchErr = e.execute(t, batch, batchOptions{})
	_, releaseErr := e.tools.ReleaseToolSet(t.Context(), &toolsdv1.ReleaseToolSetRequest{ToolSetId: id})
	for rpc, err := range map[string]error{"Schemas": schemasErr, "ExecuteBatch": batchErr, "ReleaseToolSet": releaseErr} {
		if status.Code(err) != codes.NotFound || reason(err) != "TOOL_SET_GONE" {
			t.Errorf("%s(a released set) = %v, want NotFound, TOOL_SET_GONE", rpc, err)
		}
	}
	if events := e.readSession(t, "s-sets"); len(events) != 0 {
		t.Errorf("refused batches logged %d events, want none", len(events))
	}
}

// TestProviderResultFieldsThatMeanNothing: a provider's result whose metadata is not
// strict UTF-8 JSON, or whose value is not UTF-8, fails that call with INVALID_RESULT
// and logs no metadata; an error result without a message reads "the tool failed
// without a message", and its bad metadata is dropped; cancelled on a call toolsd did
// not cancel is ignored. Every call's result is logged, and the stream goes on.
func TestProviderResultFieldsThatMeanNothing(t *testing.T) {
	e := start(t, "")
	p := connectHand(t, e, "raw")
	answers := map[string]struct {
		res     *toolsdv1.ExecuteResult
		code    string
		content string
	}{
		"meta-cut":       {res: &toolsdv1.ExecuteResult{Content: []byte("x"), MetaJson: []byte(`{`)}, code: "INVALID_RESULT"},
		"meta-not-utf8":  {res: &toolsdv1.ExecuteResult{Content: []byte("x"), MetaJson: []byte("\"\xff\"")}, code: "INVALID_RESULT"},
		"value-not-utf8": {res: &toolsdv1.ExecuteResult{ValueJson: []byte("\"\xff\"")}, code: "INVALID_RESULT"},
		"error-no-message": {res: &toolsdv1.ExecuteResult{IsError: true}, code: "TOOL_ERROR",
			content: "Error: the tool failed without a message"},
		"error-meta-cut":    {res: &toolsdv1.ExecuteResult{IsError: true, ErrorMessage: []byte("boom"), MetaJson: []byte(`{`)}, code: "TOOL_ERROR", content: "Error: boom"},
		"cancelled-unasked": {res: &toolsdv1.ExecuteResult{Cancelled: true, Content: []byte("done")}, content: "done"},
	}
	p.serve(func(ex *toolsdv1.ExecuteRequest) []*toolsdv1.ProviderServiceConnectRequest {
		r := proto.Clone(answers[ex.GetCallId()].res).(*toolsdv1.ExecuteResult)
		r.RequestId = ex.GetRequestId()
		return []*toolsdv1.ProviderServiceConnectRequest{result(r)}
	})
	ids := slices.Sorted(maps.Keys(answers))
	calls := make([]*toolsdv1.ToolCall, 0, len(ids))
	for _, id := range ids {
		calls = append(calls, call(id, "raw", `{}`))
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-results", Calls: calls}, batchOptions{})
	for _, r := range out.results {
		want := answers[r.GetCallId()]
		if r.GetError().GetCode() != want.code || want.content != "" && r.GetContent() != want.content {
			t.Errorf("call %s = %q %q, want code %q content %q", r.GetCallId(), r.GetError().GetCode(), r.GetContent(), want.code, want.content)
		}
		if r.GetMetaJson() != "" {
			t.Errorf("call %s delivered metadata %q, want none", r.GetCallId(), r.GetMetaJson())
		}
	}
	results := 0
	for _, ev := range e.readSession(t, "s-results") {
		if tr := ev.GetToolResult(); tr != nil {
			results++
			if tr.GetMetaJson() != "" {
				t.Errorf("call %s logged metadata %q, want none", tr.GetMessage().GetCallId(), tr.GetMetaJson())
			}
		}
	}
	if results != len(ids) {
		t.Errorf("logged %d results, want %d", results, len(ids))
	}
}

// TestToolSetOfAnotherSession: a batch naming a tool set resolved for another session
// is INVALID_ARGUMENT naming batch.tool_set_id, and nothing runs or is logged: the
// set's conditions were judged on the other session's history (here, query_db is
// admitted only where get_db_schema succeeded).
func TestToolSetOfAnotherSession(t *testing.T) {
	e := start(t, "")
	set := e.schemaKnownSet(t, "s-schema-known")
	_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-elsewhere", ToolSetId: set.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c1", "query_db", `{}`),
	}}, batchOptions{})
	if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(got, []string{"batch.tool_set_id"}) {
		t.Errorf("ExecuteBatch(another session's set) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming batch.tool_set_id", err, got)
	}
	if events := e.readSession(t, "s-elsewhere"); len(events) != 0 {
		t.Errorf("the refused batch logged %d events, want none", len(events))
	}
}

// TestSessionlessToolSetOfHistoryConditions: a set resolved without a session_id
// whose conditions read the session's history judged an empty history, so a batch
// naming it is INVALID_ARGUMENT naming batch.tool_set_id, and nothing runs or is
// logged. Here send_email is one-shot (`!session.called("send_email")`): a set
// resolved without a session admits it, and would run it again in a session where it
// was already called.
func TestSessionlessToolSetOfHistoryConditions(t *testing.T) {
	e := start(t, "")
	var sent atomic.Int32
	runProvider(t, e.app.Addr(), provider.NewTool("send_email", "Sends the email, once.", func(context.Context, provider.Call, noArgs) (string, error) {
		sent.Add(1)
		return "sent", nil
	}, provider.WithCondition(`!session.called("send_email")`)))
	first := e.resolve(t, "s-mail", 1, nil)
	e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-mail", Turn: 1, Step: 1, ToolSetId: first.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c1", "send_email", `{}`),
	}}, batchOptions{})
	if got := names(e.resolve(t, "s-mail", 2, nil).GetTools()); slices.Contains(got, "send_email") {
		t.Fatalf("the session's step 2 tool set = %v, want no send_email", got)
	}
	logged := len(e.readSession(t, "s-mail"))

	sessionless := e.resolve(t, "", 2, nil)
	if !slices.Contains(names(sessionless.GetTools()), "send_email") {
		t.Fatalf("tool set resolved without a session = %v, want send_email admitted", names(sessionless.GetTools()))
	}
	_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-mail", Turn: 1, Step: 2, ToolSetId: sessionless.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c2", "send_email", `{}`),
	}}, batchOptions{})
	if got := fieldViolations(err); status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" ||
		!slices.Equal(got, []string{"batch.tool_set_id"}) || !strings.Contains(err.Error(), "resolved without a session_id") {
		t.Errorf("ExecuteBatch(set resolved without a session) = %v with field violations %v, want InvalidArgument, BAD_REQUEST naming batch.tool_set_id, saying it was resolved without a session_id", err, got)
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("send_email ran %d times, want once", n)
	}
	if n := len(e.readSession(t, "s-mail")) - logged; n != 0 {
		t.Errorf("the refused batch logged %d events, want none", n)
	}
}

// TestSessionlessToolSetWithoutHistoryConditions: a set resolved without a session_id
// whose conditions do not read the session's history serves any session's batch, its
// admitted conditional tools included.
func TestSessionlessToolSetWithoutHistoryConditions(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(),
		constTool("get_db_schema", "tables: users"),
		constTool("web_search", "results", provider.WithCondition(`model.provider == "openai" && step >= 1`)),
	)
	set := e.resolve(t, "", 1, &toolsdv1.ModelSelection{Provider: "openai"})
	if diff := cmp.Diff([]string{"get_db_schema", "web_search"}, names(set.GetTools())); diff != "" {
		t.Fatalf("tool set resolved without a session (-want +got):\n%s", diff)
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-anywhere", Turn: 1, Step: 1, ToolSetId: set.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c1", "web_search", `{}`), call("c2", "get_db_schema", `{}`),
	}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{"", ""}) {
		t.Errorf("batch with a set resolved without a session = %v, want success", got)
	}
}

// TestToolSetOfAnotherStep: a step resolves its own tool set. A batch naming a set
// resolved for another turn or step is FAILED_PRECONDITION, reason
// TOOL_SET_STEP_MISMATCH, saying which turn and step the set was resolved for, and
// nothing runs or is logged (here first_step is admitted only at step 1, so a set
// reused for step 2 would run a tool that step's own resolution does not offer).
// The batch of the step the set was resolved for runs with it.
func TestToolSetOfAnotherStep(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("first_step", "ok", provider.WithCondition(`step == 1`)))
	set := e.resolve(t, "s-steps", 1, nil) // turn 1, step 1
	if !slices.Contains(names(set.GetTools()), "first_step") {
		t.Fatalf("tool set = %v, want first_step admitted", names(set.GetTools()))
	}
	for name, tc := range map[string]struct{ turn, step uint64 }{
		"a later step":         {1, 2},
		"the same step number": {2, 1},
		"no turn or step":      {0, 0},
	} {
		_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-steps", Turn: tc.turn, Step: tc.step, ToolSetId: set.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
			call("c-"+name, "first_step", `{}`),
		}}, batchOptions{})
		if status.Code(err) != codes.FailedPrecondition || reason(err) != "TOOL_SET_STEP_MISMATCH" || !strings.Contains(err.Error(), "resolved for turn 1, step 1") {
			t.Errorf("ExecuteBatch(%s: turn %d, step %d) = %v, want FailedPrecondition, TOOL_SET_STEP_MISMATCH saying turn 1, step 1", name, tc.turn, tc.step, err)
		}
	}
	if events := e.readSession(t, "s-steps"); len(events) != 0 {
		t.Errorf("the refused batches logged %d events, want none", len(events))
	}
	out := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-steps", Turn: 1, Step: 1, ToolSetId: set.GetToolSetId(), Calls: []*toolsdv1.ToolCall{
		call("c-own", "first_step", `{}`),
	}}, batchOptions{})
	if got := resultCodes(out.results); !slices.Equal(got, []string{""}) {
		t.Errorf("the batch of the set's own step = %v, want success", got)
	}
}

// answerPostExecute connects a hook named name, subscribed to every call after
// execution, that answers each request with decide's decision, until its stream ends.
func answerPostExecute(t *testing.T, e *env, name string, decide func(*toolsdv1.HookRequest) *toolsdv1.HookDecision) {
	t.Helper()
	answerHook(t, e.conn, &toolsdv1.HookHello{
		Name: name, Subscriptions: []*toolsdv1.HookSubscription{{Stage: toolsdv1.HookStage_HOOK_STAGE_POST_EXECUTE}},
	}, decide)
}

// answerHook connects a hook with hello over conn and, once it is welcomed, answers
// each request with decide's decision, until its stream ends.
func answerHook(t *testing.T, conn grpc.ClientConnInterface, hello *toolsdv1.HookHello, decide func(*toolsdv1.HookRequest) *toolsdv1.HookDecision) {
	t.Helper()
	stream, err := toolsdv1.NewHookServiceClient(conn).Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("hook hello answered %v, %v; want a welcome", m, err)
	}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			d := decide(m.GetRequest())
			if stream.Send(&toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: d}}) != nil {
				return
			}
		}
	}()
}

// TestClientTextNotUTF8IsInvalidArgument: a request whose text is not UTF-8 (which
// protobuf refuses to decode, and gRPC alone would answer INTERNAL) is refused as the
// client's error, naming its first bad field, and nothing of it is logged or run.
func TestClientTextNotUTF8IsInvalidArgument(t *testing.T) {
	e := start(t, "")
	runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	bad := grpc.ForceCodecV2(badTextCodec{})

	_, err := e.tools.Schemas(t.Context(), &toolsdv1.SchemasRequest{Scope: "team-@@BAD@@"}, bad)
	if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(fieldViolations(err), []string{"scope"}) {
		t.Errorf("Schemas(scope not UTF-8) = %v, want InvalidArgument, BAD_REQUEST, field scope", err)
	}
	// The new RPCs answer as those they follow: WatchSchemas as Schemas, DeleteSession as
	// ReadSession.
	w, err := e.tools.WatchSchemas(t.Context(), &toolsdv1.WatchSchemasRequest{Scope: "team-@@BAD@@"}, bad)
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(fieldViolations(err), []string{"scope"}) {
		t.Errorf("WatchSchemas(scope not UTF-8) = %v, want InvalidArgument, BAD_REQUEST, field scope", err)
	}
	_, err = e.tools.DeleteSession(t.Context(), &toolsdv1.DeleteSessionRequest{SessionId: "s-@@BAD@@"}, bad)
	if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(fieldViolations(err), []string{"session_id"}) {
		t.Errorf("DeleteSession(session_id not UTF-8) = %v, want InvalidArgument, BAD_REQUEST, field session_id", err)
	}

	out, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-text", Calls: []*toolsdv1.ToolCall{
		call("c0", "fine", `{}`), call("c1-@@BAD@@", "fine", `{}`),
	}}, batchOptions{callOpts: []grpc.CallOption{bad}})
	if status.Code(err) != codes.InvalidArgument || !slices.Equal(fieldViolations(err), []string{"batch.calls[1].call_id"}) {
		t.Errorf("ExecuteBatch(call id not UTF-8) = %v, want InvalidArgument naming batch.calls[1].call_id", err)
	}
	if out != nil && (out.accepted != nil || len(out.results) > 0) {
		t.Errorf("ExecuteBatch(call id not UTF-8) answered %v before its refusal", out.order)
	}
	if events := e.readSession(t, "s-text"); len(events) != 0 {
		t.Errorf("the refused batch logged %d events", len(events))
	}
	// The same client's next, valid batch runs: only the bad message was refused.
	if got := e.mustExecute(t, &toolsdv1.Batch{SessionId: "s-text", Calls: []*toolsdv1.ToolCall{call("c0", "fine", `{}`)}}, batchOptions{callOpts: []grpc.CallOption{bad}}); got.results[0].GetContent() != "ok" {
		t.Errorf("a valid batch after the refusal = %v", got.results[0])
	}
}

// TestClientTextNotUTF8LaterMessages: a batch stream's later message (an approval or a
// cancel) whose text is not UTF-8 ends the stream with INVALID_ARGUMENT naming its
// field, as the batch itself would be, and as gRPC ends a stream on a message it cannot
// decode; the batch is cancelled and its log completed. (Left to the handler, the
// refusal only cancelled the batch, whose stream then ended OK: the client never
// learned that its message was refused.)
func TestClientTextNotUTF8LaterMessages(t *testing.T) {
	e := start(t, "")
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	for name, tc := range map[string]struct {
		m     *toolsdv1.ExecuteBatchRequest
		field string
	}{
		"approval": {&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Approval{Approval: &toolsdv1.ApprovalDecision{CallId: "c", Reason: "@@BAD@@"}}}, "approval.reason"},
		"cancel":   {&toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "@@BAD@@"}}}, "cancel.reason"},
	} {
		t.Run(name, func(t *testing.T) {
			session := "s-later-text-" + name
			out, err := e.execute(t, &toolsdv1.Batch{SessionId: session, Calls: []*toolsdv1.ToolCall{call("c", "block", `{"label":"x"}`)}}, batchOptions{
				callOpts: []grpc.CallOption{grpc.ForceCodecV2(badTextCodec{})},
				onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
					<-started
					if err := s.Send(tc.m); err != nil {
						t.Errorf("Send(%s) = %v", name, err)
					}
				},
			})
			if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" || !slices.Equal(fieldViolations(err), []string{tc.field}) {
				t.Errorf("ExecuteBatch() = %v after %v, want InvalidArgument, BAD_REQUEST, field %s", err, out.order, tc.field)
			}
			<-stopped
			waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, session)) == 2 })
			assertCompleteLog(t, e, session, 1)
		})
	}
}

// TestClientTextNotUTF8LaterMessageIsTheCancelReason: a later message whose text is not
// UTF-8 cancels the batch with its own cause, so the provider's cancel says why (as for
// a message over max_request_bytes), not "context canceled": the cause is recorded
// before the refusal ends the stream, which ends the batch's parent context.
func TestClientTextNotUTF8LaterMessageIsTheCancelReason(t *testing.T) {
	e := start(t, "limits: {accepted_hold: 0s}\n")
	p := connectHand(t, e, "raw")
	stream, err := e.tools.ExecuteBatch(t.Context(), grpc.ForceCodecV2(badTextCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-later-text-reason", Calls: []*toolsdv1.ToolCall{call("c", "raw", `{}`)}})); err != nil {
		t.Fatal(err)
	}
	ex := p.recv(t).GetExecute()
	if ex == nil {
		t.Fatal("provider got no execute")
	}
	bad := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "@@BAD@@"}}}
	if err := stream.Send(bad); err != nil {
		t.Fatal(err)
	}
	c := p.recv(t).GetCancel()
	if c.GetRequestId() != ex.GetRequestId() || !strings.Contains(c.GetReason(), "cancel.reason") || !strings.Contains(c.GetReason(), "UTF-8") {
		t.Errorf("provider's cancel = %v, want request %d cancelled for cancel.reason not being UTF-8", c, ex.GetRequestId())
	}
	p.send(t, result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Cancelled: true}))
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.InvalidArgument || !slices.Equal(fieldViolations(err), []string{"cancel.reason"}) {
		t.Errorf("ExecuteBatch() = %v, want InvalidArgument naming cancel.reason", err)
	}
	waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, "s-later-text-reason")) == 2 })
}

// TestClientMarkedLaterMessageCancelsWithABoundedReason: a client may mark a message as
// not UTF-8 itself (the codec's marker is an unknown field), with a "path" of any size
// the request allows. The refusal is the batch's cancel cause, which reaches the
// provider as its calls' cancel reason: that reason must stay a short line, not the
// client's megabyte (one per call of the batch, to providers other tenants share).
func TestClientMarkedLaterMessageCancelsWithABoundedReason(t *testing.T) {
	e := start(t, "limits: {accepted_hold: 0s}\n")
	p := connectHand(t, e, "raw")
	stream, err := e.tools.ExecuteBatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(batchReq(&toolsdv1.Batch{SessionId: "s-marked-by-client", Calls: []*toolsdv1.ToolCall{call("c", "raw", `{}`)}})); err != nil {
		t.Fatal(err)
	}
	ex := p.recv(t).GetExecute()
	if ex == nil {
		t.Fatal("provider got no execute")
	}
	marked := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "r"}}}
	path := strings.Repeat("x", 1<<20)
	marked.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), path))
	if err := stream.Send(marked); err != nil {
		t.Fatal(err)
	}
	c := p.recv(t).GetCancel()
	if c.GetRequestId() != ex.GetRequestId() || len(c.GetReason()) > 1<<10 {
		t.Errorf("provider's cancel = request %d with a reason of %d bytes, want request %d with at most 1 KiB",
			c.GetRequestId(), len(c.GetReason()), ex.GetRequestId())
	}
	p.send(t, result(&toolsdv1.ExecuteResult{RequestId: ex.GetRequestId(), Cancelled: true}))
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.InvalidArgument || len(status.Convert(err).Message()) > 1<<10 {
		t.Errorf("ExecuteBatch() = %s with a message of %d bytes, want InvalidArgument with at most 1 KiB",
			status.Code(err), len(status.Convert(err).Message()))
	}
	waitFor(t, "the log to complete", func() bool { return len(e.readSession(t, "s-marked-by-client")) == 2 })
}

// TestClientTextNotUTF8LaterMessageIsTheRPCsCode: the RPC's log line (and so its
// metrics) carries the status the client got for a later message whose text is not
// UTF-8, as for one over max_request_bytes, not Canceled.
func TestClientTextNotUTF8LaterMessageIsTheRPCsCode(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	e := start(t, "", app.WithLogger(zap.New(core)))
	started, stopped := make(chan string, 1), make(chan string, 1)
	runProvider(t, e.app.Addr(), blockTool("block", started, stopped))
	bad := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Cancel{Cancel: &toolsdv1.CancelBatch{Reason: "@@BAD@@"}}}
	_, err := e.execute(t, &toolsdv1.Batch{SessionId: "s-later-text-code", Calls: []*toolsdv1.ToolCall{call("c0", "block", `{"label":"x"}`)}}, batchOptions{
		callOpts: []grpc.CallOption{grpc.ForceCodecV2(badTextCodec{})},
		onAccepted: func(s toolsdv1.ToolService_ExecuteBatchClient) {
			<-started
			if err := s.Send(bad); err != nil {
				t.Errorf("Send(bad cancel) = %v", err)
			}
		},
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("ExecuteBatch() = %v, want InvalidArgument", err)
	}
	<-stopped
	code := loggedField(t, logs, "finished call", "grpc.method", "ExecuteBatch", "grpc.code")
	if code != "InvalidArgument" {
		t.Errorf("logged grpc.code = %v, want InvalidArgument, the status the client got", code)
	}
}
