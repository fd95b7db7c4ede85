package auth

import (
	"context"
	"sync/atomic"

	"go.uber.org/zap"
)

// Authorizer decides what an authenticated identity may do, from the grants of the
// configuration. Its rules:
//
//   - agent: [ReadTools] and [Execute] in its scopes; [ReadSession] of the sessions it
//     owns while a grant of its still covers [Execute] in the scope the session was
//     claimed in. A session is owned by the identity that first executes a batch in it;
//     an agent can neither execute in nor read another identity's session, nor its own
//     once no grant of its covers the scope the session was claimed in.
//   - provider: [Register] into its scopes only. Calls of a scope resolve only the tools
//     visible there (its own and its ancestors'), so a provider confined to its
//     tenant's scopes can neither register into, shadow, nor receive the calls of another
//     tenant. The global scope "" is the exception, being every scope's ancestor: a tool
//     registered there is visible to every tenant. Only an operator, or a provider whose
//     grant names "" explicitly, may register there; "**" does not imply it.
//   - hook: [Subscribe] to the calls of its scopes, with the same explicit-"" rule (a
//     hook on the global scope would see every tenant's calls).
//   - operator: every action in its scopes (all scopes when its grant lists none),
//     including other identities' sessions.
//
// Scope globs are matched per "/" segment with [path.Match]; a trailing "/**" covers
// the scope before it and all its descendants ("tenant-a/**" covers "tenant-a" and
// "tenant-a/x/y"), and "**" alone covers every scope. Identity patterns are
// [path.Match] globs too ("agent-*"). With authentication off everything is allowed.
//
// Its grants are replaced whole by [Authorizer.ReplaceGrants], as a reload does. A
// unary RPC is checked against the grants in force when it is; a stream against those
// in force when it opened, for its whole life (see [Authorizer.PinGrants]).
type Authorizer struct {
	enabled bool
	// inForce is read once per check, or once per stream as it opens (PinGrants).
	inForce atomic.Pointer[grantSet]
	owners  *ownership
	log     *zap.Logger
}

// grantSet is one configuration's compiled grants; a reload replaces it whole, never
// changes it.
type grantSet struct{ all []grant }

func newAuthorizer(enabled bool, grants []grant, o options) *Authorizer {
	z := &Authorizer{enabled: enabled, owners: newOwnership(o.maxOwnedSessions, o.owners), log: o.logger}
	z.inForce.Store(&grantSet{all: grants})
	return z
}

// Enabled reports whether anything is ever refused.
func (z *Authorizer) Enabled() bool { return z.enabled }

// ReplaceGrants makes next's grants the ones z checks from its next check on: next is
// built by [New] from a reloaded configuration, so an identity whose grant was removed
// is refused from its next RPC and one granted a scope acts there from its next RPC.
// The session owners z knows stay; next's are not looked at. A stream that opened
// before keeps the grants it was pinned ([Authorizer.PinGrants]). Whether anything is
// refused at all is z's for good: a next that differs is refused, and z keeps its
// grants.
func (z *Authorizer) ReplaceGrants(next *Authorizer) error {
	if next.enabled != z.enabled {
		return configError("turning authorization on or off takes a restart")
	}
	z.inForce.Store(next.inForce.Load())
	return nil
}

// PinGrants returns ctx carrying the grants in force now: every check of the caller in
// ctx, or in a context derived from it, uses them from then on, whatever grants a later
// reload puts in force. [Authorizer.StreamServerInterceptor] pins each stream as it
// opens, so that a stream keeps what it was authorized with at its open (a provider's
// registrations, a hook's scopes, a WatchSession's checks of each event) until it ends,
// as a stream is authenticated once, when it opens. ctx must carry the caller's
// [Identity] already; without one, or with authorization off, ctx is returned as is.
func (z *Authorizer) PinGrants(ctx context.Context) context.Context {
	if !z.enabled {
		return ctx
	}
	id, ok := FromContext(ctx)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, identityKey{}, pinnedIdentity{id: id, by: z, grants: z.inForce.Load()})
}

