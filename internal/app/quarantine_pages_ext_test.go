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

	toolsdv1 "github.com/toolsd/toolsd/gen/toolsd/v1"
)

// quarantinedKey is what a listing of one held-back registration must show.
type quarantinedKey struct {
	Scope, Name, Hash, Description string
}

func keyOf(q *toolsdv1.QuarantinedTool) quarantinedKey {
	return quarantinedKey{q.GetScope(), q.GetTool().GetName(), q.GetContentHash(), q.GetTool().GetDescription()}
}

// quarantine has a first provider on e register names in each scope with a small
// definition, so they are pinned, and go; a second then registers each again with
// def(scope, name), one message each, and the registrations are held back. It returns
// them in the order ListQuarantined lists them (scopes and names given sorted).
func quarantine(t *testing.T, e *env, scopes, names []string, def func(scope, name string) *toolsdv1.ToolDefinition) []quarantinedKey {
	t.Helper()
	first := helloHand(t, e.conn, "first")
	for i, scope := range scopes {
		defs := make([]*toolsdv1.ToolDefinition, len(names))
		for j, name := range names {
			defs[j] = &toolsdv1.ToolDefinition{Name: name, ParametersJson: `{"type":"object"}`}
		}
		first.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
			Register: &toolsdv1.RegisterTools{Ref: uint64(i + 1), Scope: scope, Tools: defs}}})
		for _, st := range first.recv(t).GetRegisterResult().GetTools() {
			if st.GetErrorCode() != "" || st.GetQuarantined() {
				t.Fatalf("first registration of %s = %v, want accepted and visible", st.GetName(), st)
			}
		}
	}
	if err := first.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for _, scope := range scopes {
		waitFor(t, "the first provider's tools to go", func() bool { return len(e.schemaNames(t, scope)) == 0 })
	}
	second := helloHand(t, e.conn, "second")
	var want []quarantinedKey
	ref := uint64(0)
	for _, scope := range scopes {
		for _, name := range names {
			ref++
			d := def(scope, name)
			second.send(t, &toolsdv1.ProviderServiceConnectRequest{Msg: &toolsdv1.ProviderServiceConnectRequest_Register{
				Register: &toolsdv1.RegisterTools{Ref: ref, Scope: scope, Tools: []*toolsdv1.ToolDefinition{d}}}})
			st := second.recv(t).GetRegisterResult().GetTools()
			if len(st) != 1 || st[0].GetErrorCode() != "" || !st[0].GetQuarantined() {
				t.Fatalf("second registration of %s in %q = %v, want accepted and quarantined", name, scope, st)
			}
			want = append(want, quarantinedKey{scope, name, st[0].GetContentHash(), d.GetDescription()})
		}
	}
	return want
}

// listQuarantined reads every page of ListQuarantined, pageSize registrations a page,
// and returns them with how many pages it took. Each page must hold at most pageSize
// (100 for 0 or over 100) and 1 MiB, and at least one registration when another page
// follows it.
func listQuarantined(t *testing.T, e *env, pageSize uint32) (got []quarantinedKey, pages int) {
	t.Helper()
	most := int(pageSize)
	if most == 0 || most > 100 {
		most = 100
	}
	token := ""
	for {
		resp, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("ListQuarantined(page_size %d, page %d) = %v", pageSize, pages+1, err)
		}
		pages++
		if n := proto.Size(resp); n > 1<<20 {
			t.Errorf("ListQuarantined(page_size %d) page %d is %d bytes, over 1 MiB", pageSize, pages, n)
		}
		if n := len(resp.GetTools()); n > most || (n == 0 && resp.GetNextPageToken() != "") {
			t.Errorf("ListQuarantined(page_size %d) page %d has %d registrations and next_page_token %q; want 1 to %d before the last", pageSize, pages, n, resp.GetNextPageToken(), most)
		}
		for _, q := range resp.GetTools() {
			got = append(got, keyOf(q))
		}
		if token = resp.GetNextPageToken(); token == "" {
			return got, pages
		}
	}
}

// largeDefinition is name's definition at the largest description and parameter
// schema the default limits take (8 KiB, 64 KiB), the scope written into both.
func largeDefinition(scope, name string) *toolsdv1.ToolDefinition {
	desc := fmt.Sprintf("%s in scope %s v2 ", name, scope)
	desc += strings.Repeat("d", 8<<10-len(desc))
	head := `{"type":"object","description":"` + desc[:32]
	params := head + strings.Repeat("p", 64<<10-len(head)-2) + `"}`
	return &toolsdv1.ToolDefinition{Name: name, Description: desc, ParametersJson: params}
}

