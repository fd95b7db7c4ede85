package app_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// listProviders reads every page of ListProviders as e's caller, pageSize providers a
// page, and returns the providers with each one's tools joined across pages.
func listProviders(t *testing.T, e *env, pageSize uint32) []*toolsdv1.ConnectedProvider {
	t.Helper()
	var out []*toolsdv1.ConnectedProvider
	continued := false
	token := ""
	for {
		resp, err := e.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("ListProviders(page_token %q) = %v", token, err)
		}
		if n := proto.Size(resp); n > 1<<20 {
			t.Errorf("ListProviders() page is %d bytes, over 1 MiB", n)
		}
		for _, p := range resp.GetProviders() {
			if continued {
				last := out[len(out)-1]
				if p.GetProviderId() != last.GetProviderId() {
					t.Fatalf("page after tools_continued starts with %s, want %s", p.GetProviderId(), last.GetProviderId())
				}
				last.Tools = append(last.Tools, p.GetTools()...)
			} else {
				out = append(out, p)
			}
			continued = p.GetToolsContinued()
		}
		if token = resp.GetNextPageToken(); token == "" {
			if continued {
				t.Error("the last page ends with tools_continued")
			}
			return out
		}
	}
}

// providerTools is a listing as provider id → its tools.
func providerTools(ps []*toolsdv1.ConnectedProvider) map[string][]*toolsdv1.ProviderTool {
	out := map[string][]*toolsdv1.ProviderTool{}
	for _, p := range ps {
		out[p.GetProviderId()] = p.GetTools()
	}
	return out
}

func ptool(scope, name string, quarantined bool) *toolsdv1.ProviderTool {
	return &toolsdv1.ProviderTool{Scope: scope, Name: name, Quarantined: quarantined}
}

// TestListProvidersFollowsTheRegistry: ListProviders lists each connected provider with
// what it said in its hello and the registrations it holds however they were made or
// removed (on its stream, by the unary RegisterTool and UnregisterTool, by an
// operator's removal, quarantined), and not once its stream has ended.
func TestListProvidersFollowsTheRegistry(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\n")
	first := helloHand(t, e.conn, "first")
	registerHand(t, first, "", pinnedDef("v1"))
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first provider to go", func() bool { return len(listProviders(t, e, 0)) == 0 })

	p := helloHand(t, e.conn, "lister")
	if st := registerHand(t, p, "", pinnedDef("v2")); !st.GetQuarantined() {
		t.Fatalf("changed registration = %v, want quarantined", st)
	}
	if st := registerHand(t, p, "s", &toolsdv1.ToolDefinition{Name: "a", ParametersJson: `{"type":"object"}`}); st.GetErrorCode() != "" {
		t.Fatalf("register a = %v", st)
	}
	if _, err := e.tools.RegisterTool(t.Context(), &toolsdv1.RegisterToolRequest{Scope: "s", ProviderId: p.id,
		Tool: &toolsdv1.ToolDefinition{Name: "b", ParametersJson: `{"type":"object"}`}}); err != nil {
		t.Fatalf("RegisterTool(b) = %v", err)
	}
	got := listProviders(t, e, 0)
	if len(got) != 1 {
		t.Fatalf("ListProviders() = %v, want one provider", got)
	}
	lp := got[0]
	if lp.GetProviderId() != p.id || lp.GetName() != "lister" || lp.GetIdentity() != "" || !lp.GetConnectedAt().IsValid() ||
		lp.GetConnectedAt().AsTime().IsZero() || lp.GetMaxInFlight() == 0 || lp.GetInFlight() != 0 {
		t.Errorf("ListProviders() = %v, want provider %s, lister, connected, idle", lp, p.id)
	}
	want := []*toolsdv1.ProviderTool{ptool("", "pinned", true), ptool("s", "a", false), ptool("s", "b", false)}
	if diff := cmp.Diff(want, lp.GetTools(), protocmp.Transform()); diff != "" {
		t.Errorf("tools after registering (-want +got):\n%s", diff)
	}

	steps := []struct {
		what string
		do   func() error
		want []*toolsdv1.ProviderTool
	}{
		{"the unary UnregisterTool", func() error {
			_, err := e.tools.UnregisterTool(t.Context(), &toolsdv1.UnregisterToolRequest{Scope: "s", Name: "b", ProviderId: p.id})
			return err
		}, []*toolsdv1.ProviderTool{ptool("", "pinned", true), ptool("s", "a", false)}},
		{"an operator's removal", func() error {
			_, err := e.tools.UnregisterTool(t.Context(), &toolsdv1.UnregisterToolRequest{Scope: "s", Name: "a"})
			return err
		}, []*toolsdv1.ProviderTool{ptool("", "pinned", true)}},
		{"an approval", func() error {
			list, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{})
			if err != nil || len(list.GetTools()) != 1 {
				return fmt.Errorf("ListQuarantined() = %v, %w", list, err)
			}
			_, err = e.tools.ApproveQuarantined(t.Context(), &toolsdv1.ApproveQuarantinedRequest{Name: "pinned", ContentHash: list.GetTools()[0].GetContentHash()})
			return err
		}, []*toolsdv1.ProviderTool{ptool("", "pinned", false)}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if diff := cmp.Diff(map[string][]*toolsdv1.ProviderTool{p.id: s.want}, providerTools(listProviders(t, e, 0)), protocmp.Transform()); diff != "" {
			t.Errorf("listing after %s (-want +got):\n%s", s.what, diff)
		}
	}

	if err := p.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the provider to go", func() bool { return len(listProviders(t, e, 0)) == 0 })
}

