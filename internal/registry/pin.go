package registry

import (
	"cmp"
	"container/heap"
	"container/list"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// pinStore remembers the last accepted hash per (scope, name), also after the tool is
// gone, up to a bound. Pins are kept per tenant root (a scope's first segment): when
// the store is full, the root holding the most pins loses its least recently pinned
// one, so that one tenant registering name after name cannot push out every other
// tenant's pins (and with them their rug-pull protection).
type pinStore struct {
	max   int
	n     int
	roots map[string]*rootPins
	// bySize holds the roots too, so that a full store finds the largest without
	// going through every tenant's.
	bySize rootHeap
	byKey  map[toolKey]*list.Element
	// gen increases when a pin is added or its hash changes (not when a registration
	// with the pinned hash only refreshes it): what a saved copy has to catch up with.
	gen uint64
}

// Pin is one remembered (scope, name) → content hash ([ContentHash]).
type Pin struct {
	Scope, Name, Hash string
}

type pin struct {
	key  toolKey
	hash string
	// warned is the hash last quarantined against this pin and logged at warn, so that
	// a provider reconnecting with the same changed definition is warned about once.
	warned string
}

// rootPins is one tenant root's pins.
type rootPins struct {
	name string
	pins list.List // of *pin, most recent at the front
	at   int       // index in pinStore.bySize
}

// rootHeap orders tenant roots by the order they lose pins in when the store is full:
// the most pins first, then by name. It implements [heap.Interface].
type rootHeap []*rootPins

func (h rootHeap) Len() int { return len(h) }

func (h rootHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.pins.Len() != b.pins.Len() {
		return a.pins.Len() > b.pins.Len()
	}
	return a.name < b.name
}

func (h rootHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

func (h *rootHeap) Push(x any) {
	r := x.(*rootPins)
	r.at = len(*h)
	*h = append(*h, r)
}

func (h *rootHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}

func newPinStore(max int) *pinStore {
	return &pinStore{max: max, roots: map[string]*rootPins{}, byKey: map[toolKey]*list.Element{}}
}

// pinRoot is the tenant root of scope: its first segment ("" for the global scope).
func pinRoot(scope string) string {
	root, _, _ := strings.Cut(scope, "/")
	return root
}

func (s *pinStore) get(k toolKey) (string, bool) {
	el, ok := s.byKey[k]
	if !ok {
		return "", false
	}
	return el.Value.(*pin).hash, true
}

func (s *pinStore) put(k toolKey, hash string) {
	root := pinRoot(k.scope)
	if el, ok := s.byKey[k]; ok {
		if p := el.Value.(*pin); p.hash != hash {
			p.hash, p.warned = hash, ""
			s.gen++
		}
		s.roots[root].pins.MoveToFront(el)
		return
	}
	s.gen++
	r := s.roots[root]
	if r == nil {
		r = &rootPins{name: root}
		s.roots[root] = r
		heap.Push(&s.bySize, r)
	}
	s.byKey[k] = r.pins.PushFront(&pin{key: k, hash: hash})
	heap.Fix(&s.bySize, r.at)
	s.n++
	for s.n > s.max {
		s.evictFromLargest(root)
	}
}

// evictFromLargest forgets the least recently pinned key of the root with the most pins.
// Among roots with as many, it spares fresh (the root just pinned into, whose oldest pin
// may be the one just made) and takes the first in order.
func (s *pinStore) evictFromLargest(fresh string) {
	most := s.bySize[0]
	if most.name == fresh {
		if next := s.runnerUp(); next != nil && next.pins.Len() == most.pins.Len() {
			most = next
		}
	}
	oldest := most.pins.Back()
	most.pins.Remove(oldest)
	delete(s.byKey, oldest.Value.(*pin).key)
	s.n--
	if most.pins.Len() == 0 {
		heap.Remove(&s.bySize, most.at)
		delete(s.roots, most.name)
		return
	}
	heap.Fix(&s.bySize, most.at)
}

// runnerUp returns the root that would lose a pin if the first in s.bySize could not:
// one of the first's children in the heap (nil with a single root).
func (s *pinStore) runnerUp() *rootPins {
	switch {
	case len(s.bySize) < 2:
		return nil
	case len(s.bySize) == 2 || s.bySize.Less(1, 2):
		return s.bySize[1]
	default:
		return s.bySize[2]
	}
}

// firstQuarantine reports whether hash is quarantined against k's pin for the first
// time since the pin last changed, or since another hash was: only then is it worth a
// warning. It remembers hash as the one warned about. k must be pinned.
func (s *pinStore) firstQuarantine(k toolKey, hash string) bool {
	p := s.byKey[k].Value.(*pin)
	if p.warned == hash {
		return false
	}
	p.warned = hash
	return true
}

// all returns the pins, each tenant root's from the least to the most recently pinned,
// roots in order: put back in this order, they keep their recency.
func (s *pinStore) all() []Pin {
	roots := make([]string, 0, len(s.roots))
	for root := range s.roots {
		roots = append(roots, root)
	}
	slices.Sort(roots)
	out := make([]Pin, 0, s.n)
	for _, root := range roots {
		for el := s.roots[root].pins.Back(); el != nil; el = el.Prev() {
			p := el.Value.(*pin)
			out = append(out, Pin{Scope: p.key.scope, Name: p.key.name, Hash: p.hash})
		}
	}
	return out
}

// Pins returns the remembered pins (nil with [PinOff]) and their generation, a number
// that increases whenever a pin is added or changes. Given to [WithPins], for example
// after a restart, they are remembered again in the same order of recency.
func (r *Registry) Pins() ([]Pin, uint64) {
	if r.pins == nil {
		return nil, 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pins.all(), r.pins.gen
}

// PinGeneration returns the generation [Registry.Pins] would: a saver polls it to learn
// whether there is anything new to save.
func (r *Registry) PinGeneration() uint64 {
	if r.pins == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pins.gen
}

// Quarantined lists the registrations held back by [PinQuarantine], sorted by scope and
// name.
func (r *Registry) Quarantined() []*Entry {
	r.mu.RLock()
	var out []*Entry
	for _, n := range r.nodes {
		for _, e := range n.quarantined {
			out = append(out, e)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Entry) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.def.Name, b.def.Name))
	})
	return out
}

