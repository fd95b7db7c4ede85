package registry_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/registry"
)

// TestOwned: an owner's registrations are listed sorted, quarantined ones marked, as
// every change leaves them, whoever makes it; the operator's are nobody's.
func TestOwned(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	mustRegister(t, r, "", def("pinned"), "gone")
	r.RemoveOwner("gone")
	changed := def("pinned")
	changed.Description = "changed"
	mustRegister(t, r, "", changed, "p")
	mustRegister(t, r, "b", def("z"), "p")
	mustRegister(t, r, "a", def("y"), "p")
	mustRegister(t, r, "a", def("x"), "")
	want := []registry.OwnedTool{{Name: "pinned", Quarantined: true}, {Scope: "a", Name: "y"}, {Scope: "b", Name: "z"}}
	if diff := cmp.Diff(want, r.Owned("p")); diff != "" {
		t.Errorf("Owned(p) (-want +got):\n%s", diff)
	}
	if err := r.Unregister("b", "z", ""); err != nil { // the operator's removal
		t.Fatal(err)
	}
	if err := r.ApproveQuarantined("", "pinned", ""); err != nil {
		t.Fatal(err)
	}
	want = []registry.OwnedTool{{Name: "pinned"}, {Scope: "a", Name: "y"}}
	if diff := cmp.Diff(want, r.Owned("p")); diff != "" {
		t.Errorf("Owned(p) after a removal and an approval (-want +got):\n%s", diff)
	}
	if got := r.Owned(""); len(got) != 0 {
		t.Errorf(`Owned("") = %v, want none`, got)
	}
	if got := r.Owned("gone"); len(got) != 0 {
		t.Errorf("Owned(gone) = %v, want none", got)
	}
}
