package auth

import (
	"fmt"
	"sync"
)

// ownership maps sessions to the identity that first executed a batch in them. It lives
// in memory and is capped: at the cap a new session cannot be claimed (fail closed)
// until [Authorizer.ForgetSession] frees room. Evicting old owners instead would let the
// next identity to execute in an evicted session claim it and read its history.
//
// Ownership does not survive a restart: afterwards, the first identity to execute in
// an existing session becomes its owner. Session ids should therefore be unguessable
// (128 random bits); recording the owner durably in the session log is the follow-up
// that closes this.
type ownership struct {
	mu     sync.Mutex
	owners map[string]owner
	max    int
}

type owner struct {
	identity string
	// scope the session was claimed in, when known: lets an operator of that scope read
	// it. Claims through [Authorizer.ClaimSession] carry no scope.
	scope      string
	scopeKnown bool
}

func newOwnership(maxSessions int) *ownership {
	return &ownership{owners: map[string]owner{}, max: maxSessions}
}

// claim records o as the owner of sessionID unless the session already has one, and
// returns the owner in force.
func (t *ownership) claim(sessionID string, o owner) (owner, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.owners[sessionID]; ok {
		return cur, nil
	}
	if len(t.owners) >= t.max {
		return owner{}, fmt.Errorf("%w (%d sessions): raise the cap or let retention forget sessions", ErrOwnershipFull, t.max)
	}
	t.owners[sessionID] = o
	return o, nil
}

func (t *ownership) get(sessionID string) (owner, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.owners[sessionID]
	return o, ok
}

func (t *ownership) forget(sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.owners, sessionID)
}

func (t *ownership) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.owners)
}
