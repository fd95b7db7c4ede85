package registry

import (
	"math/rand/v2"
	"testing"

	"github.com/toolsd/toolsd/internal/tool"
)

// TestScopeIndexMatchesNodes drives random registrations, unregistrations, owner
// removals, restrictions and lifts over nested scopes and checks, after each, that
// every node's parent is its nearest ancestor node and that the index of the paths
// down to nodes holds exactly the scopes a scan of every node would list.
func TestScopeIndexMatchesNodes(t *testing.T) {
	scopes := []string{"", "a", "a/x", "a/x/y", "a/x/y/z", "a/w/y", "ab", "ab/x", "b/c/d"}
	names := []string{"n0", "n1"}
	owners := []string{"", "p1", "p2"}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		pick := func(list []string) string { return list[rng.IntN(len(list))] }
		r := New()
		var restrictions []string
		for step := range 300 {
			switch op := rng.IntN(8); {
			case op < 3:
				d := tool.Definition{Name: pick(names), Parameters: []byte(`{"type":"object"}`)}
				_, _ = r.Register(pick(scopes), d, pick(owners))
			case op < 5:
				_ = r.Unregister(pick(scopes), pick(names), "")
			case op == 5:
				r.RemoveOwner(pick(owners[1:]))
			case op == 6:
				if id, err := r.Restrict(pick(scopes[1:]), nil, []string{pick(names)}); err == nil {
					restrictions = append(restrictions, id)
				}
			default:
				if len(restrictions) > 0 {
					i := rng.IntN(len(restrictions))
					_ = r.Unrestrict(restrictions[i])
					restrictions = append(restrictions[:i], restrictions[i+1:]...)
				}
			}
			checkScopeIndex(t, r, seed, step)
		}
	}
}

func checkScopeIndex(t *testing.T, r *Registry, seed uint64, step int) {
	t.Helper()
	want := map[string]map[string]struct{}{}
	for scope, n := range r.nodes {
		if n == r.root {
			continue
		}
		if p := r.nearestLocked(parentScope(scope)); n.parent != p {
			t.Fatalf("seed %d step %d: node %q has parent %q, want %q", seed, step, scope, n.parent.scope, p.scope)
		}
		for s := scope; s != ""; s = parentScope(s) {
			p := parentScope(s)
			if want[p] == nil {
				want[p] = map[string]struct{}{}
			}
			want[p][s] = struct{}{}
		}
	}
	if len(r.below) != len(want) {
		t.Fatalf("seed %d step %d: index has %d scopes with paths below, want %d", seed, step, len(r.below), len(want))
	}
	for p, kids := range want {
		if len(r.below[p]) != len(kids) {
			t.Fatalf("seed %d step %d: index lists %v below %q, want %v", seed, step, r.below[p], p, kids)
		}
		for s := range kids {
			if _, ok := r.below[p][s]; !ok {
				t.Fatalf("seed %d step %d: index lists %v below %q, want %v", seed, step, r.below[p], p, kids)
			}
		}
	}
}
