package app_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// TestUnaryRegisterRejectsWhatTheStreamRejects: RegisterTool maps definitions exactly
// like a provider's stream does, so values the stream refuses are refused here too.
func TestUnaryRegisterRejectsWhatTheStreamRejects(t *testing.T) {
	e := start(t, "")
	p, _ := runProvider(t, e.app.Addr(), constTool("fine", "ok"))
	for name, def := range map[string]*toolsdv1.ToolDefinition{
		"negative max_content_bytes": {Name: "a", ParametersJson: `{"type":"object"}`, MaxContentBytes: -1},
		"negative timeout":           {Name: "b", ParametersJson: `{"type":"object"}`, Timeout: durationpb.New(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: def})
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("RegisterTool(%s) = %v, want InvalidArgument", name, err)
			}
		})
	}
	resp, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: p.ProviderID(), Tool: &toolsdv1.ToolDefinition{
		Name: "c", ParametersJson: `{"type":"object"}`, MaxContentBytes: 100,
	}})
	if err != nil || resp.GetContentHash() == "" {
		t.Errorf("RegisterTool(valid) = %v, %v, want a content hash", resp, err)
	}
}

// TestRegisterNamingNoConnectedProvider: RegisterTool and UnregisterTool with a
// provider_id no stream holds (a typo, or a provider that has reconnected under a new
// id) are FAILED_PRECONDITION, reason PROVIDER_NOT_CONNECTED, and the message names the
// field and the id, so the caller can tell which id to fix.
func TestRegisterNamingNoConnectedProvider(t *testing.T) {
	e := start(t, "")
	const id = "p-not-connected-1"
	_, regErr := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: id, Tool: &toolsdv1.ToolDefinition{
		Name: "a", ParametersJson: `{"type":"object"}`,
	}})
	_, unregErr := e.tools.UnregisterTool(t.Context(), &toolsdv1.UnregisterToolRequest{Name: "a", ProviderId: id})
	for rpc, err := range map[string]error{"RegisterTool": regErr, "UnregisterTool": unregErr} {
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || reason(err) != "PROVIDER_NOT_CONNECTED" {
			t.Errorf("%s = %v, want FailedPrecondition, reason PROVIDER_NOT_CONNECTED", rpc, err)
		}
		if !strings.Contains(st.Message(), `provider_id "`+id+`"`) {
			t.Errorf("%s message = %q, want it to name provider_id %q", rpc, st.Message(), id)
		}
	}
}
