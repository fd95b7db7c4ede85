package server

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// corrupt marshals m and turns each "@@BAD@@" in it into as many bytes that are not
// UTF-8 (protobuf will not marshal them itself).
func corrupt(t *testing.T, m proto.Message) mem.BufferSlice {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return mem.BufferSlice{mem.SliceBuffer(bytes.ReplaceAll(b, []byte("@@BAD@@"), []byte("\xff\xfe\xfd@@@@")))}
}

func TestLenientCodecRepairsProviderText(t *testing.T) {
	c := newLenientCodec()
	in := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{
		Ref: 7,
		Tools: []*toolsdv1.ToolDefinition{
			{Name: "fine", Description: "text @@BAD@@ here", ParametersJson: `{"type":"object"}`},
			{Name: "bad_@@BAD@@", Description: "ok"},
		},
	}}}
	var got toolsdv1.ProviderServiceConnectRequest
	if err := c.Unmarshal(corrupt(t, in), &got); err != nil {
		t.Fatalf("Unmarshal() = %v, want the text repaired", err)
	}
	tools := got.GetRegister().GetTools()
	if got.GetRegister().GetRef() != 7 || len(tools) != 2 {
		t.Fatalf("decoded %v, want ref 7 and both tools", &got)
	}
	if d := tools[0].GetDescription(); d != "text \uFFFD@@@@ here" {
		t.Errorf("description = %q, want the bad bytes as U+FFFD", d)
	}
	if n := tools[1].GetName(); n != "bad_\uFFFD@@@@" {
		t.Errorf("name = %q, want the bad bytes as U+FFFD", n)
	}
	if p := tools[0].GetParametersJson(); p != `{"type":"object"}` {
		t.Errorf("parameters = %q, want them untouched", p)
	}
}

// Only a provider's messages are kept repaired: an agent's, an operator's or a hook's
// that is not UTF-8 decodes marked with the path of its first bad field, which the
// interceptors refuse. One that is not protobuf at all fails to decode as before.
func TestLenientCodecMarksOthers(t *testing.T) {
	c := newLenientCodec()
	for _, tc := range []struct {
		name string
		in   proto.Message
		into proto.Message
		want string
	}{
		{"batch session", &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{SessionId: "s-@@BAD@@"}}},
			&toolsdv1.ExecuteBatchRequest{}, "batch.session_id"},
		{"second call's id", &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{SessionId: "s", Calls: []*toolsdv1.ToolCall{
			{CallId: "c0", Name: "t"}, {CallId: "c-@@BAD@@", Name: "t"}, {CallId: "c2", Name: "t-@@BAD@@"},
		}}}}, &toolsdv1.ExecuteBatchRequest{}, "batch.calls[1].call_id"},
		{"hook decision", &toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{Reason: "@@BAD@@"}}},
			&toolsdv1.HookServiceConnectRequest{}, "decision.reason"},
		{"unary scope", &toolsdv1.SchemasRequest{Scope: "team/@@BAD@@"}, &toolsdv1.SchemasRequest{}, "scope"},
	} {
		if err := c.Unmarshal(corrupt(t, tc.in), tc.into); err != nil {
			t.Errorf("%s: Unmarshal() = %v, want it decoded and marked", tc.name, err)
			continue
		}
		if got := marked(tc.into, badTextField); got != tc.want {
			t.Errorf("%s: marked %q, want %q", tc.name, got, tc.want)
		}
	}
	var clean toolsdv1.ExecuteBatchRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(mustMarshal(t, &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{SessionId: "s"}}}))}, &clean); err != nil || marked(&clean, badTextField) != "" {
		t.Errorf("a clean message: Unmarshal() = %v, marked %q; want it decoded unmarked", err, marked(&clean, badTextField))
	}
	var provider toolsdv1.ProviderServiceConnectRequest
	hello := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "p-@@BAD@@"}}}
	if err := c.Unmarshal(corrupt(t, hello), &provider); err != nil || marked(&provider, badTextField) != "" {
		t.Errorf("a provider's hello: Unmarshal() = %v, marked %q; want it repaired unmarked", err, marked(&provider, badTextField))
	}
	b := corrupt(t, hello).Materialize()
	truncated := mem.BufferSlice{mem.SliceBuffer(b[:len(b)-3])}
	var cut toolsdv1.ProviderServiceConnectRequest
	if err := c.Unmarshal(truncated, &cut); err != nil || !errors.Is(refused(&cut), errBadRequest) || cut.GetMsg() != nil {
		t.Errorf("a truncated provider message: Unmarshal() = %v, emptied to %v, refused for %v; want it emptied and refused as a bad request", err, cut.GetMsg(), refused(&cut))
	}
}

// marked returns the value the codec marked m with as field num, or "" when m is not
// so marked.
func marked(m any, num protowire.Number) string {
	if n, v := codecMark(m); n == num {
		return v
	}
	return ""
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