// TestListQuarantinedPagesLargeDefinitions: 66 held-back registrations at the largest
// definition the limits take (about 4.8 MiB in all, over gRPC's default 4 MiB receive
// limit) are listed page by page, each page within 1 MiB, every registration once and
// in order; the empty request is the first page and says more follow. The one response
// of every registration was over the client's receive limit: RESOURCE_EXHAUSTED, and
// an operator could not list them at all.
func TestListQuarantinedPagesLargeDefinitions(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\n")
	names := make([]string, 22)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%02d", i)
	}
	want := quarantine(t, e, []string{"", "tenant-a", "tenant-b"}, names, largeDefinition)

	first, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{})
	if err != nil {
		t.Fatalf("ListQuarantined(empty request) = %v, want its first page", err)
	}
	if n := len(first.GetTools()); n == 0 || n == len(want) || first.GetNextPageToken() == "" {
		t.Errorf("ListQuarantined(empty request) = %d of %d registrations, next_page_token %q; want a first page and a token", n, len(want), first.GetNextPageToken())
	}
	for _, size := range []uint32{0, 1, 5, 1000} {
		got, pages := listQuarantined(t, e, size)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListQuarantined(page_size %d) across %d pages (-want +got):\n%s", size, pages, diff)
		}
	}
}

// TestListQuarantinedPageSize: a page holds page_size registrations, 100 when it is 0
// or over 100, and the next page starts after the last one listed, also when that one
// has gone since: a page reads the registrations held back then.
func TestListQuarantinedPageSize(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\n")
	names := make([]string, 150)
	for i := range names {
		names[i] = fmt.Sprintf("tool_%03d", i)
	}
	want := quarantine(t, e, []string{"tenant-a"}, names, func(_, name string) *toolsdv1.ToolDefinition {
		return &toolsdv1.ToolDefinition{Name: name, Description: "v2", ParametersJson: `{"type":"object"}`}
	})
	for size, n := range map[uint32]int{0: 100, 1000: 100, 30: 30} {
		resp, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageSize: size})
		if err != nil || len(resp.GetTools()) != n || resp.GetNextPageToken() == "" {
			t.Errorf("ListQuarantined(page_size %d) = %d registrations, %q, %v; want %d and a next_page_token", size, len(resp.GetTools()), resp.GetNextPageToken(), err, n)
		}
	}
	if got, pages := listQuarantined(t, e, 7); !cmp.Equal(want, got) || pages != 22 {
		t.Errorf("ListQuarantined(page_size 7) = %d registrations in %d pages, want %d in order in 22", len(got), pages, len(want))
	}
	if resp, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageSize: 150}); err != nil || len(resp.GetTools()) != 100 {
		t.Fatalf("ListQuarantined(page_size 150) = %d registrations, %v; want 100", len(resp.GetTools()), err)
	}

	page, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageSize: 2})
	if err != nil || len(page.GetTools()) != 2 {
		t.Fatalf("ListQuarantined(page_size 2) = %v, %v", page.GetTools(), err)
	}
	last := page.GetTools()[1]
	if _, err := e.tools.ApproveQuarantined(t.Context(), &toolsdv1.ApproveQuarantinedRequest{
		Scope: last.GetScope(), Name: last.GetTool().GetName(), ContentHash: last.GetContentHash()}); err != nil {
		t.Fatalf("ApproveQuarantined(%s) = %v", last.GetTool().GetName(), err)
	}
	next, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageSize: 2, PageToken: page.GetNextPageToken()})
	if err != nil || len(next.GetTools()) != 2 || keyOf(next.GetTools()[0]) != want[2] {
		t.Errorf("ListQuarantined(after %s, approved since) = %v, %v; want %s first", last.GetTool().GetName(), next.GetTools(), err, want[2].Name)
	}
}

