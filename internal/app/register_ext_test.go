package app_test

import (
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
