package registry_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

func TestSchemasProjection(t *testing.T) {
	r := newRegistry(t)
	// Property order, whitespace and escapes are kept byte for byte.
	params := "{\"type\":\"object\",\n  \"properties\":{\"zeta\":{\"type\":\"string\"},\"alpha\":{\"description\":\"caf\\u00e9\"}}}"
	d := tool.Definition{
		Name: "b_tool", Description: "B", Parameters: []byte(params), DeferLoading: true,
		OutputSchema: []byte(`{"type":"string"}`), Mode: tool.ModeExclusive,
		Annotations: tool.Annotations{Title: "hidden from the projection"},
	}
	e := mustRegister(t, r, "", d, "")
	mustRegister(t, r, "", def("a_tool"), "")
	mustRegister(t, r, "", withCondition("c_tool", "true"), "")

	got, fp := r.Schemas("")
	want := []tool.Schema{
		{Name: "a_tool", Description: "the a_tool tool", Parameters: []byte(objectSchema), ContentHash: got[0].ContentHash},
		{Name: "b_tool", Description: "B", Parameters: []byte(params), DeferLoading: true, ContentHash: e.Hash()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Schemas(\"\") mismatch (-want +got):\n%s", diff)
	}
	if string(got[1].Parameters) != params {
		t.Errorf("Parameters = %s, want the registered bytes %s", got[1].Parameters, params)
	}
	if len(fp) != 64 {
		t.Errorf("fingerprint = %q, want 64 hex chars", fp)
	}
}

func TestSchemasCacheAndFingerprint(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("read"), "")
	mustRegister(t, r, "", def("write"), "")
	mustRegister(t, r, "agent", def("note"), "")

	s1, fp1 := r.Schemas("agent")
	s2, fp2 := r.Schemas("agent")
	if &s1[0] != &s2[0] || fp1 != fp2 {
		t.Fatalf("second Schemas(agent) was not served from the cache")
	}
	// A scope without its own node shares its ancestor's projection.
	s3, fp3 := r.Schemas("agent/session-42")
	if &s3[0] != &s1[0] || fp3 != fp1 {
		t.Errorf("Schemas(agent/session-42) is not the cached projection of agent")
	}

	steps := []struct {
		name    string
		change  func()
		changes bool
	}{
		{name: "register elsewhere", change: func() { mustRegister(t, r, "other", def("x"), "") }},
		{name: "restrict elsewhere", change: func() { mustRestrict(t, r, "other", nil, []string{"read"}) }},
		{name: "conditional tool", change: func() { mustRegister(t, r, "", withCondition("maybe", "true"), "") }},
		{name: "quarantine-free re-register of same definition", change: func() {
			if err := r.Unregister("", "write", ""); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, r, "", def("write"), "")
		}},
		{name: "deny an unknown name", change: func() { mustRestrict(t, r, "agent", nil, []string{"nothing"}) }},
		{name: "register visible tool", change: func() { mustRegister(t, r, "", def("search"), "") }, changes: true},
		{name: "restrict visible tool", change: func() { mustRestrict(t, r, "agent", nil, []string{"search"}) }, changes: true},
		{name: "change a description", change: func() {
			if err := r.Unregister("agent", "note", ""); err != nil {
				t.Fatal(err)
			}
			d := def("note")
			d.Description = "changed"
			mustRegister(t, r, "agent", d, "")
		}, changes: true},
		{name: "shadow with identical projection but other mode", change: func() {
			d := def("read")
			d.Mode = tool.ModeExclusive
			mustRegister(t, r, "agent", d, "")
		}, changes: true},
	}
	prev := fp1
	for _, st := range steps {
		st.change()
		_, fp := r.Schemas("agent")
		if (fp != prev) != st.changes {
			t.Errorf("after %q fingerprint changed=%v, want %v", st.name, fp != prev, st.changes)
		}
		prev = fp
	}
}

func TestSchemasFingerprintDependsOnlyOnList(t *testing.T) {
	// Two registries reaching the same visible set by different paths agree.
	a := newRegistry(t)
	mustRegister(t, a, "", def("x"), "")
	mustRegister(t, a, "", def("y"), "")
	b := newRegistry(t)
	mustRegister(t, b, "s", def("y"), "")
	mustRegister(t, b, "", def("x"), "")
	mustRegister(t, b, "", def("z"), "")
	mustRestrict(t, b, "s", nil, []string{"z"})
	_, fa := a.Schemas("s")
	_, fb := b.Schemas("s")
	if fa != fb {
		t.Errorf("fingerprints differ for the same visible list: %s vs %s", fa, fb)
	}
	_, empty1 := newRegistry(t).Schemas("")
	_, empty2 := newRegistry(t).Schemas("q")
	if empty1 != empty2 || empty1 == fa {
		t.Errorf("empty fingerprints = %s, %s, want equal and distinct from %s", empty1, empty2, fa)
	}
}

func TestSchemasExcludeQuarantined(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	mustRegister(t, r, "", def("t"), "p")
	if err := r.Unregister("", "t", "p"); err != nil {
		t.Fatal(err)
	}
	changed := def("t")
	changed.Description = "now exfiltrates"
	mustRegister(t, r, "", changed, "p")
	if got := schemaNames(r, ""); len(got) != 0 {
		t.Errorf("Schemas(\"\") = %v, want the quarantined tool hidden", got)
	}
}
