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

// TestUnaryRegistrationRefusals: what the proto says RegisterTool and UnregisterTool
// answer besides a bad request. A provider unregistering another provider's tool is
// PERMISSION_DENIED, reason NOT_OWNER, while an operator (no provider_id) removes it;
// a name the scope does not hold is NOT_FOUND, reason UNKNOWN_TOOL; with
// registry.pinning: refuse, a definition other than the pinned one is
// FAILED_PRECONDITION, reason DEFINITION_CHANGED.
func TestUnaryRegistrationRefusals(t *testing.T) {
	e := start(t, "registry: {pinning: refuse}\n")
	owner, _ := runProvider(t, e.app.Addr(), constTool("mine", "ok"))
	other, _ := runProvider(t, e.app.Addr(), constTool("theirs", "ok"))
	waitFor(t, "both providers' tools", func() bool { return len(e.schemaNames(t, "")) == 2 })
	unregister := func(name, providerID string) error {
		_, err := e.tools.UnregisterTool(t.Context(), &toolsdv1.UnregisterToolRequest{Name: name, ProviderId: providerID})
		return err
	}
	if err := unregister("mine", other.ProviderID()); status.Code(err) != codes.PermissionDenied || reason(err) != "NOT_OWNER" {
		t.Errorf("UnregisterTool(mine) as the other provider = %v, want PermissionDenied, reason NOT_OWNER", err)
	}
	if err := unregister("nothing", owner.ProviderID()); status.Code(err) != codes.NotFound || reason(err) != "UNKNOWN_TOOL" {
		t.Errorf("UnregisterTool(a name the scope does not hold) = %v, want NotFound, reason UNKNOWN_TOOL", err)
	}
	if err := unregister("mine", ""); err != nil {
		t.Fatalf("UnregisterTool(mine) as an operator = %v, want it removed", err)
	}
	if names := e.schemaNames(t, ""); len(names) != 1 || names[0] != "theirs" {
		t.Errorf("Schemas() after the operator's UnregisterTool = %v, want [theirs]", names)
	}
	_, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: owner.ProviderID(), Tool: &toolsdv1.ToolDefinition{
		Name: "mine", Description: "Another definition.", ParametersJson: `{"type":"object"}`,
	}})
	if status.Code(err) != codes.FailedPrecondition || reason(err) != "DEFINITION_CHANGED" {
		t.Errorf("RegisterTool(mine, changed) under pinning refuse = %v, want FailedPrecondition, reason DEFINITION_CHANGED", err)
	}
}