// TestListQuarantinedRefusesTokensItDidNotGive: a page token is good only at the
// toolsd that gave it, and only for ListQuarantined: another toolsd's, a made-up,
// edited or oversized one and a ListProviders token are INVALID_ARGUMENT, BAD_REQUEST,
// as ListProviders refuses tokens it did not give.
func TestListQuarantinedRefusesTokensItDidNotGive(t *testing.T) {
	a, b := start(t, "registry: {pinning: quarantine}\n"), start(t, "registry: {pinning: quarantine}\n")
	small := func(_, name string) *toolsdv1.ToolDefinition {
		return &toolsdv1.ToolDefinition{Name: name, Description: "v2", ParametersJson: `{"type":"object"}`}
	}
	want := quarantine(t, a, []string{""}, []string{"one", "two"}, small)
	quarantine(t, b, []string{""}, []string{"one", "two"}, small)
	page, err := a.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	token := page.GetNextPageToken()
	if token == "" {
		t.Fatal("ListQuarantined(page_size 1) of two registrations gave no next_page_token")
	}
	next, err := a.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageToken: token})
	if err != nil || len(next.GetTools()) != 1 || keyOf(next.GetTools()[0]) != want[1] || next.GetNextPageToken() != "" {
		t.Errorf("ListQuarantined(its own token) = %v, %q, %v; want %s alone, the last page", next.GetTools(), next.GetNextPageToken(), err, want[1].Name)
	}

	given, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !bytes.Contains(given, []byte(`"n":"one"`)) {
		t.Fatalf("page token %q does not decode to a registration's position: %v", token, err)
	}
	edited := base64.RawURLEncoding.EncodeToString(bytes.Replace(given, []byte(`"n":"one"`), []byte(`"n":"on"`), 1))
	helloHand(t, a.conn, "p1")
	helloHand(t, a.conn, "p2")
	providers, err := a.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageSize: 1})
	if err != nil || providers.GetNextPageToken() == "" {
		t.Fatalf("ListProviders(page_size 1) = %v, %v; want a next_page_token", providers, err)
	}
	for name, c := range map[string]struct {
		e     *env
		token string
	}{
		"another toolsd's": {b, token},
		"made up":          {a, base64.RawURLEncoding.EncodeToString([]byte(`{"n":"one"}`))},
		"edited":           {a, edited},
		"garbage":          {a, "garbage"},
		"oversized":        {a, strings.Repeat("A", 1<<16)},
		"ListProviders'":   {a, providers.GetNextPageToken()},
	} {
		resp, err := c.e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageToken: c.token})
		if status.Code(err) != codes.InvalidArgument || reason(err) != "BAD_REQUEST" {
			t.Errorf("ListQuarantined(%s page token) = %d registrations, %v; want InvalidArgument (BAD_REQUEST)", name, len(resp.GetTools()), err)
		}
	}
	if _, err := a.tools.ListProviders(t.Context(), &toolsdv1.ListProvidersRequest{PageToken: token}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ListProviders(a ListQuarantined page token) = %v, want InvalidArgument", err)
	}
}

// TestListQuarantinedListsALargeRegistrationAlone: with limits.max_schema_bytes raised,
// a registration over a page's 1 MiB is listed alone on its page, the next page
// following it, rather than never.
func TestListQuarantinedListsALargeRegistrationAlone(t *testing.T) {
	e := start(t, "registry: {pinning: quarantine}\nlimits: {max_schema_bytes: 2MiB}\n")
	want := quarantine(t, e, []string{""}, []string{"a", "b", "c"}, func(_, name string) *toolsdv1.ToolDefinition {
		if name == "b" {
			return &toolsdv1.ToolDefinition{Name: name, Description: "v2", ParametersJson: `{"type":"object","description":"` + strings.Repeat("p", 3<<19) + `"}`}
		}
		return &toolsdv1.ToolDefinition{Name: name, Description: "v2", ParametersJson: `{"type":"object"}`}
	})
	var got [][]string
	token := ""
	for {
		resp, err := e.tools.ListQuarantined(t.Context(), &toolsdv1.ListQuarantinedRequest{PageToken: token})
		if err != nil {
			t.Fatalf("ListQuarantined(page %d) = %v", len(got)+1, err)
		}
		var page []string
		for _, q := range resp.GetTools() {
			page = append(page, q.GetTool().GetName())
		}
		got = append(got, page)
		if token = resp.GetNextPageToken(); token == "" || len(got) > len(want) {
			break
		}
	}
	if diff := cmp.Diff([][]string{{"a"}, {"b"}, {"c"}}, got); diff != "" {
		t.Errorf("ListQuarantined() pages (-want +got):\n%s", diff)
	}
}
