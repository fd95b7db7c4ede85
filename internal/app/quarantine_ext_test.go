package app_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

func pinnedDef(description string) *toolsdv1.ToolDefinition {
	return &toolsdv1.ToolDefinition{Name: "pinned", Description: description, ParametersJson: `{"type":"object"}`}
}

// registerHand registers one tool on a hand-driven provider stream and returns its
// status.
func registerHand(t *testing.T, p *handProvider, scope string, def *toolsdv1.ToolDefinition) *toolsdv1.ToolRegistrationStatus {
	t.Helper()
	p.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{Register: &toolsdv1.RegisterTools{Ref: 1, Scope: scope, Tools: []*toolsdv1.ToolDefinition{def}}}})
	st := p.recv(t).GetRegisterResult().GetTools()
	if len(st) != 1 {
		t.Fatalf("register result has %d statuses, want 1", len(st))
	}
	return st[0]
}

// TestRegisterToolReportsQuarantine: the unary RegisterTool says a registration is held
// back, as the provider stream's registration status does; a caller told only the
// hash could not tell a quarantined tool from a visible one.
func TestRegisterToolReportsQuarantine(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\n")
	first := helloHand(t, e.conn, "first")
	resp, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: first.id, Tool: pinnedDef("v1")})
	if err != nil || resp.GetQuarantined() {
		t.Fatalf("RegisterTool(v1) = %v, %v; want accepted and visible", resp, err)
	}
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first provider's tool to go", func() bool { return !slices.Contains(e.schemaNames(t, ""), "pinned") })
	second := helloHand(t, e.conn, "second")
	resp, err = e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{ProviderId: second.id, Tool: pinnedDef("v2")})
	if err != nil || !resp.GetQuarantined() {
		t.Fatalf("RegisterTool(v2 over the v1 pin) = %v, %v; want accepted and quarantined", resp, err)
	}
	if slices.Contains(e.schemaNames(t, ""), "pinned") {
		t.Error("a quarantined tool is visible in Schemas")
	}
}

// TestQuarantineIsReportedListedAndApproved: with registry.pinning: quarantine, a
// provider that registers a pinned name with another definition is told its
// registration is held back; an operator lists it with both hashes and approves exactly
// the definition listed, which then becomes visible.
func TestQuarantineIsReportedListedAndApproved(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\n")
	first := helloHand(t, e.conn, "first")
	st := registerHand(t, first, "", pinnedDef("v1"))
	if st.GetErrorCode() != "" || st.GetQuarantined() {
		t.Fatalf("first registration = %v, want accepted and visible", st)
	}
	pinned := st.GetContentHash()
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first provider's tool to go", func() bool { return !slices.Contains(e.schemaNames(t, ""), "pinned") })

	second := helloHand(t, e.conn, "second")
	st = registerHand(t, second, "", pinnedDef("v2"))
	if st.GetErrorCode() != "" || !st.GetQuarantined() || st.GetContentHash() == pinned {
		t.Fatalf("changed registration = %v, want accepted, quarantined, with a new hash", st)
	}
	changed := st.GetContentHash()
	if slices.Contains(e.schemaNames(t, ""), "pinned") {
		t.Error("a quarantined tool is visible in Schemas")
	}

	list, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetTools()) != 1 {
		t.Fatalf("ListQuarantined() = %v, want the one held-back registration", list.GetTools())
	}
	q := list.GetTools()[0]
	if q.GetScope() != "" || q.GetTool().GetName() != "pinned" || q.GetTool().GetDescription() != "v2" ||
		q.GetContentHash() != changed || q.GetPinnedHash() != pinned || q.GetProviderId() == "" {
		t.Errorf("ListQuarantined() = %v, want pinned (v2) with hash %s over pin %s", q, changed, pinned)
	}

	for name, tc := range map[string]struct {
		req  *toolsdv1.ApproveQuarantinedRequest
		code codes.Code
	}{
		"no hash":       {&toolsdv1.ApproveQuarantinedRequest{Name: "pinned"}, codes.InvalidArgument},
		"another hash":  {&toolsdv1.ApproveQuarantinedRequest{Name: "pinned", ContentHash: pinned}, codes.FailedPrecondition},
		"not held back": {&toolsdv1.ApproveQuarantinedRequest{Name: "other", ContentHash: changed}, codes.NotFound},
	} {
		if _, err := e.tools.ApproveQuarantined(t.Context(), tc.req); status.Code(err) != tc.code {
			t.Errorf("ApproveQuarantined(%s) = %v, want %s", name, err, tc.code)
		}
	}
	if _, err := e.tools.ApproveQuarantined(t.Context(), &toolsdv1.ApproveQuarantinedRequest{Name: "pinned", ContentHash: changed}); err != nil {
		t.Fatalf("ApproveQuarantined(listed hash) = %v", err)
	}
	if !slices.Contains(e.schemaNames(t, ""), "pinned") {
		t.Error("the approved tool is not visible in Schemas")
	}
	if list, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{}); err != nil || len(list.GetTools()) != 0 {
		t.Errorf("ListQuarantined() after approval = %v, %v; want none", list.GetTools(), err)
	}
}