// caller returns the identity in ctx and the grants to check it against: those pinned
// to ctx by z, else those in force. One context lookup, as for the identity alone.
func (z *Authorizer) caller(ctx context.Context) (Identity, *grantSet, bool) {
	switch v := ctx.Value(identityKey{}).(type) {
	case Identity:
		return v, z.inForce.Load(), true
	case pinnedIdentity:
		if v.by == z {
			return v.id, v.grants, true
		}
		return v.id, z.inForce.Load(), true
	}
	return Identity{}, z.inForce.Load(), false
}

// Authorize decides whether the caller in ctx may perform action on scope (and, for
// [ReadTools], [Execute] and [ReadSession], on sessionID). Execute with a session id
// also claims the session for the caller, so a server calling Authorize before a batch
// needs no separate [Authorizer.ClaimSession]. For ReadSession the scope argument is
// ignored: the session's owner decides. Subscribe takes a concrete scope; filter hook
// deliveries with [Authorizer.ScopeFilter]. Denials are [*DeniedError]s (errors.Is
// [ErrPermissionDenied]); a full ownership table gives [ErrOwnershipFull].
func (z *Authorizer) Authorize(ctx context.Context, action Action, scope, sessionID string) error {
	if !z.enabled {
		return nil
	}
	id, gs, ok := z.caller(ctx)
	if !ok {
		return z.deny(&DeniedError{Action: action, Scope: scope, SessionID: sessionID, Why: "no authenticated identity in the request"})
	}
	switch action {
	case ReadSession:
		return z.readSession(ctx, gs, id.Name, sessionID)
	case Execute, ReadTools:
		if !gs.allowed(id.Name, action, scope) {
			return z.deny(gs.scopeDenial(id.Name, action, scope))
		}
		if sessionID == "" {
			return nil
		}
		return z.useSession(ctx, gs, id.Name, action, scope, sessionID)
	}
	if !gs.allowed(id.Name, action, scope) {
		return z.deny(gs.scopeDenial(id.Name, action, scope))
	}
	return nil
}

// AllowRegister is [Authorizer.Authorize] for [Register]: may the provider in ctx
// register tools into scope?
func (z *Authorizer) AllowRegister(ctx context.Context, scope string) error {
	return z.Authorize(ctx, Register, scope, "")
}

// ScopeFilter returns the scopes in which the caller in ctx may perform action, as a
// predicate. The hook layer takes one when a hook connects and delivers a call of scope
// S only when filter(S) holds, whatever glob the hook subscribed with. It fails when the
// caller may not perform action anywhere. The predicate keeps the grants it was made
// from: a reload does not change it.
func (z *Authorizer) ScopeFilter(ctx context.Context, action Action) (func(scope string) bool, error) {
	if !z.enabled {
		return func(string) bool { return true }, nil
	}
	id, gs, ok := z.caller(ctx)
	if !ok {
		return nil, z.deny(&DeniedError{Action: action, Why: "no authenticated identity in the request"})
	}
	var mine []*grant
	for i := range gs.all {
		if g := &gs.all[i]; g.names(id.Name) && g.permits(action) {
			mine = append(mine, g)
		}
	}
	if len(mine) == 0 {
		return nil, z.deny(&DeniedError{Identity: id.Name, Action: action, Scope: "**", Why: "no grant allows it in any scope"})
	}
	return func(scope string) bool {
		for _, g := range mine {
			if g.covers(action, scope) {
				return true
			}
		}
		return false
	}, nil
}

// Unconfined reports whether the caller in ctx acts for the operator rather than for a
// tenant: one of its grants for action has "**" (an operator grant without scopes has
// it) or names the global scope "", which every tenant's calls and tools fall back to
// and which no tenant is given. The hook layer keeps such hooks apart from the hooks of
// a tenant, which must not take their places. With authorization off it is true.
func (z *Authorizer) Unconfined(ctx context.Context, action Action) bool {
	if !z.enabled {
		return true
	}
	id, gs, ok := z.caller(ctx)
	if !ok {
		return false
	}
	for i := range gs.all {
		if g := &gs.all[i]; g.names(id.Name) && (g.coversAll(action) || g.covers(action, "")) {
			return true
		}
	}
	return false
}

