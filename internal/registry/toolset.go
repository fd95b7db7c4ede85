package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/toolsd/toolsd/internal/tool"
)

// ToolSet is one step's resolved tools: the scope's visible unconditional tools plus the
// conditional ones whose condition held, pinned to the exact entries seen at resolution.
// The same set serves the step's prompt schemas and every call of its batch. It stops
// admitting anything once released, idle for longer than the configured idle time, or
// invalidated: by a new restriction on its scope or an ancestor, or by the removal or
// replacement of one of its admitted tools; or once the session whose history its
// conditions read is deleted ([Registry.EndSessionToolSets]).
type ToolSet struct {
	r     *Registry
	id    string
	scope string
	// session is the session whose history the conditions read ("" for none).
	session string
	// readsHistory is whether a condition evaluated for the set reads the session's
	// history (calls session.called or session.succeeded).
	readsHistory bool
	// turn and step are the step the set was resolved for: its batch must be that step's.
	turn, step uint64
	owner      string    // counted in Registry.setsOf while live
	group      *setGroup // while in Registry.sets
	// entries is the resolving view's visible list (sorted, shared, immutable).
	entries []*Entry
	// admitted holds the conditional entries whose condition was true.
	admitted    map[string]*Entry
	schemas     []tool.Schema
	fingerprint string

	lastUsed atomic.Int64 // clock UnixNano
	holds    atomic.Int32 // batches running with the set; a held set does not expire
	state    atomic.Int32
	// ended, once [ToolSet.Ended] made it (under r.mu), is closed as the set is dropped.
	ended chan struct{}
}

// Tool-set states.
const (
	setLive int32 = iota
	setReleased
	setExpired
	setInvalidated
	setSessionDeleted // see [Registry.EndSessionToolSets]
)

// maxResolveAttempts bounds retries when the registry changes under a resolution.
const maxResolveAttempts = 3

// errLockedBudget ends a resolution's evaluation under the write lock at its budget.
var errLockedBudget = errors.New("registry: locked resolution over its budget")

// ID returns the set's opaque identifier.
func (ts *ToolSet) ID() string { return ts.id }

// Scope returns the scope the set was resolved for.
func (ts *ToolSet) Scope() string { return ts.scope }

// Session returns the session whose history the set's conditions read, "" when it was
// resolved without one.
func (ts *ToolSet) Session() string { return ts.session }

// ReadsHistory reports whether a condition evaluated for the set reads the session's
// history. Resolved without a session, such a set judged an empty history: it may
// admit a tool the session's own history excludes (a one-shot tool already called).
func (ts *ToolSet) ReadsHistory() bool { return ts.readsHistory }

// Turn returns the turn the set was resolved for.
func (ts *ToolSet) Turn() uint64 { return ts.turn }

// Step returns the step (within [ToolSet.Turn]) the set was resolved for: conditions
// read that step's numbers, so the set governs that step's batch and no other.
func (ts *ToolSet) Step() uint64 { return ts.step }

// Lookup resolves name within the set. Names the set did not admit get the same error as
// [Registry.Lookup] ([tool.ErrUnknownTool]); a released, expired or invalidated set
// answers [tool.ErrToolSetGone] for every name.
func (ts *ToolSet) Lookup(name string) (*Entry, error) {
	if err := ts.use(); err != nil {
		return nil, err
	}
	if e := ts.entry(name); e != nil {
		return e, nil
	}
	return nil, errUnknownTool(name)
}

// Schemas returns the set's model-facing schemas (unconditional and admitted conditional
// tools, sorted by name) and their fingerprint. They stay as resolved even after the set
// is gone; the slice is shared and must not be modified.
func (ts *ToolSet) Schemas() ([]tool.Schema, string) {
	_ = ts.use()
	return ts.schemas, ts.fingerprint
}

func (ts *ToolSet) entry(name string) *Entry {
	i, ok := slices.BinarySearchFunc(ts.entries, name, func(e *Entry, n string) int {
		return strings.Compare(e.def.Name, n)
	})
	if !ok {
		return nil
	}
	e := ts.entries[i]
	if e.cond != nil && ts.admitted[name] != e {
		return nil
	}
	return e
}

// Ended returns a channel that is closed once the set has ended and the registry has
// dropped it: as it is released or invalidated, or at the first sweep
// ([Registry.SweepToolSets]) after it expired; [ToolSet.Err] then says why. Watching it
// does not count as a use. The channel is made on the first call, so sets nobody
// watches cost nothing more.
func (ts *ToolSet) Ended() <-chan struct{} {
	ts.r.mu.Lock()
	defer ts.r.mu.Unlock()
	if ts.ended == nil {
		ts.ended = make(chan struct{})
		if ts.r.sets[ts.id] != ts { // dropped already
			close(ts.ended)
		}
	}
	return ts.ended
}

