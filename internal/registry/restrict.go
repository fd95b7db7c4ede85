package registry

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"

	"go.uber.org/zap"
)

// restriction is one allow/deny mask placed on a scope. It filters only the tools the
// scope inherits; masks on one scope intersect.
type restriction struct {
	id          string
	scope       string
	allow, deny map[string]struct{} // allow nil: no allow mask
	allowList   []string
	denyList    []string
}

// names is how many names the restriction lists, allow and deny lists together.
func (m *restriction) names() int { return len(m.allowList) + len(m.denyList) }

// admits reports whether an inherited tool passes the mask. The reserved run_code
// transport always passes: it cannot be restricted directly.
func (m *restriction) admits(name string) bool {
	if name == ReservedRunCode {
		return true
	}
	if m.allow != nil {
		if _, ok := m.allow[name]; !ok {
			return false
		}
	}
	_, denied := m.deny[name]
	return !denied
}

// Restrict places a mask on scope's inherited tools: with allow, only the listed names
// survive; with deny, the listed names are dropped; both may be given. The scope's own
// registrations are never filtered. An empty allow list means "no allow mask", so a
// restriction with neither list is rejected, as are the global scope (it inherits
// nothing) and any mention of run_code. Tool sets resolved for scope or a descendant are
// invalidated. The returned id lifts the mask with [Registry.Unrestrict].
func (r *Registry) Restrict(scope string, allow, deny []string) (id string, err error) {
	if err := ValidateScope(scope); err != nil {
		return "", err
	}
	if scope == "" {
		return "", fmt.Errorf("%w: the global scope inherits nothing and cannot be restricted", ErrInvalidRestriction)
	}
	if len(allow) == 0 && len(deny) == 0 {
		return "", fmt.Errorf("%w: scope %s: a restriction needs an allow or a deny list", ErrInvalidRestriction, quoteName(scope))
	}
	m := &restriction{id: newID("rst_", 8), scope: scope}
	if m.allow, m.allowList, err = nameSet(scope, "allow", allow); err != nil {
		return "", err
	}
	if m.deny, m.denyList, err = nameSet(scope, "deny", deny); err != nil {
		return "", err
	}

	r.mu.Lock()
	n := r.nodes[scope]
	if n != nil && len(n.restrictions) >= maxRestrictionsPerScope {
		r.mu.Unlock()
		return "", fmt.Errorf("%w: scope %s already has %d restrictions", ErrLimit, quoteName(scope), maxRestrictionsPerScope)
	}
	if lim := r.opts.limits.MaxRestrictedNames; r.restricted+m.names() > lim {
		held := r.restricted
		r.mu.Unlock()
		return "", fmt.Errorf("%w: scope %s: the restrictions in place list %d names, and all of them may list at most %d; lift some first",
			ErrLimit, quoteName(scope), held, lim)
	}
	r.restricted += m.names()
	if n == nil {
		n = r.addNodeLocked(scope)
	}
	n.restrictions = append(n.restrictions, m)
	n.ver++
	r.restrictions[m.id] = m
	r.invalidateSetsUnderLocked(scope)
	r.seq++
	change := Change{Kind: ChangeRestricted, Seq: r.seq, Scope: scope, RestrictionID: m.id,
		Allow: slices.Clone(m.allowList), Deny: slices.Clone(m.denyList)}
	r.log.Info("scope restricted", zap.String("scope", scope), zap.String("restriction", m.id),
		zap.Strings("allow", m.allowList), zap.Strings("deny", m.denyList))
	r.unlockAndNotify([]Change{change})
	return m.id, nil
}

// listNameError is a restriction list holding a name no tool may have. It matches
// [ErrInvalidName] as well as [ErrInvalidRestriction], and its text names the registry
// once: wrapping [ValidateName]'s error whole read "list: registry: invalid tool name".
type listNameError struct{ msg string }

func (e *listNameError) Error() string   { return e.msg }
func (e *listNameError) Unwrap() []error { return []error{ErrInvalidRestriction, ErrInvalidName} }

// nameSet validates a restriction list and returns it as a set (nil when empty) and as
// a sorted, deduplicated list.
func nameSet(scope, which string, names []string) (map[string]struct{}, []string, error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	if len(names) > maxRestrictionNames {
		return nil, nil, fmt.Errorf("%w: scope %s: %s list has %d names, over the limit of %d",
			ErrLimit, quoteName(scope), which, len(names), maxRestrictionNames)
	}
	set := make(map[string]struct{}, len(names))
	for _, name := range names {
		if name == ReservedRunCode {
			return nil, nil, fmt.Errorf("%w: scope %s: %s list names the reserved %q transport; restrict the tools it reaches instead",
				ErrInvalidRestriction, quoteName(scope), which, ReservedRunCode)
		}
		if p := nameProblem(name); p != "" {
			return nil, nil, &listNameError{msg: fmt.Sprintf("%v: scope %s: %s list: invalid tool name%s", ErrInvalidRestriction, quoteName(scope), which, p)}
		}
		set[name] = struct{}{}
	}
	list := make([]string, 0, len(set))
	for name := range set {
		list = append(list, name)
	}
	slices.Sort(list)
	return set, list, nil
}

// RestrictionScope returns the scope restriction id masks; ok is false when there is no
// such restriction.
func (r *Registry) RestrictionScope(id string) (scope string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.restrictions[id]; m != nil {
		return m.scope, true
	}
	return "", false
}

// Unrestrict lifts a restriction. Tool sets stay valid: lifting a mask only makes more
// tools visible to later resolutions.
func (r *Registry) Unrestrict(id string) error {
	r.mu.Lock()
	m := r.restrictions[id]
	if m == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w %s", ErrUnknownRestriction, quoteName(id))
	}
	delete(r.restrictions, id)
	r.restricted -= m.names()
	n := r.nodes[m.scope]
	n.restrictions = slices.DeleteFunc(n.restrictions, func(x *restriction) bool { return x == m })
	n.ver++
	r.dropNodeIfEmptyLocked(n)
	r.seq++
	change := Change{Kind: ChangeUnrestricted, Seq: r.seq, Scope: m.scope, RestrictionID: id,
		Allow: slices.Clone(m.allowList), Deny: slices.Clone(m.denyList)}
	r.log.Info("scope restriction lifted", zap.String("scope", m.scope), zap.String("restriction", id))
	r.unlockAndNotify([]Change{change})
	return nil
}

// newID returns prefix followed by n random bytes in hex.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}
