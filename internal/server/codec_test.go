package server

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
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

// Only a provider's messages are repaired: an agent's, an operator's or a hook's that
// is not UTF-8 fails to decode as before, and so does one that is not protobuf at all.
func TestLenientCodecRefusesOthers(t *testing.T) {
	c := newLenientCodec()
	batch := &toolsdv1.ExecuteBatchRequest{Msg: &toolsdv1.ExecuteBatchRequest_Batch{Batch: &toolsdv1.Batch{SessionId: "s-@@BAD@@"}}}
	if err := c.Unmarshal(corrupt(t, batch), &toolsdv1.ExecuteBatchRequest{}); err == nil {
		t.Error("an agent's batch that is not UTF-8 decoded")
	}
	decision := &toolsdv1.HookServiceConnectRequest{Msg: &toolsdv1.HookServiceConnectRequest_Decision{Decision: &toolsdv1.HookDecision{Reason: "@@BAD@@"}}}
	if err := c.Unmarshal(corrupt(t, decision), &toolsdv1.HookServiceConnectRequest{}); err == nil {
		t.Error("a hook's decision that is not UTF-8 decoded")
	}
	hello := &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Hello{Hello: &toolsdv1.ProviderHello{Name: "p-@@BAD@@"}}}
	b := corrupt(t, hello).Materialize()
	truncated := mem.BufferSlice{mem.SliceBuffer(b[:len(b)-3])}
	if err := c.Unmarshal(truncated, &toolsdv1.ProviderServiceConnectRequest{}); err == nil {
		t.Error("a truncated provider message decoded")
	}
}
