package registry

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolsd/toolsd/internal/tool"
)

// view is the immutable visible set of one node: every visible entry, conditional ones
// included, sorted by name. It is valid while its node's ver and its parent's view are
// unchanged, so a change in one scope recomputes only that scope's subtree, lazily.
type view struct {
	ver     uint64
	parent  *view
	entries []*Entry

	projOnce    sync.Once
	schemas     []tool.Schema
	fingerprint string

	condOnce sync.Once
	conds    []*Entry // the conditional entries, in order

	// setProj caches tool-set projections by admitted conditional names: steps of one
	// scope mostly admit the same conditionals, so they share one projection.
	setMu   sync.Mutex
	setProj map[string]*projection
}

type projection struct {
	schemas     []tool.Schema
	fingerprint string
}

// maxSetProjections bounds a view's cache of tool-set projections.
const maxSetProjections = 32

type viewCache struct{ p atomic.Pointer[view] }

// viewLocked returns n's current view, computing missing or stale views on the way.
// r.mu must be held (a read lock is enough: concurrent computations agree, and the
// first one stored wins).
func (r *Registry) viewLocked(n *node) *view {
	var pv *view
	if n.parent != nil {
		pv = r.viewLocked(n.parent)
	}
	old := n.view.p.Load()
	if old != nil && old.ver == n.ver && old.parent == pv {
		return old
	}
	v := &view{ver: n.ver, parent: pv, entries: mergeVisible(pv, n)}
	if n.view.p.CompareAndSwap(old, v) {
		return v
	}
	if cur := n.view.p.Load(); cur != nil && cur.ver == n.ver && cur.parent == pv {
		return cur
	}
	return v
}

// mergeVisible merges the parent's visible entries, filtered by n's restrictions, with
// n's own tools, which shadow inherited ones of the same name.
func mergeVisible(pv *view, n *node) []*Entry {
	own := make([]*Entry, 0, len(n.tools))
	for _, e := range n.tools {
		own = append(own, e)
	}
	slices.SortFunc(own, byName)
	if pv == nil {
		return own
	}
	inherited := pv.entries
	if len(own) == 0 && len(n.restrictions) == 0 {
		return inherited
	}
	out := make([]*Entry, 0, len(inherited)+len(own))
	i, j := 0, 0
	for i < len(inherited) || j < len(own) {
		switch {
		case j == len(own) || i < len(inherited) && inherited[i].def.Name < own[j].def.Name:
			if e := inherited[i]; admitsAll(n.restrictions, e.def.Name) {
				out = append(out, e)
			}
			i++
		case i < len(inherited) && inherited[i].def.Name == own[j].def.Name:
			i++ // shadowed
		default:
			out = append(out, own[j])
			j++
		}
	}
	return slices.Clip(out)
}

func byName(a, b *Entry) int { return strings.Compare(a.def.Name, b.def.Name) }

func admitsAll(ms []*restriction, name string) bool {
	for _, m := range ms {
		if !m.admits(name) {
			return false
		}
	}
	return true
}

// projection returns the unconditional entries' schemas and their fingerprint,
// computed once per view.
func (v *view) projection() ([]tool.Schema, string) {
	if p := v.parent; p != nil && len(v.entries) == len(p.entries) && (len(v.entries) == 0 || &v.entries[0] == &p.entries[0]) {
		return p.projection() // the node adds nothing: share the parent's projection
	}
	v.projOnce.Do(func() {
		uncond := make([]*Entry, 0, len(v.entries))
		for _, e := range v.entries {
			if e.cond == nil {
				uncond = append(uncond, e)
			}
		}
		v.schemas, v.fingerprint = project(uncond)
	})
	return v.schemas, v.fingerprint
}

// conditionals returns v's conditional entries, computed once.
func (v *view) conditionals() []*Entry {
	v.condOnce.Do(func() {
		for _, e := range v.entries {
			if e.cond != nil {
				v.conds = append(v.conds, e)
			}
		}
	})
	return v.conds
}

// setProjection returns the projection of v's unconditional entries plus the admitted
// conditional ones (keyed by their names, in v's order).
func (v *view) setProjection(admitted map[string]*Entry) ([]tool.Schema, string) {
	if len(admitted) == 0 {
		return v.projection()
	}
	var key strings.Builder
	for _, e := range v.conditionals() {
		if admitted[e.def.Name] == e {
			key.WriteString(e.def.Name)
			key.WriteByte(0)
		}
	}
	k := key.String()
	v.setMu.Lock()
	p := v.setProj[k]
	v.setMu.Unlock()
	if p != nil {
		return p.schemas, p.fingerprint
	}
	in := make([]*Entry, 0, len(v.entries))
	for _, e := range v.entries {
		if e.cond == nil || admitted[e.def.Name] == e {
			in = append(in, e)
		}
	}
	p = &projection{}
	p.schemas, p.fingerprint = project(in)
	v.setMu.Lock()
	if v.setProj == nil {
		v.setProj = map[string]*projection{}
	}
	if len(v.setProj) < maxSetProjections {
		v.setProj[k] = p
	}
	v.setMu.Unlock()
	return p.schemas, p.fingerprint
}

func project(entries []*Entry) ([]tool.Schema, string) {
	schemas := make([]tool.Schema, len(entries))
	for i, e := range entries {
		schemas[i] = e.schema
	}
	return schemas, fingerprint(entries)
}

// visibleEntryLocked resolves name as the scope of n sees it (conditional entries
// included), walking from n up to the root: an own tool wins; otherwise the name must
// pass the node's masks to be inherited from further up.
func visibleEntryLocked(n *node, name string) *Entry {
	for ; n != nil; n = n.parent {
		if e := n.tools[name]; e != nil {
			return e
		}
		if !admitsAll(n.restrictions, name) {
			return nil
		}
	}
	return nil
}

// Lookup resolves a tool for execution without a tool set: conditional tools are
// excluded (a conditional tool still shadows an inherited one of the same name). Every
// invisible name gets the same error, wrapping [tool.ErrUnknownTool].
func (r *Registry) Lookup(scope, name string) (*Entry, error) {
	if err := ValidateScope(scope); err != nil {
		return nil, err
	}
	r.mu.RLock()
	e := visibleEntryLocked(r.nearestLocked(scope), name)
	r.mu.RUnlock()
	if e == nil || e.cond != nil {
		return nil, errUnknownTool(name)
	}
	return e, nil
}

// Schemas returns the model-facing schemas of scope's visible unconditional tools,
// sorted by name, and their fingerprint. Both are byte-identical while the visible set
// is unchanged; the projection is cached per scope and recomputed lazily after a change
// in the scope or an ancestor. The slice is shared with other callers and must not be
// modified. An invalid scope yields nil and "".
//
// The fingerprint is the hex SHA-256 of the tag "toolsd.schemas.v1" followed by one
// 32-byte digest per schema, in order; each digest is the SHA-256 of the tag
// "toolsd.schema.v1" and the schema's name, description, parameters, defer flag ('0' or
// '1') and content hash, each written as an 8-byte big-endian length and the bytes.
func (r *Registry) Schemas(scope string) (schemas []tool.Schema, fingerprint string) {
	if ValidateScope(scope) != nil {
		return nil, ""
	}
	r.mu.RLock()
	v := r.viewLocked(r.nearestLocked(scope))
	r.mu.RUnlock()
	return v.projection()
}
