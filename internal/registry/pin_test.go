package registry

import "testing"

// TestPinStoreSharesFairly: a full pin store forgets from the tenant root that holds the
// most pins, so a tenant registering name after name cannot push out another tenant's
// pins; within a root, the least recently pinned goes first.
func TestPinStoreSharesFairly(t *testing.T) {
	s := newPinStore(4)
	s.put(toolKey{"tenant-b/bot", "search"}, "b1")
	for _, name := range []string{"a1", "a2", "a3", "a4", "a5", "a6"} {
		s.put(toolKey{"tenant-a", name}, "h-"+name)
	}
	if h, ok := s.get(toolKey{"tenant-b/bot", "search"}); !ok || h != "b1" {
		t.Errorf("tenant-b's pin = %q, %v after tenant-a pinned six names; want it kept", h, ok)
	}
	for name, want := range map[string]bool{"a1": false, "a2": false, "a3": false, "a4": true, "a5": true, "a6": true} {
		if _, ok := s.get(toolKey{"tenant-a", name}); ok != want {
			t.Errorf("tenant-a's pin %s kept = %v, want %v (its least recent go first)", name, ok, want)
		}
	}
	// Re-pinning moves a key to the front of its root: a4 outlives a5 now.
	s.put(toolKey{"tenant-a", "a4"}, "h-a4'")
	s.put(toolKey{"tenant-a", "a7"}, "h-a7")
	if _, ok := s.get(toolKey{"tenant-a", "a5"}); ok {
		t.Error("a5, the least recently pinned, was kept")
	}
	if h, _ := s.get(toolKey{"tenant-a", "a4"}); h != "h-a4'" {
		t.Errorf("a4 = %q, want its new hash", h)
	}
	if s.n != 4 || len(s.byKey) != 4 {
		t.Errorf("store holds %d pins (%d keys), want 4", s.n, len(s.byKey))
	}
}