// TestQuarantineStaysInItsTenant: an operator lists and approves held-back
// registrations only in the scopes it may restrict.
func TestQuarantineStaysInItsTenant(t *testing.T) {
	e := start(t, operatorAuth(t)+"registry: {pinning: quarantine}\n")
	providerB, opA, operator, agentA := e.as(t, tokenProviderB), e.as(t, tokenOpA), e.as(t, tokenOperator), e.as(t, tokenAgentA)
	first := helloHand(t, providerB.conn, "first")
	pinned := registerHand(t, first, "tenant-b", pinnedDef("v1")).GetContentHash()
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first provider's tool to go", func() bool { return !slices.Contains(operator.schemaNames(t, "tenant-b"), "pinned") })
	st := registerHand(t, helloHand(t, providerB.conn, "second"), "tenant-b", pinnedDef("v2"))
	if !st.GetQuarantined() || st.GetContentHash() == pinned {
		t.Fatalf("changed registration = %v, want quarantined", st)
	}

	if _, err := agentA.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ListQuarantined() as an agent = %v, want PermissionDenied (it may restrict nowhere)", err)
	}
	if list, err := opA.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{}); err != nil || len(list.GetTools()) != 0 {
		t.Errorf("ListQuarantined() as tenant-a's operator = %v, %v; want none of tenant-b's", list.GetTools(), err)
	}
	req := &toolsdv1.ApproveQuarantinedRequest{Scope: "tenant-b", Name: "pinned", ContentHash: st.GetContentHash()}
	if _, err := opA.tools.ApproveQuarantined(t.Context(), req); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ApproveQuarantined(tenant-b) as tenant-a's operator = %v, want PermissionDenied", err)
	}
	if list, err := operator.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{}); err != nil || len(list.GetTools()) != 1 {
		t.Errorf("ListQuarantined() as the operator of every scope = %v, %v; want tenant-b's", list.GetTools(), err)
	}
	if _, err := operator.tools.ApproveQuarantined(t.Context(), req); err != nil {
		t.Errorf("ApproveQuarantined(tenant-b) as the operator of every scope = %v", err)
	}
}

// TestApproveQuarantinedHashInCapitals: an approval naming the listed hash in capital
// hex approves that definition, as a pin file's capitals pin it: it is the same
// SHA-256, and the definition did not change.
func TestApproveQuarantinedHashInCapitals(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\n")
	first := helloHand(t, e.conn, "first")
	if st := registerHand(t, first, "", pinnedDef("v1")); st.GetErrorCode() != "" {
		t.Fatalf("first registration = %v, want accepted", st)
	}
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first provider's tool to go", func() bool { return !slices.Contains(e.schemaNames(t, ""), "pinned") })
	second := helloHand(t, e.conn, "second")
	st := registerHand(t, second, "", pinnedDef("v2"))
	if !st.GetQuarantined() {
		t.Fatalf("changed registration = %v, want quarantined", st)
	}
	upper := strings.ToUpper(st.GetContentHash())
	if _, err := e.tools.ApproveQuarantined(t.Context(), &toolsdv1.ApproveQuarantinedRequest{Name: "pinned", ContentHash: upper}); err != nil {
		t.Fatalf("ApproveQuarantined(%s) = %v, want nil", upper, err)
	}
	if !slices.Contains(e.schemaNames(t, ""), "pinned") {
		t.Error("the approved tool is not visible in Schemas")
	}
}
