package registry

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

// linearPins is the pin store as it was before its roots were kept in a heap: a full
// store scans every root for the one to evict from. The store must evict as it did.
type linearPins struct {
	max   int
	n     int
	roots map[string][]pin // oldest first
}

func (s *linearPins) put(k toolKey, hash string) {
	root := pinRoot(k.scope)
	pins := s.roots[root]
	if i := slices.IndexFunc(pins, func(p pin) bool { return p.key == k }); i >= 0 {
		s.roots[root] = append(slices.Delete(pins, i, i+1), pin{key: k, hash: hash})
		return
	}
	s.roots[root] = append(pins, pin{key: k, hash: hash})
	s.n++
	for s.n > s.max {
		s.evictFromLargest(root)
	}
}

// evictFromLargest is the linear choice, its switch as it was.
func (s *linearPins) evictFromLargest(fresh string) {
	var largest string
	most := -1
	for root, pins := range s.roots {
		switch {
		case most < 0, len(pins) > most:
		case len(pins) < most:
			continue
		case largest == fresh:
		case root == fresh:
			continue
		case root > largest:
			continue
		}
		largest, most = root, len(pins)
	}
	s.roots[largest] = s.roots[largest][1:]
	s.n--
	if len(s.roots[largest]) == 0 {
		delete(s.roots, largest)
	}
}

func (s *linearPins) all() []Pin {
	var out []Pin
	for _, root := range slices.Sorted(maps.Keys(s.roots)) {
		for _, p := range s.roots[root] {
			out = append(out, Pin{Scope: p.key.scope, Name: p.key.name, Hash: p.hash})
		}
	}
	return out
}

// TestPinEvictionOrderIsLinearChoice puts random pins over many tenant roots, of
// uneven sizes and with repeats, and checks after each that the store holds the pins
// the linear choice of the root to evict from leaves.
func TestPinEvictionOrderIsLinearChoice(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, seed))
		limit, nroots := 1+rng.IntN(60), 1+rng.IntN(80)
		s, want := newPinStore(limit), &linearPins{max: limit, roots: map[string][]pin{}}
		for step := range 1500 {
			root := ""
			if r := rng.IntN(rng.IntN(nroots) + 1); r > 0 {
				root = "t" + strconv.Itoa(r)
			}
			scope := root
			if root != "" && rng.IntN(2) == 0 {
				scope += "/agent"
			}
			k := toolKey{scope, "n" + strconv.Itoa(rng.IntN(20))}
			hash := "h" + strconv.Itoa(rng.IntN(3))
			s.put(k, hash)
			want.put(k, hash)
			if w, g := want.all(), s.all(); !slices.Equal(w, g) {
				t.Fatalf("seed %d, step %d: put(%v) left pins (-want +got):\n%s", seed, step, k, cmp.Diff(w, g))
			}
		}
	}
}