// Err returns nil while the set has not ended, and once it has the error its lookups
// fail with (wrapping [tool.ErrToolSetGone]), saying why it ended. It does not count as
// a use: a set idle past its time reads as live until it is used or swept.
func (ts *ToolSet) Err() error {
	if s := ts.state.Load(); s != setLive {
		return &toolSetGoneError{id: ts.id, state: s}
	}
	return nil
}

// Hold keeps the set from expiring while a batch runs with it, however long its calls
// take between lookups; the returned release ends the hold (once, however often it is
// called) and counts as a use. A held set still ends when released or invalidated.
func (ts *ToolSet) Hold() (release func()) {
	ts.holds.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			ts.lastUsed.Store(ts.r.opts.clock().UnixNano())
			ts.holds.Add(-1)
		})
	}
}

// idle reports whether the set is unheld and has not been used for longer than the
// idle time at now (UnixNano).
func (ts *ToolSet) idle(now int64) bool {
	return ts.holds.Load() == 0 && now-ts.lastUsed.Load() > int64(ts.r.opts.idle)
}

// use fails if the set is gone (expiring it if it has been idle too long) and otherwise
// marks it used now.
func (ts *ToolSet) use() error {
	now := ts.r.opts.clock().UnixNano()
	if ts.state.Load() == setLive && ts.idle(now) {
		ts.state.CompareAndSwap(setLive, setExpired)
	}
	if s := ts.state.Load(); s != setLive {
		return &toolSetGoneError{id: ts.id, state: s}
	}
	ts.lastUsed.Store(now)
	return nil
}

type toolSetGoneError struct {
	id    string
	state int32 // setLive here means "unknown id"
}

func (e *toolSetGoneError) Error() string {
	why := "is unknown"
	switch e.state {
	case setReleased:
		why = "was released"
	case setExpired:
		why = "expired after being idle"
	case setInvalidated:
		why = "was invalidated by a registry change"
	case setSessionDeleted:
		why = "ended as its session was deleted (resolve a new one)"
	}
	return "registry: tool set " + quoteName(e.id) + " " + why
}

func (e *toolSetGoneError) Unwrap() error { return tool.ErrToolSetGone }

// ResolveToolSet evaluates, once, the condition of every visible conditional tool of
// scope against env and returns the step's tool set. A failing condition (including an
// exceeded cost limit) fails the whole resolution with [ErrActivationFailed] naming the
// tool; ctx cancellation is returned as such.
func (r *Registry) ResolveToolSet(ctx context.Context, scope string, env ConditionEnv) (*ToolSet, error) {
	if err := ValidateScope(scope); err != nil {
		return nil, err
	}
	for range maxResolveAttempts {
		r.mu.RLock()
		v := r.viewLocked(r.nearestLocked(scope))
		r.mu.RUnlock()

		admitted, readsHistory, err := evaluate(ctx, scope, v, env)
		if err != nil {
			return nil, err
		}
		ts := r.newToolSet(scope, v, admitted)
		ts.readsHistory = readsHistory
		ts.owner, ts.session = env.Owner, env.SessionID
		ts.turn, ts.step = env.Turn, env.Step

		r.mu.Lock()
		if err := r.checkSetLimitsLocked(ts.owner); err != nil {
			r.mu.Unlock()
			return nil, err
		}
		if r.stillCurrentLocked(ts, v) {
			r.addSetLocked(ts)
			r.mu.Unlock()
			return ts, nil
		}
		r.mu.Unlock()
	}
	// The registry changed under every attempt (providers registering without pause):
	// the last one evaluates under the write lock, so that a resolution ends. That
	// stops every lookup and change of every tenant while it runs, and conditions are
	// bounded one by one, not together: the attempt gives up with ErrBusy past its
	// budget rather than hold the registry for as long as a scope's conditions take.
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkSetLimitsLocked(env.Owner); err != nil {
		return nil, err
	}
	v := r.viewLocked(r.nearestLocked(scope))
	lctx, cancel := context.WithTimeoutCause(ctx, r.opts.lockedBudget, errLockedBudget)
	defer cancel()
	admitted, readsHistory, err := evaluate(lctx, scope, v, env)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(lctx), errLockedBudget) {
		return nil, fmt.Errorf("%w: scope %s: its tools kept changing while its conditions were evaluated, which takes longer than the registry may be held (%v); retry",
			ErrBusy, quoteName(scope), r.opts.lockedBudget)
	}
	if err != nil {
		return nil, err
	}
	ts := r.newToolSet(scope, v, admitted)
	ts.readsHistory = readsHistory
	ts.owner, ts.session = env.Owner, env.SessionID
	ts.turn, ts.step = env.Turn, env.Step
	r.addSetLocked(ts)
	return ts, nil
}

