package registry_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolsd/toolsd/internal/registry"
)

type recorded struct {
	Kind        registry.ChangeKind
	Scope, Name string
	Allow, Deny []string
	HasEntry    bool
}

func TestSubscribe(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	var got []recorded
	var seqs []uint64
	cancel := r.Subscribe(func(c registry.Change) {
		// Delivered outside the lock: reading the registry here must not deadlock.
		r.Count()
		got = append(got, recorded{Kind: c.Kind, Scope: c.Scope, Name: c.Name, Allow: c.Allow, Deny: c.Deny, HasEntry: c.Entry != nil})
		seqs = append(seqs, c.Seq)
	})

	mustRegister(t, r, "a", def("t"), "p")
	id := mustRestrict(t, r, "a", []string{"x"}, []string{"y"})
	if err := r.Unrestrict(id); err != nil {
		t.Fatal(err)
	}
	if err := r.Unregister("a", "t", "p"); err != nil {
		t.Fatal(err)
	}
	changed := def("t")
	changed.Description = "changed"
	mustRegister(t, r, "a", changed, "p")
	if err := r.ApproveQuarantined("a", "t", ""); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, "b", def("u"), "p")
	r.RemoveOwner("p")
	// Rejected operations are not changes.
	if _, err := r.Register("a", def("bad name"), "p"); err == nil {
		t.Fatal("Register(bad name) succeeded")
	}

	want := []recorded{
		{Kind: registry.ChangeRegistered, Scope: "a", Name: "t", HasEntry: true},
		{Kind: registry.ChangeRestricted, Scope: "a", Allow: []string{"x"}, Deny: []string{"y"}},
		{Kind: registry.ChangeUnrestricted, Scope: "a", Allow: []string{"x"}, Deny: []string{"y"}},
		{Kind: registry.ChangeUnregistered, Scope: "a", Name: "t", HasEntry: true},
		{Kind: registry.ChangeQuarantined, Scope: "a", Name: "t", HasEntry: true},
		{Kind: registry.ChangeRegistered, Scope: "a", Name: "t", HasEntry: true},
		{Kind: registry.ChangeRegistered, Scope: "b", Name: "u", HasEntry: true},
		{Kind: registry.ChangeUnregistered, Scope: "a", Name: "t", HasEntry: true},
		{Kind: registry.ChangeUnregistered, Scope: "b", Name: "u", HasEntry: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes mismatch (-want +got):\n%s", diff)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("Seq not increasing: %v", seqs)
			break
		}
	}

	cancel()
	cancel() // idempotent
	mustRegister(t, r, "c", def("v"), "")
	if len(got) != len(want) {
		t.Errorf("got %d changes after cancel, want none", len(got)-len(want))
	}
}

func TestChangeKindString(t *testing.T) {
	tests := map[registry.ChangeKind]string{
		registry.ChangeRegistered:   "registered",
		registry.ChangeUnregistered: "unregistered",
		registry.ChangeRestricted:   "restricted",
		registry.ChangeUnrestricted: "unrestricted",
		registry.ChangeQuarantined:  "quarantined",
		registry.ChangeKind(0):      "unknown",
	}
	for k, want := range tests {
		if got := k.String(); got != want {
			t.Errorf("ChangeKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

// TestSubscribeOrderUnderConcurrency: concurrent changes reach every subscriber in Seq
// order, and a subscriber reading the registry while other changes wait does not
// deadlock.
func TestSubscribeOrderUnderConcurrency(t *testing.T) {
	r := newRegistry(t)
	var mu sync.Mutex
	var seqs []uint64
	defer r.Subscribe(func(c registry.Change) {
		// Yield between two reads so that other writers take the lock meanwhile.
		r.Count()
		runtime.Gosched()
		r.Count()
		mu.Lock()
		seqs = append(seqs, c.Seq)
		mu.Unlock()
	})()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				name := "t" + string(rune('a'+w)) + string(rune('a'+i))
				if _, err := r.Register("s", def(name), ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != 100 {
		t.Fatalf("got %d changes, want 100", len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("changes delivered out of order: %v", seqs)
		}
	}
}

// TestRegisteredAcrossScopes checks that a name counts as registered while any scope
// holds it, visible or quarantined, and that a subscriber to its last unregistration
// already sees it gone.
func TestRegisteredAcrossScopes(t *testing.T) {
	r := newRegistry(t, registry.WithPinning(registry.PinQuarantine))
	var goneAt []string
	r.Subscribe(func(c registry.Change) {
		if c.Kind == registry.ChangeUnregistered && !r.Registered(c.Name) {
			goneAt = append(goneAt, c.Scope+"/"+c.Name)
		}
	})
	if r.Registered("t") {
		t.Fatal("Registered(t) on an empty registry = true")
	}
	mustRegister(t, r, "a", def("t"), "p")
	mustRegister(t, r, "b", def("t"), "q")
	if err := r.Unregister("a", "t", "p"); err != nil {
		t.Fatal(err)
	}
	if !r.Registered("t") {
		t.Error("Registered(t) with t left in scope b = false")
	}
	// A changed definition in a pinned scope is held back, and still registered.
	changed := def("t")
	changed.Description = "changed"
	mustRegister(t, r, "a", changed, "p")
	if err := r.Unregister("b", "t", "q"); err != nil {
		t.Fatal(err)
	}
	if !r.Registered("t") {
		t.Error("Registered(t) with t quarantined in scope a = false")
	}
	r.RemoveOwner("p")
	if r.Registered("t") {
		t.Error("Registered(t) after every registration went = true")
	}
	if diff := cmp.Diff([]string{"a/t"}, goneAt); diff != "" {
		t.Errorf("last unregistrations seen by the subscriber (-want +got):\n%s", diff)
	}
}
