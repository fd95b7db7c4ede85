package registry_test

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestResolveToolSetUnderConstantChange: a resolution whose scope changes between its
// evaluation and its check, every time, still ends with a tool set (the last attempt
// holds the lock) instead of failing with "the registry kept changing". The clock is
// read once per attempt, after the evaluation: on the first three reads (the attempts
// made without the lock) it replaces the tool the attempt admitted.
func TestResolveToolSetUnderConstantChange(t *testing.T) {
	var r *registry.Registry
	var reads atomic.Int32
	clock := func() time.Time {
		if n := reads.Add(1); n <= 3 {
			// The tool the attempt admitted is replaced by another registration.
			if err := r.Unregister("team", "first", "p"); err != nil {
				t.Errorf("Unregister() = %v", err)
			}
			if _, err := r.Register("team", withCondition("first", "step > "+strconv.Itoa(-int(n))), "p"); err != nil {
				t.Errorf("Register() = %v", err)
			}
		}
		return time.Unix(0, 0)
	}
	r = newRegistry(t, registry.WithClock(clock))
	mustRegister(t, r, "team", withCondition("first", "step > 0"), "p")
	if n := reads.Load(); n != 0 {
		t.Fatalf("the clock was read %d times before the resolution; the test needs it unread", n)
	}
	ts, err := r.ResolveToolSet(t.Context(), "team", registry.ConditionEnv{Step: 1})
	if err != nil {
		t.Fatalf("ResolveToolSet() under constant change = %v, want a tool set", err)
	}
	if n := reads.Load(); n < 4 {
		t.Fatalf("the clock was read %d times, want 4 or more (three raced attempts and the last): the test proves nothing", n)
	}
	e, err := ts.Lookup("first")
	if err != nil {
		t.Fatalf("the set's Lookup(first) = %v", err)
	}
	if got := e.Definition().Condition; got != "step > -3" {
		t.Errorf("the set admitted the registration with condition %q, want the last one (step > -3)", got)
	}
}

// TestLockedResolutionIsBounded: the last attempt of a resolution evaluates under the
// registry's write lock, which stops every lookup and registration of every tenant
// while it runs. Conditions are bounded one by one, not together, so that attempt is
// bounded in time: past the budget it gives up with ErrBusy (retryable) instead of
// holding the lock for as long as a scope's conditions take.
func TestLockedResolutionIsBounded(t *testing.T) {
	var r *registry.Registry
	var reads atomic.Int32
	clock := func() time.Time {
		if n := reads.Add(1); n <= 3 { // every unlocked attempt is raced
			if err := r.Unregister("team", "first", "p"); err != nil {
				t.Errorf("Unregister() = %v", err)
			}
			if _, err := r.Register("team", withCondition("first", "step > "+strconv.Itoa(-int(n))), "p"); err != nil {
				t.Errorf("Register() = %v", err)
			}
		}
		return time.Unix(0, 0)
	}
	r = newRegistry(t, registry.WithClock(clock), registry.WithLockedResolveBudget(time.Nanosecond))
	mustRegister(t, r, "team", withCondition("first", "step > 0"), "p")
	_, err := r.ResolveToolSet(t.Context(), "team", registry.ConditionEnv{Step: 1})
	if !errors.Is(err, registry.ErrBusy) {
		t.Fatalf("ResolveToolSet() whose locked attempt is over its budget = %v, want ErrBusy", err)
	}
	if n := reads.Load(); n < 3 {
		t.Fatalf("the clock was read %d times, want 3 or more (three raced attempts): the test proves nothing", n)
	}
	// The lock was let go: the registry still answers.
	if _, err := r.ResolveToolSet(t.Context(), "team", registry.ConditionEnv{Step: 1}); err != nil {
		t.Errorf("ResolveToolSet() with nothing racing it = %v", err)
	}
}
