package registry_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

type mask struct {
	scope       string
	allow, deny []string
}

func TestVisibility(t *testing.T) {
	// Global: read, write, exec, search. Preset "p": own "exec" (shadow) and "deploy".
	// Agent "p/a": own "note".
	tests := map[string]struct {
		masks []mask
		scope string
		want  []string
	}{
		"global":                  {scope: "", want: []string{"exec", "read", "search", "write"}},
		"preset shadows and adds": {scope: "p", want: []string{"deploy", "exec", "read", "search", "write"}},
		"agent inherits all":      {scope: "p/a", want: []string{"deploy", "exec", "note", "read", "search", "write"}},
		"unknown scope inherits":  {scope: "p/a/session-1", want: []string{"deploy", "exec", "note", "read", "search", "write"}},
		"sibling of preset":       {scope: "q", want: []string{"exec", "read", "search", "write"}},
		"allow mask": {
			masks: []mask{{scope: "p/a", allow: []string{"read", "deploy"}}},
			scope: "p/a", want: []string{"deploy", "note", "read"},
		},
		"deny mask": {
			masks: []mask{{scope: "p/a", deny: []string{"write", "exec"}}},
			scope: "p/a", want: []string{"deploy", "note", "read", "search"},
		},
		"allow and deny in one restriction": {
			masks: []mask{{scope: "p/a", allow: []string{"read", "write"}, deny: []string{"write"}}},
			scope: "p/a", want: []string{"note", "read"},
		},
		"allow and deny intersect across restrictions": {
			masks: []mask{{scope: "p/a", allow: []string{"read", "write", "search"}}, {scope: "p/a", deny: []string{"search"}}},
			scope: "p/a", want: []string{"note", "read", "write"},
		},
		"two allows intersect": {
			masks: []mask{{scope: "p/a", allow: []string{"read", "write", "exec"}}, {scope: "p/a", allow: []string{"write", "exec", "deploy"}}},
			scope: "p/a", want: []string{"exec", "note", "write"},
		},
		"mask never filters own tools": {
			masks: []mask{{scope: "p/a", allow: []string{"read"}, deny: []string{"note"}}},
			scope: "p/a", want: []string{"note", "read"},
		},
		"mask on preset filters inherited but not preset's own": {
			masks: []mask{{scope: "p", deny: []string{"exec", "read", "deploy"}}},
			scope: "p", want: []string{"deploy", "exec", "search", "write"},
		},
		"preset mask reaches descendants": {
			masks: []mask{{scope: "p", allow: []string{"read"}}},
			scope: "p/a/s", want: []string{"deploy", "exec", "note", "read"},
		},
		"descendant mask narrows further": {
			masks: []mask{{scope: "p", deny: []string{"read"}}, {scope: "p/a", deny: []string{"deploy"}}},
			scope: "p/a", want: []string{"exec", "note", "search", "write"},
		},
		"mask on agent does not reach parent": {
			masks: []mask{{scope: "p/a", allow: []string{"read"}}},
			scope: "p", want: []string{"deploy", "exec", "read", "search", "write"},
		},
		"mask on scope without tools": {
			masks: []mask{{scope: "x/y", deny: []string{"read"}}},
			scope: "x/y/z", want: []string{"exec", "search", "write"},
		},
		"allow unknown names only": {
			masks: []mask{{scope: "q", allow: []string{"nothing"}}},
			scope: "q", want: []string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			for _, n := range []string{"read", "write", "exec", "search"} {
				mustRegister(t, r, "", def(n), "")
			}
			mustRegister(t, r, "p", def("exec"), "")
			mustRegister(t, r, "p", def("deploy"), "")
			mustRegister(t, r, "p/a", def("note"), "")
			for _, m := range tc.masks {
				mustRestrict(t, r, m.scope, m.allow, m.deny)
			}
			if diff := cmp.Diff(tc.want, schemaNames(r, tc.scope)); diff != "" {
				t.Errorf("Schemas(%q) mismatch (-want +got):\n%s", tc.scope, diff)
			}
			// Lookup agrees with Schemas for every name.
			for _, n := range []string{"read", "write", "exec", "search", "deploy", "note"} {
				_, err := r.Lookup(tc.scope, n)
				visible := contains(tc.want, n)
				if visible != (err == nil) {
					t.Errorf("Lookup(%q, %q) = %v, want visible=%v", tc.scope, n, err, visible)
				}
			}
		})
	}
}