// ClaimSession makes identity the owner of sessionID unless another identity owns it,
// in which case it fails with [ErrPermissionDenied]. Claiming an owned session again is
// a no-op. [Authorizer.Authorize] for [Execute] claims already.
func (z *Authorizer) ClaimSession(identity, sessionID string) error {
	if !z.enabled {
		return nil
	}
	cur, err := z.owners.claim(context.Background(), sessionID, SessionOwner{Identity: identity})
	if err != nil {
		return err
	}
	if cur.Identity != identity {
		return z.deny(&DeniedError{Identity: identity, Action: Execute, SessionID: sessionID, Why: "the session belongs to another identity"})
	}
	return nil
}

// ForgetSession drops sessionID's owner from the in-memory table; call it when the
// session is deleted (by retention or on request), before a batch may claim the id
// again. Without an [OwnerStore] the table is the record, and the id stays its
// owner's until then. With a store, the store's record decides (the deletion removes
// it with the session) and this drops the cache, which would otherwise go on letting
// the former owner read the free id (as empty), watch it and delete it, where any
// other identity that does not own it is refused.
func (z *Authorizer) ForgetSession(sessionID string) { z.owners.forget(sessionID) }

// OwnedSessions is the size of the ownership table, for metrics.
func (z *Authorizer) OwnedSessions() int { return z.owners.len() }

// useSession checks, for Execute also claims, sessionID for an identity already allowed
// action in scope. Its owner uses it while it may still execute where it was claimed
// (see ownerKeeps): an owner moved to another tenant would otherwise write that
// tenant's calls into the old tenant's session, or resolve tools against its history.
// An operator of scope may use a session someone else owns when it also operates where
// that session was claimed (see operates).
func (z *Authorizer) useSession(ctx context.Context, gs *grantSet, name string, action Action, scope, sessionID string) error {
	var cur SessionOwner
	if action == Execute {
		var err error
		if cur, err = z.owners.claim(ctx, sessionID, SessionOwner{Identity: name, Scope: scope, ScopeKnown: true}); err != nil {
			return err
		}
	} else {
		var ok bool
		var err error
		if cur, ok, err = z.owners.get(ctx, sessionID, func(o SessionOwner) bool { return gs.mayUse(name, action, scope, o) }); err != nil {
			return err
		}
		if !ok {
			return nil // resolving tools before the first batch is normal
		}
	}
	if gs.mayUse(name, action, scope, cur) {
		return nil
	}
	why := "the session belongs to another identity"
	if cur.Identity == name {
		why = lostScope
	}
	return z.deny(&DeniedError{Identity: name, Action: action, Scope: scope, SessionID: sessionID, Why: why})
}

// mayUse reports whether name, allowed action in scope, may use a session owner owns:
// as its owner while it keeps the scope, or as an operator where it was claimed.
func (gs *grantSet) mayUse(name string, action Action, scope string, owner SessionOwner) bool {
	return (owner.Identity == name && gs.ownerKeeps(name, owner)) || (gs.allowedAs(name, RoleOperator, action, scope) && gs.operates(name, action, owner))
}

// lostScope is why an owner is refused its own session (see ownerKeeps). Only the owner
// is told: it owns the session, so this says nothing about which session ids are in use.
const lostScope = "the session is this identity's, but its grants no longer cover the scope the session was claimed in"

// notYours is why a session read is refused, whether the session has another owner or
// none yet.
const notYours = "the session is not this identity's (a session belongs to the identity that first executes a batch in it)"

