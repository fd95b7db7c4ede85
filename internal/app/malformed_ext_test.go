package app_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
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