// PinnedHash returns the content hash pinned for name in scope, if any.
func (r *Registry) PinnedHash(scope, name string) (string, bool) {
	if r.pins == nil {
		return "", false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pins.get(toolKey{scope, name})
}

// IsQuarantined reports whether e is held back by [PinQuarantine].
func (r *Registry) IsQuarantined(e *Entry) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := r.nodes[e.scope]
	return n != nil && n.quarantined[e.def.Name] == e
}

// ApproveQuarantined makes the quarantined registration of name in scope visible and
// pins its hash in place of the old one. hash, when not empty, must be the quarantined
// definition's: an operator approves the definition it reviewed, not one registered
// since ([ErrPinMismatch]). Its hex may be written in capitals: it names the same
// SHA-256, as a pin file's does.
func (r *Registry) ApproveQuarantined(scope, name, hash string) error {
	if err := ValidateScope(scope); err != nil {
		return err
	}
	r.mu.Lock()
	var e *Entry
	n := r.nodes[scope]
	if n != nil {
		e = n.quarantined[name]
	}
	if e == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: tool %s in scope %s", ErrNotQuarantined, quoteName(name), quoteName(scope))
	}
	if hash != "" && strings.ToLower(hash) != e.hash {
		r.mu.Unlock()
		return fmt.Errorf("%w: the quarantined tool %s in scope %s has hash %s, not %s",
			ErrPinMismatch, quoteName(name), quoteName(scope), e.hash, quoteName(hash))
	}
	old := visibleEntryLocked(n, name) // what scope saw before: n has no visible registration of name
	delete(n.quarantined, name)
	n.tools[name] = e
	n.ver++
	r.ntools++
	r.pins.put(toolKey{scope, name}, e.hash)
	r.invalidateSetsForNameLocked(scope, name, old)
	r.seq++
	change := Change{Kind: ChangeRegistered, Seq: r.seq, Scope: scope, Name: name, Entry: e}
	r.log.Info("quarantined tool approved", zap.String("scope", scope), zap.String("tool", name), zap.String("hash", e.hash))
	r.unlockAndNotify([]Change{change})
	return nil
}
