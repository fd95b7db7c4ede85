package registry

import "testing"

// TestPinEvictionSparesTheFreshPin: when every tenant root holds as many pins, a full
// store forgets another root's pin, not the one just made (whose root sorts first).
func TestPinEvictionSparesTheFreshPin(t *testing.T) {
	s := newPinStore(2)
	s.put(toolKey{"b", "t"}, "h1")
	s.put(toolKey{"c", "t"}, "h2")
	s.put(toolKey{"a", "t"}, "h3") // three roots of one pin each: one must go
	if _, ok := s.get(toolKey{"a", "t"}); !ok {
		t.Error("the pin just made was forgotten")
	}
	if _, ok := s.get(toolKey{"b", "t"}); ok {
		t.Error(`root "b" kept its pin; want the first root other than the fresh one to lose it`)
	}
	if _, ok := s.get(toolKey{"c", "t"}); !ok {
		t.Error(`root "c" lost its pin; want only one pin forgotten`)
	}
	// The largest root still loses first, also when it is the fresh one.
	s = newPinStore(3)
	s.put(toolKey{"a", "x"}, "h")
	s.put(toolKey{"b", "x"}, "h")
	s.put(toolKey{"b", "y"}, "h")
	s.put(toolKey{"b", "z"}, "h")
	if _, ok := s.get(toolKey{"b", "x"}); ok {
		t.Error(`root "b", the largest, kept its oldest pin`)
	}
	if _, ok := s.get(toolKey{"a", "x"}); !ok {
		t.Error(`root "a" lost its only pin to a larger root's growth`)
	}
}
