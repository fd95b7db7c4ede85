package auth

import (
	"context"
	"fmt"
	"sync"
)

// SessionOwner is the identity that owns a session: the first to execute a batch in it.
type SessionOwner struct {
	Identity string
	// Scope is the scope the session was claimed in, when ScopeKnown: it lets an
	// operator of that scope read the session. Claims through
	// [Authorizer.ClaimSession] carry no scope.
	Scope      string
	ScopeKnown bool
}

// OwnerStore keeps session owners durably (toolsd keeps them in the session log), so
// that ownership survives a restart and is removed with the session by retention.
type OwnerStore interface {
	// ClaimOwner records o as sessionID's owner unless one is recorded, and returns
	// the owner now recorded.
	ClaimOwner(ctx context.Context, sessionID string, o SessionOwner) (SessionOwner, error)
	// Owner returns sessionID's recorded owner; ok is false when it has none.
	Owner(ctx context.Context, sessionID string) (o SessionOwner, ok bool, err error)
}

// ownership maps sessions to their owners. With an [OwnerStore] the store is the
// record and the in-memory table only a cache: at its cap it drops an entry, which the
// store still has. Without one the table is the record: at the cap a new session
// cannot be claimed (fail closed) until [Authorizer.ForgetSession] frees room, because
// dropping an owner would let the next identity to execute in that session claim it
// and read its history — and ownership does not survive a restart.
type ownership struct {
	store OwnerStore // nil: the table is the only record

	mu     sync.Mutex
	owners map[string]SessionOwner
	max    int
	// changes counts the claims that changed the cache, and the owners forgotten. A
	// lookup that asks the store caches its answer only if none did meanwhile:
	// retention may have deleted the session and another identity claimed it, and the
	// lookup's answer, the former owner or none, must not replace the new one; nor may
	// the owner of a session deleted since come back.
	changes uint64
}

func newOwnership(maxSessions int, store OwnerStore) *ownership {
	return &ownership{owners: map[string]SessionOwner{}, max: maxSessions, store: store}
}

// claim records o as the owner of sessionID unless the session already has one, and
// returns the owner in force.
//
// With a store, every claim goes to the store, never to the cache alone: retention
// removes a session's owner with the session, and a cached owner would then keep
// claiming the id without recording it, so that after a restart another identity
// could claim it and read what followed.
func (t *ownership) claim(ctx context.Context, sessionID string, o SessionOwner) (SessionOwner, error) {
	if t.store == nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if cur, ok := t.owners[sessionID]; ok {
			return cur, nil
		}
		if len(t.owners) >= t.max {
			return SessionOwner{}, fmt.Errorf("%w (%d sessions): raise the cap or let retention forget sessions", ErrOwnershipFull, t.max)
		}
		t.owners[sessionID] = o
		return o, nil
	}
	cur, err := t.store.ClaimOwner(ctx, sessionID, o)
	if err != nil {
		return SessionOwner{}, fmt.Errorf("auth: recording the session owner: %w", err)
	}
	t.remember(sessionID, cur)
	return cur, nil
}

// get returns sessionID's owner, if it has one. With a store, a cached owner is
// answered only when admits holds for it (it lets the caller in); otherwise the store
// is asked. A deletion removes a session's owner from the store, and from the cache
// only once [Authorizer.ForgetSession] runs, and a cached former owner must not refuse
// anyone the free id meanwhile: the store would let the next identity claim it. The
// store's answer replaces the cached one.
func (t *ownership) get(ctx context.Context, sessionID string, admits func(SessionOwner) bool) (SessionOwner, bool, error) {
	cur, ok, changes := t.cached(sessionID)
	if t.store == nil || (ok && admits(cur)) {
		return cur, ok, nil
	}
	cur, ok, err := t.store.Owner(ctx, sessionID)
	if err != nil {
		return SessionOwner{}, false, fmt.Errorf("auth: looking up the session owner: %w", err)
	}
	t.mu.Lock()
	if t.changes == changes {
		if ok {
			t.put(sessionID, cur)
		} else {
			delete(t.owners, sessionID)
		}
	}
	t.mu.Unlock()
	return cur, ok, nil
}

// cached returns the cached owner, if any, and the count of cache-changing claims.
func (t *ownership) cached(sessionID string) (SessionOwner, bool, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.owners[sessionID]
	return o, ok, t.changes
}

// remember caches the owner a claim got from the store.
func (t *ownership) remember(sessionID string, o SessionOwner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.owners[sessionID]; !ok || cur != o {
		t.changes++
	}
	t.put(sessionID, o)
}

// put caches an owner the store has, dropping another entry at the cap. t.mu must be
// held.
func (t *ownership) put(sessionID string, o SessionOwner) {
	if _, ok := t.owners[sessionID]; !ok && len(t.owners) >= t.max {
		for id := range t.owners {
			delete(t.owners, id)
			break
		}
	}
	t.owners[sessionID] = o
}

// forget drops sessionID's owner, whose session was deleted. It counts as a change: a
// lookup that asked the store before the deletion must not cache the owner it got.
func (t *ownership) forget(sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.owners, sessionID)
	t.changes++
}

func (t *ownership) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.owners)
}