func (z *Authorizer) readSession(ctx context.Context, gs *grantSet, name, sessionID string) error {
	cur, owned, err := z.owners.get(ctx, sessionID, func(o SessionOwner) bool { return gs.mayRead(name, o) })
	if err != nil {
		return err
	}
	switch {
	case owned && gs.mayRead(name, cur):
		return nil
	case gs.operatorEverywhere(name, ReadSession):
		return nil // an operator of every scope reads every session, owned or not
	case owned && cur.Identity == name:
		return z.deny(&DeniedError{Identity: name, Action: ReadSession, SessionID: sessionID, Why: lostScope})
	}
	// One answer whether the session is another identity's or nobody's yet: a
	// different one would tell any agent which session ids are in use.
	return z.deny(&DeniedError{Identity: name, Action: ReadSession, SessionID: sessionID, Why: notYours})
}

// mayRead reports whether name may read a session owner owns: as its owner while it
// keeps the scope, or as an operator where it was claimed.
func (gs *grantSet) mayRead(name string, owner SessionOwner) bool {
	return (owner.Identity == name && gs.ownerKeeps(name, owner)) || gs.operates(name, ReadSession, owner)
}

// ownerKeeps reports whether name, the owner of a session, still holds a grant that
// lets it execute where the session was claimed (anywhere, when that scope is not
// known). Owning a session is not a grant: an identity whose grants were revoked, or
// moved to another tenant, neither reads nor uses what it ran in the scope it lost.
func (gs *grantSet) ownerKeeps(name string, owner SessionOwner) bool {
	if owner.ScopeKnown {
		return gs.allowed(name, Execute, owner.Scope)
	}
	for i := range gs.all {
		if g := &gs.all[i]; g.names(name) && g.permits(Execute) {
			return true
		}
	}
	return false
}

// operates reports whether name may act as an operator on a session owned by another
// identity: as an operator of the scope the session was claimed in, or of every scope
// when that scope is not known. The scope a request names is not enough: it would let
// an operator of one tenant reach into another tenant's sessions by naming its own.
func (gs *grantSet) operates(name string, action Action, owner SessionOwner) bool {
	if owner.ScopeKnown && gs.allowedAs(name, RoleOperator, action, owner.Scope) {
		return true
	}
	return gs.operatorEverywhere(name, action)
}

// operatorEverywhere reports whether name holds an operator grant for action in every
// scope ("**", or no scopes). A grant of the global scope "" covers that scope only.
func (gs *grantSet) operatorEverywhere(name string, action Action) bool {
	for i := range gs.all {
		if g := &gs.all[i]; g.role == RoleOperator && g.names(name) && g.coversAll(action) {
			return true
		}
	}
	return false
}

func (gs *grantSet) allowed(name string, action Action, scope string) bool {
	for i := range gs.all {
		if g := &gs.all[i]; g.names(name) && g.covers(action, scope) {
			return true
		}
	}
	return false
}

func (gs *grantSet) allowedAs(name, role string, action Action, scope string) bool {
	for i := range gs.all {
		if g := &gs.all[i]; g.role == role && g.names(name) && g.covers(action, scope) {
			return true
		}
	}
	return false
}

// scopeDenial explains a refused scope action as precisely as the grants allow.
func (gs *grantSet) scopeDenial(name string, action Action, scope string) *DeniedError {
	e := &DeniedError{Identity: name, Action: action, Scope: scope}
	named := false
	for i := range gs.all {
		g := &gs.all[i]
		if !g.names(name) {
			continue
		}
		named = true
		if scope == "" && g.permits(action) && (action == Register || action == Subscribe) {
			e.Why = `the global scope reaches every tenant: only an operator or a grant naming "" may do this there`
		}
	}
	if !named {
		e.Why = "no grant names this identity"
	}
	return e
}

func (z *Authorizer) deny(e *DeniedError) error {
	z.log.Info("permission denied", zap.String("identity", e.Identity), zap.Stringer("action", e.Action),
		zap.String("scope", clipEchoed(e.Scope)), zap.String("session_id", clipEchoed(e.SessionID)), zap.String("why", e.Why))
	return e
}
