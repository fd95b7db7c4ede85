package registry

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/toolsd/toolsd/internal/tool"
)

// Registry holds scoped tool definitions. It is safe for concurrent use; lookups take a
// read lock and walk at most one node per scope level.
type Registry struct {
	opts options
	log  *zap.Logger

	mu sync.RWMutex
	// seq counts changes (Change.Seq).
	seq uint64
	// root is the global scope's node; it always exists.
	root *node
	// nodes holds every scope with registrations, quarantined tools or restrictions.
	nodes map[string]*node
	// below holds, for every proper ancestor of a non-root node's scope, its child scopes
	// that are nodes or lead down to one: a new or dropped node finds the nodes whose
	// nearest ancestor changes without visiting every node.
	below        map[string]map[string]struct{}
	restrictions map[string]*restriction
	restricted   int                           // names the live restrictions list, allow and deny lists together
	owners       map[string]map[toolKey]*Entry // non-operator owners only
	ntools       int                           // visible-eligible registrations
	names        map[string]int                // registrations (visible or quarantined) per tool name
	pins         *pinStore                     // nil with PinOff
	sets         map[string]*ToolSet
	setsOf       map[string]map[*ToolSet]struct{}     // live sets per owner (ToolSet.owner other than "")
	historySets  map[string]map[*ToolSet]struct{}     // live sets whose conditions read their session's history, per session id
	setGroups    map[string]map[setGroupKey]*setGroup // the sets by tenant root and visible list
	ended        endedSets                            // why recently ended sets ended
	// fullSweep is when (clock UnixNano) a resolution at MaxToolSets last swept every
	// set for expired ones.
	fullSweep int64

	delivery delivery
	subs     subscribers
}

type toolKey struct{ scope, name string }

// node is one scope that holds state. Scopes without a node inherit their nearest
// ancestor node's view unchanged.
type node struct {
	scope string
	// parent is the nearest ancestor node (nil for the root).
	parent       *node
	tools        map[string]*Entry
	quarantined  map[string]*Entry
	restrictions []*restriction
	// ver increases whenever tools, restrictions or parent change; cached views record it.
	ver  uint64
	view viewCache
}

func (n *node) empty() bool {
	return n.parent != nil && len(n.tools) == 0 && len(n.quarantined) == 0 && len(n.restrictions) == 0
}

// New returns an empty registry.
func New(opts ...Option) *Registry {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	root := &node{scope: "", tools: map[string]*Entry{}, quarantined: map[string]*Entry{}}
	r := &Registry{
		opts:         o,
		log:          o.log,
		root:         root,
		nodes:        map[string]*node{"": root},
		below:        map[string]map[string]struct{}{},
		restrictions: map[string]*restriction{},
		owners:       map[string]map[toolKey]*Entry{},
		names:        map[string]int{},
		sets:         map[string]*ToolSet{},
		setsOf:       map[string]map[*ToolSet]struct{}{},
		historySets:  map[string]map[*ToolSet]struct{}{},
		setGroups:    map[string]map[setGroupKey]*setGroup{},
	}
	r.delivery.cond = sync.NewCond(&r.delivery.mu)
	if o.pin != PinOff {
		r.pins = newPinStore(MaxPins)
		for _, p := range o.pinned {
			r.pins.put(toolKey{p.Scope, p.Name}, p.Hash)
		}
	}
	return r
}

// Register adds def to scope on behalf of owner ("" is the operator). The definition is
// validated and its schemas and condition compiled before anything changes. A second
// registration of a name in one scope fails with [ErrAlreadyExists]: nothing is ever
// overwritten. With pinning, a changed hash is refused ([ErrPinMismatch]) or
// quarantined (the entry is returned but stays hidden).
func (r *Registry) Register(scope string, def tool.Definition, owner string) (*Entry, error) {
	if err := ValidateScope(scope); err != nil {
		return nil, err
	}
	e, err := newEntry(scope, def, owner, &r.opts)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	change, err := r.insertLocked(e)
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.unlockAndNotify([]Change{change})
	return e, nil
}