// fullSweepEvery is how often, at most, a resolution refused at MaxToolSets first
// sweeps every set for expired ones: a sweep visits all of them under the write lock.
const fullSweepEvery = time.Second

// checkSetLimitsLocked refuses a new set past the registry's or its owner's limit. Sets
// idle past the idle time have expired, even those no sweep has dropped yet: at a limit,
// they are dropped first (the owner's own at once; every set at most once every
// fullSweepEvery), so that they do not hold places that letting them expire frees.
func (r *Registry) checkSetLimitsLocked(owner string) error {
	if len(r.sets) >= r.opts.limits.MaxToolSets {
		if now := r.opts.clock().UnixNano(); now-r.fullSweep >= int64(fullSweepEvery) {
			r.fullSweep = now
			r.sweepLocked(now)
		}
	}
	if len(r.sets) >= r.opts.limits.MaxToolSets {
		return fmt.Errorf("%w: %d live tool sets", ErrLimit, r.opts.limits.MaxToolSets)
	}
	if owner == "" {
		return nil
	}
	if len(r.setsOf[owner]) >= r.opts.limits.MaxToolSetsPerOwner {
		now := r.opts.clock().UnixNano()
		for ts := range r.setsOf[owner] {
			r.dropIfEndedLocked(ts, now)
		}
	}
	if n := len(r.setsOf[owner]); n >= r.opts.limits.MaxToolSetsPerOwner {
		return fmt.Errorf("%w: %d live tool sets of %s (release them, or let them expire)", ErrLimit, n, quoteName(owner))
	}
	return nil
}

// evaluate runs the condition of every conditional entry of v, and reports whether
// any of them reads the session's history.
func evaluate(ctx context.Context, scope string, v *view, env ConditionEnv) (map[string]*Entry, bool, error) {
	var act cel.Activation
	admitted := map[string]*Entry{}
	readsHistory := false
	for _, e := range v.conditionals() {
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("registry: resolve tool set for scope %s: %w", quoteName(scope), err)
		}
		if act == nil {
			var err error
			if act, err = activation(scope, env); err != nil {
				return nil, false, fmt.Errorf("%w: scope %s: %w", ErrActivationFailed, quoteName(scope), err)
			}
		}
		ok, err := evalCondition(ctx, e, act)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, fmt.Errorf("registry: resolve tool set for scope %s: %w", quoteName(scope), err)
			}
			return nil, false, err
		}
		readsHistory = readsHistory || e.readsHistory
		if ok {
			admitted[e.def.Name] = e
		}
	}
	return admitted, readsHistory, nil
}

func (r *Registry) newToolSet(scope string, v *view, admitted map[string]*Entry) *ToolSet {
	ts := &ToolSet{r: r, id: newID("ts_", 16), scope: scope, entries: v.entries, admitted: admitted}
	ts.schemas, ts.fingerprint = v.setProjection(admitted)
	ts.lastUsed.Store(r.opts.clock().UnixNano())
	return ts
}

// stillCurrentLocked reports whether every entry ts admits is still what its scope
// sees, i.e. nothing the set depends on changed while conditions were evaluated.
func (r *Registry) stillCurrentLocked(ts *ToolSet, v *view) bool {
	n := r.nearestLocked(ts.scope)
	if r.viewLocked(n) == v {
		return true
	}
	for _, e := range ts.entries {
		if (e.cond == nil || ts.admitted[e.def.Name] == e) && visibleEntryLocked(n, e.def.Name) != e {
			return false
		}
	}
	return true
}

// ToolSet returns a live tool set by id; errors wrap [tool.ErrToolSetGone].
func (r *Registry) ToolSet(id string) (*ToolSet, error) { return r.toolSet(id, "", false) }

// ToolSetOf is [Registry.ToolSet] for a caller: a set resolved by another owner (the
// identity in [ConditionEnv.Owner]) is answered as an unknown id, whatever its state.
func (r *Registry) ToolSetOf(id, owner string) (*ToolSet, error) { return r.toolSet(id, owner, true) }