func TestShadowingResolvesOwnEntry(t *testing.T) {
	r := newRegistry(t)
	global := mustRegister(t, r, "", def("exec"), "")
	preset := mustRegister(t, r, "p", def("exec"), "")
	tests := map[string]struct {
		scope string
		want  *registry.Entry
	}{
		"global":   {scope: "", want: global},
		"preset":   {scope: "p", want: preset},
		"agent":    {scope: "p/a", want: preset},
		"sibling":  {scope: "q", want: global},
		"nested q": {scope: "q/r/s", want: global},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := r.Lookup(tc.scope, "exec")
			if err != nil || got != tc.want {
				t.Errorf("Lookup(%q, exec) = %v (scope %q), %v, want the entry of scope %q", tc.scope, got, got.Scope(), err, tc.want.Scope())
			}
		})
	}
	// Removing the shadow uncovers the global tool again.
	if err := r.Unregister("p", "exec", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Lookup("p/a", "exec"); got != global {
		t.Errorf("Lookup(p/a, exec) after removing the shadow = %v, want the global entry", got)
	}
}

// TestRestrictedIsUnknown: a filtered tool and a never-registered one are
// indistinguishable, down to the error text.
func TestRestrictedIsUnknown(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("secret"), "")
	mustRestrict(t, r, "agent", nil, []string{"secret"})
	_, filtered := r.Lookup("agent", "secret")
	r2 := newRegistry(t)
	_, never := r2.Lookup("agent", "secret")
	if !errors.Is(filtered, tool.ErrUnknownTool) || !errors.Is(never, tool.ErrUnknownTool) {
		t.Fatalf("Lookup errors = %v / %v, want both ErrUnknownTool", filtered, never)
	}
	if filtered.Error() != never.Error() {
		t.Errorf("filtered error %q != never-registered error %q", filtered, never)
	}
	if want := `registry: unknown tool "secret"`; filtered.Error() != want {
		t.Errorf("Lookup error = %q, want %q", filtered, want)
	}
	if contains(schemaNames(r, "agent"), "secret") {
		t.Errorf("Schemas(agent) lists a filtered tool")
	}
}

func TestRestrictRejects(t *testing.T) {
	tests := map[string]struct {
		scope       string
		allow, deny []string
		want        error
	}{
		"global scope":         {scope: "", deny: []string{"x"}, want: registry.ErrInvalidRestriction},
		"empty":                {scope: "a", want: registry.ErrInvalidRestriction},
		"empty slices":         {scope: "a", allow: []string{}, deny: []string{}, want: registry.ErrInvalidRestriction},
		"run_code in allow":    {scope: "a", allow: []string{"read", registry.ReservedRunCode}, want: registry.ErrInvalidRestriction},
		"run_code in deny":     {scope: "a", deny: []string{registry.ReservedRunCode}, want: registry.ErrInvalidRestriction},
		"invalid name":         {scope: "a", deny: []string{"bad name"}, want: registry.ErrInvalidRestriction},
		"invalid scope":        {scope: "a//b", deny: []string{"x"}, want: registry.ErrInvalidScope},
		"too many names":       {scope: "a", deny: manyNames(5000), want: registry.ErrLimit},
		"valid allow and deny": {scope: "a", allow: []string{"x"}, deny: []string{"y"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRegistry(t)
			id, err := r.Restrict(tc.scope, tc.allow, tc.deny)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Restrict(%q, %v, %v) = %q, %v, want %v", tc.scope, tc.allow, tc.deny, id, err, tc.want)
			}
			if tc.want != nil && id != "" {
				t.Errorf("Restrict returned id %q with an error", id)
			}
		})
	}
}

func TestRunCodeIsNeverFiltered(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def(registry.ReservedRunCode), "")
	mustRegister(t, r, "", def("read"), "")
	mustRestrict(t, r, "a", []string{"other"}, nil)
	if diff := cmp.Diff([]string{registry.ReservedRunCode}, schemaNames(r, "a")); diff != "" {
		t.Errorf("Schemas(a) mismatch (-want +got):\n%s", diff)
	}
}