// insertLocked applies the duplicate, capacity and pin rules and stores e.
func (r *Registry) insertLocked(e *Entry) (Change, error) {
	scope, owner := e.scope, e.owner
	key := toolKey{scope, e.def.Name}
	n := r.nodes[scope]
	if n != nil && (n.tools[key.name] != nil || n.quarantined[key.name] != nil) {
		return Change{}, fmt.Errorf("%w: tool %s in scope %s", ErrAlreadyExists, quoteName(key.name), quoteName(scope))
	}
	if err := r.checkCapacityLocked(n, owner); err != nil {
		return Change{}, err
	}
	quarantine := false
	if r.pins != nil {
		if pinned, ok := r.pins.get(key); ok && pinned != e.hash {
			if r.opts.pin == PinRefuse {
				// At debug: the caller logs the refusal (the broker, bounded per stream) or
				// returns it, and a provider may send changed registrations without end.
				r.log.Debug("tool registration refused: hash differs from pin",
					zap.String("scope", scope), zap.String("tool", key.name), zap.String("owner", owner),
					zap.String("pinned_hash", pinned), zap.String("hash", e.hash))
				return Change{}, fmt.Errorf("%w: tool %s in scope %s has hash %s, pinned %s",
					ErrPinMismatch, quoteName(key.name), quoteName(scope), e.hash, pinned)
			}
			quarantine = true
		} else {
			r.pins.put(key, e.hash)
		}
	}
	old := visibleEntryLocked(r.nearestLocked(scope), key.name) // what scope saw before
	if n == nil {
		n = r.addNodeLocked(scope)
	}
	if owner != "" {
		if r.owners[owner] == nil {
			r.owners[owner] = map[toolKey]*Entry{}
		}
		r.owners[owner][key] = e
	}
	r.names[key.name]++
	r.seq++
	change := Change{Seq: r.seq, Scope: scope, Name: key.name, Entry: e}
	if quarantine {
		n.quarantined[key.name] = e
		change.Kind = ChangeQuarantined
		r.logQuarantineLocked(key, owner, e.hash)
		return change, nil
	}
	n.tools[key.name] = e
	n.ver++
	r.ntools++
	change.Kind = ChangeRegistered
	r.invalidateSetsForNameLocked(scope, key.name, old)
	r.log.Debug("tool registered",
		zap.String("scope", scope), zap.String("tool", key.name), zap.String("owner", owner), zap.String("hash", e.hash))
	return change, nil
}

// logQuarantineLocked logs a quarantined registration at warn, or at debug when its hash
// is the one last held back against the tool's pin: a provider reconnecting with the
// same changed definition would otherwise write a warning per tool per reconnect.
func (r *Registry) logQuarantineLocked(key toolKey, owner, hash string) {
	level := zap.DebugLevel
	if r.pins.firstQuarantine(key, hash) {
		level = zap.WarnLevel
	}
	r.log.Log(level, "tool quarantined: hash differs from pin",
		zap.String("scope", key.scope), zap.String("tool", key.name), zap.String("owner", owner), zap.String("hash", hash))
}

func (r *Registry) checkCapacityLocked(n *node, owner string) error {
	lim := r.opts.limits
	if n != nil && len(n.tools)+len(n.quarantined) >= lim.MaxToolsPerScope {
		return fmt.Errorf("%w: scope %s already holds %d tools", ErrLimit, quoteName(n.scope), lim.MaxToolsPerScope)
	}
	if owner != "" && len(r.owners[owner]) >= lim.MaxToolsPerOwner {
		return fmt.Errorf("%w: owner %s already registered %d tools", ErrLimit, quoteName(owner), lim.MaxToolsPerOwner)
	}
	return nil
}

// Unregister removes the registration (visible or quarantined) of name in scope. The
// operator (owner "") may remove anything; any other owner only its own tools
// ([ErrNotOwner]). The tool's pin is kept.
func (r *Registry) Unregister(scope, name, owner string) error {
	if err := ValidateScope(scope); err != nil {
		return err
	}
	r.mu.Lock()
	var e *Entry
	if n := r.nodes[scope]; n != nil {
		e = n.tools[name]
		if e == nil {
			e = n.quarantined[name]
		}
	}
	if e == nil {
		r.mu.Unlock()
		return &unknownToolError{name: name, scope: &scope}
	}
	if owner != "" && e.owner != owner {
		r.mu.Unlock()
		return fmt.Errorf("%w: tool %s in scope %s", ErrNotOwner, quoteName(name), quoteName(scope))
	}
	change := r.removeLocked(e)
	r.unlockAndNotify([]Change{change})
	return nil
}

// RemoveOwner drops every registration of owner (a provider whose stream ended) and
// returns them. The operator's tools ("") are never removed this way.
func (r *Registry) RemoveOwner(owner string) []*Entry {
	if owner == "" {
		return nil
	}
	r.mu.Lock()
	owned := r.owners[owner]
	removed := make([]*Entry, 0, len(owned))
	for _, e := range owned {
		removed = append(removed, e)
	}
	slices.SortFunc(removed, func(a, b *Entry) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.def.Name, b.def.Name))
	})
	changes := make([]Change, 0, len(removed))
	for _, e := range removed {
		changes = append(changes, r.removeLocked(e))
	}
	if len(removed) > 0 {
		r.log.Info("owner's tools removed", zap.String("owner", owner), zap.Int("tools", len(removed)))
	}
	r.unlockAndNotify(changes)
	return removed
}