// toolSet looks a set up by id, as owner's when owned is set.
func (r *Registry) toolSet(id, owner string, owned bool) (*ToolSet, error) {
	r.mu.RLock()
	ts := r.sets[id]
	state := r.ended.state(id)
	if owned && ts == nil && state != setLive && r.ended.owner(id) != owner {
		state = setLive // ended, but not the caller's: unknown to it
	}
	r.mu.RUnlock()
	if owned && ts != nil && ts.owner != owner {
		return nil, &toolSetGoneError{id: id}
	}
	if ts == nil {
		return nil, &toolSetGoneError{id: id, state: state}
	}
	if err := ts.use(); err != nil {
		return nil, err
	}
	return ts, nil
}

// ReleaseToolSet ends a tool set (the step's batch settled): unstarted calls can no
// longer use it. Unknown ids fail with [tool.ErrToolSetGone].
func (r *Registry) ReleaseToolSet(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.sets[id]
	if ts == nil {
		return &toolSetGoneError{id: id, state: r.ended.state(id)}
	}
	ts.state.CompareAndSwap(setLive, setReleased)
	r.dropSetLocked(ts)
	return nil
}

// EndSessionToolSets ends the live sets resolved against sessionID whose conditions
// read its history, once the session has been deleted: they judged a history that is
// gone, and the id's next session would run a tool admitted for what the deleted one
// did (their unstarted calls stop, as a released set's do). Sets whose conditions do
// not read the history serve on. It visits only the session's history-reading sets
// (indexed by session), as retention may delete many sessions in one sweep.
func (r *Registry) EndSessionToolSets(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ts := range r.historySets[sessionID] {
		ts.state.CompareAndSwap(setLive, setSessionDeleted)
		r.dropSetLocked(ts) // deletes from the map being ranged over, which range allows
	}
}

// SweepToolSets drops the unheld sets idle for longer than the configured idle time (and
// any already gone) and returns how many it dropped. The caller owns the ticker.
func (r *Registry) SweepToolSets(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sweepLocked(now.UnixNano())
}

// sweepLocked drops the unheld sets idle at now (UnixNano) and any already gone.
func (r *Registry) sweepLocked(now int64) int {
	dropped := 0
	for _, ts := range r.sets {
		if r.dropIfEndedLocked(ts, now) {
			dropped++
		}
	}
	return dropped
}

// dropIfEndedLocked expires ts if it is unheld and idle at now (UnixNano), and drops it
// if it is gone.
func (r *Registry) dropIfEndedLocked(ts *ToolSet, now int64) bool {
	if ts.idle(now) {
		ts.state.CompareAndSwap(setLive, setExpired)
	}
	if ts.state.Load() == setLive {
		return false
	}
	r.dropSetLocked(ts)
	return true
}

// setGroup holds the sets of one tenant root (first scope segment) that were resolved
// from one visible list, which they share as ToolSet.entries; it is dropped with its
// last set. A change finds the sets it may affect through the groups of its scope's
// root whose list holds the changed entry, instead of visiting every set.
type setGroup struct {
	root    string
	key     setGroupKey
	entries []*Entry
	sets    map[*ToolSet]struct{}
}

// setGroupKey identifies a shared visible list: its first element and length.
type setGroupKey struct {
	first **Entry // nil for an empty list
	n     int
}

// tenantRoot returns scope's first segment; every scope within scope shares it.
func tenantRoot(scope string) string {
	if i := strings.IndexByte(scope, '/'); i >= 0 {
		return scope[:i]
	}
	return scope
}

// addSetLocked makes ts live: known by id, counted for its owner and indexed.
func (r *Registry) addSetLocked(ts *ToolSet) {
	r.sets[ts.id] = ts
	if ts.owner != "" {
		addToIndex(r.setsOf, ts.owner, ts)
	}
	if ts.readsHistory {
		addToIndex(r.historySets, ts.session, ts)
	}
	root := tenantRoot(ts.scope)
	key := setGroupKey{n: len(ts.entries)}
	if key.n > 0 {
		key.first = &ts.entries[0]
	}
	groups := r.setGroups[root]
	if groups == nil {
		groups = map[setGroupKey]*setGroup{}
		r.setGroups[root] = groups
	}
	g := groups[key]
	if g == nil {
		g = &setGroup{root: root, key: key, entries: ts.entries, sets: map[*ToolSet]struct{}{}}
		groups[key] = g
	}
	g.sets[ts] = struct{}{}
	ts.group = g
}