func TestUnrestrictLifts(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("read"), "")
	mustRegister(t, r, "", def("write"), "")
	id1 := mustRestrict(t, r, "a", nil, []string{"write"})
	id2 := mustRestrict(t, r, "a", []string{"write"}, nil)
	if got := schemaNames(r, "a"); len(got) != 0 {
		t.Fatalf("Schemas(a) with both masks = %v, want none", got)
	}
	if err := r.Unrestrict(id1); err != nil {
		t.Fatalf("Unrestrict(%s) = %v", id1, err)
	}
	if diff := cmp.Diff([]string{"write"}, schemaNames(r, "a")); diff != "" {
		t.Errorf("Schemas(a) after lifting the deny mismatch (-want +got):\n%s", diff)
	}
	if err := r.Unrestrict(id2); err != nil {
		t.Fatalf("Unrestrict(%s) = %v", id2, err)
	}
	if diff := cmp.Diff([]string{"read", "write"}, schemaNames(r, "a")); diff != "" {
		t.Errorf("Schemas(a) after lifting both mismatch (-want +got):\n%s", diff)
	}
	if err := r.Unrestrict(id2); !errors.Is(err, registry.ErrUnknownRestriction) {
		t.Errorf("second Unrestrict(%s) = %v, want ErrUnknownRestriction", id2, err)
	}
	if _, scopes := r.Count(); scopes != 1 {
		t.Errorf("Count() scopes = %d, want 1 once the restricted scope holds nothing", scopes)
	}
}

func TestScopeNodesComeAndGo(t *testing.T) {
	// Registering into a deeper scope, then an intermediate one, then removing the
	// intermediate keeps inheritance right (nodes are re-parented both ways).
	r := newRegistry(t)
	mustRegister(t, r, "", def("g"), "")
	mustRegister(t, r, "a/b/c", def("deep"), "")
	mustRestrict(t, r, "a/b/c", nil, []string{"g"})
	if diff := cmp.Diff([]string{"deep"}, schemaNames(r, "a/b/c")); diff != "" {
		t.Fatalf("Schemas(a/b/c) mismatch (-want +got):\n%s", diff)
	}
	mustRegister(t, r, "a", def("mid"), "")
	if diff := cmp.Diff([]string{"deep", "mid"}, schemaNames(r, "a/b/c/d")); diff != "" {
		t.Errorf("Schemas(a/b/c/d) after adding a mismatch (-want +got):\n%s", diff)
	}
	if err := r.Unregister("a", "mid", ""); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"deep"}, schemaNames(r, "a/b/c/d")); diff != "" {
		t.Errorf("Schemas(a/b/c/d) after removing a mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"g"}, schemaNames(r, "a/b")); diff != "" {
		t.Errorf("Schemas(a/b) mismatch (-want +got):\n%s", diff)
	}
}

func TestLookupInvalidScope(t *testing.T) {
	r := newRegistry(t)
	if _, err := r.Lookup("a//b", "x"); !errors.Is(err, registry.ErrInvalidScope) {
		t.Errorf("Lookup(a//b) = %v, want ErrInvalidScope", err)
	}
	if s, fp := r.Schemas("a//b"); s != nil || fp != "" {
		t.Errorf("Schemas(a//b) = %v, %q, want nil, \"\"", s, fp)
	}
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func manyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "t" + strconv.Itoa(i)
	}
	return names
}

// TestRestrictionsHoldBoundedNames: restrictions on ever more scopes (an operator of
// tenant-a/** may restrict any scope under it) hold at most MaxRestrictedNames names in
// all; past it a restriction is refused, and lifting one makes room again.
func TestRestrictionsHoldBoundedNames(t *testing.T) {
	r := newRegistry(t, registry.WithLimits(registry.Limits{MaxRestrictedNames: 10}))
	var ids []string
	for i := range 5 {
		ids = append(ids, mustRestrict(t, r, fmt.Sprintf("tenant-a/s%d", i), []string{"read"}, []string{"write"}))
	}
	if _, err := r.Restrict("tenant-a/s5", nil, []string{"write"}); !errors.Is(err, registry.ErrLimit) {
		t.Fatalf("Restrict past 10 names in all = %v, want %v", err, registry.ErrLimit)
	}
	if err := r.Unrestrict(ids[0]); err != nil {
		t.Fatal(err)
	}
	mustRestrict(t, r, "tenant-a/s5", []string{"read"}, []string{"write"})
	if _, err := r.Restrict("tenant-a/s6", nil, []string{"write"}); !errors.Is(err, registry.ErrLimit) {
		t.Errorf("Restrict past 10 names in all after one was lifted and another placed = %v, want %v", err, registry.ErrLimit)
	}
}