// removeLocked deletes a registration that is known to be present.
func (r *Registry) removeLocked(e *Entry) Change {
	n := r.nodes[e.scope]
	key := toolKey{e.scope, e.def.Name}
	if n.tools[key.name] == e {
		delete(n.tools, key.name)
		n.ver++
		r.ntools--
		r.invalidateSetsForNameLocked(e.scope, key.name, e)
	} else {
		delete(n.quarantined, key.name)
	}
	if r.names[key.name]--; r.names[key.name] == 0 {
		delete(r.names, key.name)
	}
	if e.owner != "" {
		delete(r.owners[e.owner], key)
		if len(r.owners[e.owner]) == 0 {
			delete(r.owners, e.owner)
		}
	}
	r.dropNodeIfEmptyLocked(n)
	r.seq++
	r.log.Debug("tool unregistered", zap.String("scope", e.scope), zap.String("tool", key.name), zap.String("owner", e.owner))
	return Change{Kind: ChangeUnregistered, Seq: r.seq, Scope: e.scope, Name: key.name, Entry: e}
}

// Count returns the number of registrations (quarantined ones excluded) and of scopes
// holding at least one.
func (r *Registry) Count() (tools, scopes int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, n := range r.nodes {
		if len(n.tools) > 0 {
			scopes++
		}
	}
	return r.ntools, scopes
}

// Registered reports whether some scope holds a registration of name, visible or
// quarantined. A [ChangeUnregistered] subscriber calls it to learn that a name is gone
// everywhere, for example to drop the name's metrics.
func (r *Registry) Registered(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.names[name] > 0
}

// addNodeLocked creates the node of scope and adopts existing descendant nodes whose
// nearest ancestor it now is.
func (r *Registry) addNodeLocked(scope string) *node {
	n := &node{scope: scope, tools: map[string]*Entry{}, quarantined: map[string]*Entry{}}
	n.parent = r.nearestLocked(parentScope(scope))
	r.eachNodeBelowLocked(scope, func(d *node) {
		d.parent = n
		d.ver++
	})
	r.nodes[scope] = n
	for s := scope; s != ""; {
		p := parentScope(s)
		kids := r.below[p]
		if kids == nil {
			kids = map[string]struct{}{}
			r.below[p] = kids
		}
		if _, ok := kids[s]; ok {
			break // s already leads to a node: the path above it is recorded
		}
		kids[s] = struct{}{}
		s = p
	}
	return n
}

// dropNodeIfEmptyLocked removes a node that no longer holds anything; its children are
// handed to its parent.
func (r *Registry) dropNodeIfEmptyLocked(n *node) {
	if !n.empty() {
		return
	}
	r.eachNodeBelowLocked(n.scope, func(d *node) {
		d.parent = n.parent
		d.ver++
	})
	delete(r.nodes, n.scope)
	// Forget the path to n unless it still leads to another node.
	for s := n.scope; s != "" && len(r.below[s]) == 0 && r.nodes[s] == nil; {
		p := parentScope(s)
		delete(r.below[p], s)
		if len(r.below[p]) == 0 {
			delete(r.below, p)
		}
		s = p
	}
}

// eachNodeBelowLocked calls f with every node below scope that has no node between
// itself and scope: those whose parent is scope's node, or would be if scope had one.
// f must not add or drop nodes.
func (r *Registry) eachNodeBelowLocked(scope string, f func(*node)) {
	for s := range r.below[scope] {
		if d := r.nodes[s]; d != nil {
			f(d)
		} else {
			r.eachNodeBelowLocked(s, f)
		}
	}
}

// nearestLocked returns the node of scope or of its nearest ancestor that has one.
func (r *Registry) nearestLocked(scope string) *node {
	for {
		if n := r.nodes[scope]; n != nil {
			return n
		}
		if scope == "" {
			return r.root
		}
		scope = parentScope(scope)
	}
}

// OwnedTool is one registration of an owner, as [Registry.Owned] lists it.
type OwnedTool struct {
	Scope, Name string
	// Quarantined: held back by [PinQuarantine], invisible until approved.
	Quarantined bool
}

// Owned lists owner's registrations, visible and quarantined, sorted by scope then
// name: whoever made or removed them (the owner's stream, the unary API, an operator, an
// approval), the registry is where they are. The operator's ("") are not listed.
func (r *Registry) Owned(owner string) []OwnedTool {
	r.mu.RLock()
	owned := r.owners[owner]
	out := make([]OwnedTool, 0, len(owned))
	for k, e := range owned {
		out = append(out, OwnedTool{Scope: k.scope, Name: k.name, Quarantined: r.nodes[k.scope].quarantined[k.name] == e})
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b OwnedTool) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Name, b.Name))
	})
	return out
}