// eachGroupWithinLocked calls f with every group that may hold sets resolved for scope
// or a descendant: those of scope's tenant root, or all of them for the global scope.
// f may drop sets.
func (r *Registry) eachGroupWithinLocked(scope string, f func(*setGroup)) {
	if scope != "" {
		for _, g := range r.setGroups[tenantRoot(scope)] {
			f(g)
		}
		return
	}
	for _, groups := range r.setGroups {
		for _, g := range groups {
			f(g)
		}
	}
}

// invalidateSetsForNameLocked invalidates the sets at or below scope that admitted name
// when their scope no longer sees that exact entry. old is the entry scope itself saw
// for name before the change (nil: none). Every set in r.sets admitted only entries its
// scope still sees (each change ends the sets it makes stale), and a set within scope
// sees name either from below scope, which the change leaves alone, or as scope saw it:
// only sets that admitted old can be affected. Without old there is nothing to do;
// otherwise only the groups whose visible list holds old are visited.
func (r *Registry) invalidateSetsForNameLocked(scope, name string, old *Entry) {
	if old == nil {
		return
	}
	r.eachGroupWithinLocked(scope, func(g *setGroup) {
		if i, ok := slices.BinarySearchFunc(g.entries, name, func(e *Entry, n string) int {
			return strings.Compare(e.def.Name, n)
		}); !ok || g.entries[i] != old {
			return
		}
		for ts := range g.sets {
			if !within(ts.scope, scope) {
				continue
			}
			admitted := ts.entry(name)
			if admitted == nil || visibleEntryLocked(r.nearestLocked(ts.scope), name) == admitted {
				continue
			}
			ts.state.CompareAndSwap(setLive, setInvalidated)
			r.dropSetLocked(ts)
		}
	})
}

// invalidateSetsUnderLocked invalidates every set resolved for scope or a descendant.
func (r *Registry) invalidateSetsUnderLocked(scope string) {
	r.eachGroupWithinLocked(scope, func(g *setGroup) {
		for ts := range g.sets {
			if within(ts.scope, scope) {
				ts.state.CompareAndSwap(setLive, setInvalidated)
				r.dropSetLocked(ts)
			}
		}
	})
}

// dropSetLocked removes an ended set, remembering why it ended: the calls still
// naming it find it by id, and their results should say released or invalidated.
func (r *Registry) dropSetLocked(ts *ToolSet) {
	delete(r.sets, ts.id)
	if ts.ended != nil {
		close(ts.ended)
	}
	r.ended.add(ts.id, ts.state.Load(), ts.owner)
	if ts.owner != "" {
		removeFromIndex(r.setsOf, ts.owner, ts)
	}
	if ts.readsHistory {
		removeFromIndex(r.historySets, ts.session, ts)
	}
	g := ts.group
	ts.group = nil
	delete(g.sets, ts)
	if len(g.sets) == 0 {
		groups := r.setGroups[g.root]
		delete(groups, g.key)
		if len(groups) == 0 {
			delete(r.setGroups, g.root)
		}
	}
}

// addToIndex files ts under key in index.
func addToIndex(index map[string]map[*ToolSet]struct{}, key string, ts *ToolSet) {
	sets := index[key]
	if sets == nil {
		sets = map[*ToolSet]struct{}{}
		index[key] = sets
	}
	sets[ts] = struct{}{}
}

// removeFromIndex removes ts from under key in index, and key once it holds none.
func removeFromIndex(index map[string]map[*ToolSet]struct{}, key string, ts *ToolSet) {
	if sets := index[key]; sets != nil {
		delete(sets, ts)
		if len(sets) == 0 {
			delete(index, key)
		}
	}
}

// maxEndedSets bounds [endedSets]; an id forgotten since reads as unknown.
const maxEndedSets = 4096

// endedSets remembers the final state of the most recently ended sets, oldest
// forgotten first.
type endedSets struct {
	byID  map[string]endedSet
	order []string // a ring of at most maxEndedSets ids
	next  int
}

type endedSet struct {
	state int32
	owner string
}

func (s *endedSets) state(id string) int32 { return s.byID[id].state } // setLive: unknown

func (s *endedSets) owner(id string) string { return s.byID[id].owner }

func (s *endedSets) add(id string, state int32, owner string) {
	if s.byID == nil {
		s.byID = make(map[string]endedSet)
	}
	if len(s.order) < maxEndedSets {
		s.order = append(s.order, id)
	} else {
		delete(s.byID, s.order[s.next])
		s.order[s.next] = id
		s.next = (s.next + 1) % maxEndedSets
	}
	s.byID[id] = endedSet{state: state, owner: owner}
}
