package registry_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/toolsd/toolsd/internal/registry"
	"github.com/toolsd/toolsd/internal/tool"
)

// TestConcurrentUse runs every operation at once under -race and checks the invariants
// that must hold whatever the interleaving.
func TestConcurrentUse(t *testing.T) {
	r := newRegistry(t)
	mustRegister(t, r, "", def("stable"), "")
	var wg sync.WaitGroup
	for w := range 3 {
		owner := "prov" + strconv.Itoa(w)
		wg.Go(func() {
			for i := range 40 {
				scope := "p/" + strconv.Itoa(i%4)
				if _, err := r.Register(scope, withCondition("c"+strconv.Itoa(w)+"_"+strconv.Itoa(i), "step > 0"), owner); err != nil {
					t.Error(err)
				}
				if i%5 == 0 {
					r.RemoveOwner(owner)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 40 {
			id, err := r.Restrict("p/"+strconv.Itoa(i%4), nil, []string{"c1"})
			if err != nil {
				t.Error(err)
				continue
			}
			if err := r.Unrestrict(id); err != nil {
				t.Error(err)
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			for i := range 60 {
				scope := "p/" + strconv.Itoa(i%4) + "/agent"
				if _, err := r.Lookup(scope, "stable"); err != nil {
					t.Errorf("Lookup(%s, stable) = %v", scope, err)
				}
				schemas, _ := r.Schemas(scope)
				if len(schemas) == 0 || schemas[0].Name != "stable" {
					t.Errorf("Schemas(%s) lost the stable tool", scope)
				}
				ts, err := r.ResolveToolSet(t.Context(), scope, registry.ConditionEnv{Step: 1})
				if err != nil {
					t.Errorf("ResolveToolSet = %v", err)
					continue
				}
				if _, err := ts.Lookup("stable"); err != nil && !errors.Is(err, tool.ErrToolSetGone) {
					t.Errorf("ToolSet.Lookup(stable) = %v", err)
				}
				_ = r.ReleaseToolSet(ts.ID())
			}
		})
	}
	wg.Wait()
}