// TestListProvidersIsForOperators: an operator of every scope, or of the global scope,
// sees every provider with the identity it connected as; a tenant's operator sees
// only the providers whose registrations are all in its tenant, none that has
// registered nothing and none that also holds one in another tenant; a caller that may
// restrict nowhere is denied.
func TestListProvidersIsForOperators(t *testing.T) {
	const tokenProviderAB = "provider-ab-token-6d0e2f4a8c1b7935"
	e := start(t, tenantAuthWith(t, tokenOpA+" op-a\n"+tokenOpGlobal+" op-global\n"+tokenProviderAB+" provider-ab\n",
		`    - {identity: op-a, role: operator, scopes: ["tenant-a/**"]}
    - {identity: op-global, role: operator, scopes: [""]}
    - {identity: provider-ab, role: provider, scopes: ["tenant-a/**", "tenant-b/**"]}
`))
	providerA, providerB := e.as(t, tokenProviderA), e.as(t, tokenProviderB)
	agentA, opA, opGlobal, operator := e.as(t, tokenAgentA), e.as(t, tokenOpA), e.as(t, tokenOpGlobal), e.as(t, tokenOperator)
	a := helloHand(t, providerA.conn, "a")
	b := helloHand(t, providerB.conn, "b")
	registerHand(t, b, "tenant-b", &toolsdv1.ToolDefinition{Name: "tool_b", ParametersJson: `{"type":"object"}`})

	if _, err := agentA.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ListProviders() as an agent = %v, want PermissionDenied", err)
	}
	if got := listProviders(t, opA, 0); len(got) != 0 {
		t.Errorf("ListProviders() as tenant-a's operator = %v, want none (a has registered nothing, b is tenant-b's)", got)
	}
	registerHand(t, a, "tenant-a/x", &toolsdv1.ToolDefinition{Name: "tool_a", ParametersJson: `{"type":"object"}`})
	got := listProviders(t, opA, 0)
	if len(got) != 1 || got[0].GetProviderId() != a.id || got[0].GetIdentity() != "provider-a" {
		t.Errorf("ListProviders() as tenant-a's operator = %v, want provider %s of provider-a only", got, a.id)
	}
	for name, caller := range map[string]*env{"operator": operator, "op-global": opGlobal} {
		want := map[string][]*toolsdv1.ProviderTool{a.id: {ptool("tenant-a/x", "tool_a", false)}, b.id: {ptool("tenant-b", "tool_b", false)}}
		got := listProviders(t, caller, 0)
		if diff := cmp.Diff(want, providerTools(got), protocmp.Transform()); diff != "" {
			t.Errorf("ListProviders() as %s (-want +got):\n%s", name, diff)
		}
		for _, p := range got {
			if wantID := map[string]string{a.id: "provider-a", b.id: "provider-b"}[p.GetProviderId()]; p.GetIdentity() != wantID {
				t.Errorf("ListProviders() as %s: provider %s has identity %q, want %q", name, p.GetProviderId(), p.GetIdentity(), wantID)
			}
		}
	}
	// A provider serving both tenants, one registration in each, is not tenant-a's alone.
	ab := helloHand(t, e.as(t, tokenProviderAB).conn, "ab")
	for _, scope := range []string{"tenant-a/y", "tenant-b"} {
		if st := registerHand(t, ab, scope, &toolsdv1.ToolDefinition{Name: "tool_ab", ParametersJson: `{"type":"object"}`}); st.GetErrorCode() != "" {
			t.Fatalf("register tool_ab in %s as provider-ab = %v", scope, st)
		}
	}
	if got := listProviders(t, opA, 0); len(got) != 1 || got[0].GetProviderId() != a.id {
		t.Errorf("ListProviders() as tenant-a's operator = %v, want provider %s only (ab also serves tenant-b)", got, a.id)
	}
}

// TestListProvidersPages: providers are listed oldest first, page_size a page, and a
// provider whose tools take over a page's 1 MiB is continued on the next page, every
// tool listed once in order; a page token toolsd did not give is INVALID_ARGUMENT.
func TestListProvidersPages(t *testing.T) {
	e := start(t, "limits: {max_tools_per_provider: 3000}\n")
	segment := strings.Repeat("s", 64)
	scope := func(i int) string {
		return fmt.Sprintf("%d", i) + strings.Repeat("/"+segment, 7)
	}
	big := helloHand(t, e.conn, "big")
	var want []*toolsdv1.ProviderTool
	for i := range 2 {
		defs := make([]*toolsdv1.ToolDefinition, 1000)
		for j := range defs {
			name := fmt.Sprintf("t%04d_", j) + strings.Repeat("n", 58)
			defs[j] = &toolsdv1.ToolDefinition{Name: name, ParametersJson: `{"type":"object"}`}
			want = append(want, ptool(scope(i), name, false))
		}
		big.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
			Register: &toolsdv1.RegisterTools{Ref: uint64(i + 1), Scope: scope(i), Tools: defs}}})
		for _, st := range big.recv(t).GetRegisterResult().GetTools() {
			if st.GetErrorCode() != "" {
				t.Fatalf("registering %s: %s %s", st.GetName(), st.GetErrorCode(), st.GetErrorMessage())
			}
		}
	}
	small := helloHand(t, e.conn, "small")

	first, err := e.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ps := first.GetProviders(); len(ps) != 1 || ps[0].GetProviderId() != big.id || !ps[0].GetToolsContinued() || first.GetNextPageToken() == "" {
		t.Errorf("first page = %d providers (continued %v), next %q; want only %s, continued", len(ps), len(ps) > 0 && ps[0].GetToolsContinued(), first.GetNextPageToken(), big.id)
	}
	got := listProviders(t, e, 0)
	if len(got) != 2 || got[0].GetProviderId() != big.id || got[1].GetProviderId() != small.id {
		t.Fatalf("ListProviders() = %d providers, want %s then %s", len(got), big.id, small.id)
	}
	if diff := cmp.Diff(want, got[0].GetTools(), protocmp.Transform()); diff != "" {
		t.Errorf("the big provider's tools across pages (-want +got):\n%s", diff)
	}
	if one := listProviders(t, e, 1); len(one) != 2 || one[1].GetProviderId() != small.id {
		t.Errorf("ListProviders(page_size 1) = %d providers, want both", len(one))
	}
	for _, token := range []string{"garbage", strings.Repeat("A", 1<<16)} {
		_, err := e.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageToken: token})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("ListProviders(page_token %.16q…) = %v, want InvalidArgument", token, err)
		}
	}
}

// TestListProvidersRefusesTokensItDidNotGive: a page token is good only at the toolsd
// that gave it. One from another toolsd (a replica behind the same address) or made up
// by the client is INVALID_ARGUMENT, BAD_REQUEST, as the proto says; each was read as a
// position, so the other toolsd silently skipped its providers connected before the
// first toolsd's last listed one, and a made-up token listed from anywhere.
func TestListProvidersRefusesTokensItDidNotGive(t *testing.T) {
	a, b := start(t, ""), start(t, "")
	helloHand(t, b.conn, "b-first")
	helloHand(t, a.conn, "a-first")
	second := helloHand(t, a.conn, "a-second")
	page, err := a.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	token := page.GetNextPageToken()
	if token == "" {
		t.Fatal("ListProviders(page_size 1) of two providers gave no next_page_token")
	}
	next, err := a.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageToken: token})
	if err != nil || len(next.GetProviders()) != 1 || next.GetProviders()[0].GetProviderId() != second.id {
		t.Errorf("ListProviders(its own token) = %v, %v; want %s alone", next.GetProviders(), err, second.id)
	}
	made := base64.RawURLEncoding.EncodeToString([]byte(`{"t":1,"p":"x"}`))
	// An edited token keeps the MAC it was given with, so only that MAC can refuse it:
	// the made-up one is shorter than a MAC and is refused before its MAC is read.
	given, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !bytes.Contains(given, []byte(`"p":"`)) {
		t.Fatalf("page token %q does not decode to a provider's position: %v", token, err)
	}
	edited := base64.RawURLEncoding.EncodeToString(bytes.Replace(given, []byte(`"p":"`), []byte(`"p":"!`), 1))
	for name, c := range map[string]struct {
		e     *env
		token string
	}{
		"another toolsd's": {b, token},
		"made up":          {a, made},
		"edited":           {a, edited},
	} {
		resp, err := c.e.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageToken: c.token})
		if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
			t.Errorf("ListProviders(%s page token) = %d providers, %v; want InvalidArgument (BAD_REQUEST)", name, len(resp.GetProviders()), err)
		}
	}
}
