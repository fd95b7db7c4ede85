package auth_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/toolsd/toolsd/internal/auth"
)

// memOwners is an OwnerStore in a map, standing in for the session log; it outlives
// the authorizers that use it, as the log outlives a restart.
type memOwners struct {
	mu     sync.Mutex
	owners map[string]auth.SessionOwner
	err    error // when set, every call fails with it
	calls  int
}

func newMemOwners() *memOwners { return &memOwners{owners: map[string]auth.SessionOwner{}} }

func (m *memOwners) ClaimOwner(_ context.Context, id string, o auth.SessionOwner) (auth.SessionOwner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.err != nil {
		return auth.SessionOwner{}, m.err
	}
	if cur, ok := m.owners[id]; ok {
		return cur, nil
	}
	m.owners[id] = o
	return o, nil
}

func (m *memOwners) Owner(_ context.Context, id string) (auth.SessionOwner, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.err != nil {
		return auth.SessionOwner{}, false, m.err
	}
	o, ok := m.owners[id]
	return o, ok, nil
}

// An owner recorded in the store binds the authorizer of the next process: another
// identity can neither claim nor read the session after a restart.
func TestOwnershipSurvivesRestart(t *testing.T) {
	store := newMemOwners()
	before := newAuthorizer(t, auth.WithOwnerStore(store))
	a, b := asIdentity("agent-a"), asIdentity("agent-b")
	if err := before.Authorize(a, auth.Execute, "tenant-a/bot", "s1"); err != nil {
		t.Fatalf("Execute(agent-a, s1) = %v", err)
	}

	after := newAuthorizer(t, auth.WithOwnerStore(store)) // the restart: an empty table
	for name, err := range map[string]error{
		"Execute":     after.Authorize(b, auth.Execute, "sandbox/x", "s1"),
		"ReadSession": after.Authorize(b, auth.ReadSession, "", "s1"),
		"ReadTools":   after.Authorize(b, auth.ReadTools, "sandbox/x", "s1"),
	} {
		if !errors.Is(err, auth.ErrPermissionDenied) {
			t.Errorf("%s(agent-b, agent-a's s1) after a restart = %v, want ErrPermissionDenied", name, err)
		}
	}
	if err := after.Authorize(a, auth.ReadSession, "", "s1"); err != nil {
		t.Errorf("ReadSession(agent-a, own s1) after a restart = %v, want nil", err)
	}
	if err := after.Authorize(asIdentity("op-a"), auth.ReadSession, "", "s1"); err != nil {
		t.Errorf("ReadSession(operator of tenant-a, s1) after a restart = %v, want nil (scope recorded)", err)
	}
	if got := store.owners["s1"]; got != (auth.SessionOwner{Identity: "agent-a", Scope: "tenant-a/bot", ScopeKnown: true}) {
		t.Errorf("recorded owner = %+v", got)
	}
}

// With a store, the in-memory table is a cache: at its cap it drops entries instead of
// refusing new sessions, and a dropped owner still binds (the store has it).
func TestOwnershipCacheAtCap(t *testing.T) {
	store := newMemOwners()
	z := newAuthorizer(t, auth.WithOwnerStore(store), auth.WithMaxOwnedSessions(2))
	a := asIdentity("agent-a")
	for i := range 10 {
		if err := z.Authorize(a, auth.Execute, "tenant-a", fmt.Sprint("s", i)); err != nil {
			t.Fatalf("Execute(s%d) with cache cap 2 = %v, want nil", i, err)
		}
	}
	if got := z.OwnedSessions(); got != 2 {
		t.Errorf("OwnedSessions() = %d, want the cap 2", got)
	}
	for i := range 10 {
		if err := z.Authorize(asIdentity("agent-b"), auth.Execute, "sandbox/x", fmt.Sprint("s", i)); !errors.Is(err, auth.ErrPermissionDenied) {
			t.Errorf("Execute(agent-b, agent-a's s%d) = %v, want ErrPermissionDenied", i, err)
		}
	}
	// Cached owners answer reads without the store; a claim always asks it (retention
	// may have removed the owner with the session).
	n := store.calls
	if err := z.Authorize(a, auth.ReadSession, "", "s9"); err != nil {
		t.Fatal(err)
	}
	if store.calls != n {
		t.Errorf("reading with a cached owner cost %d store calls, want 0", store.calls-n)
	}
	if err := z.Authorize(a, auth.Execute, "tenant-a", "s9"); err != nil {
		t.Fatal(err)
	}
	if store.calls != n+1 {
		t.Errorf("a claim with a cached owner cost %d store calls, want 1", store.calls-n)
	}
}

// A store that fails fails the request closed: neither a claim nor a read goes through.
func TestOwnershipStoreFailure(t *testing.T) {
	store := newMemOwners()
	store.err = errors.New("disk on fire")
	z := newAuthorizer(t, auth.WithOwnerStore(store))
	a := asIdentity("agent-a")
	for name, err := range map[string]error{
		"Execute":      z.Authorize(a, auth.Execute, "tenant-a", "s1"),
		"ReadSession":  z.Authorize(a, auth.ReadSession, "", "s1"),
		"ReadTools":    z.Authorize(a, auth.ReadTools, "tenant-a", "s1"),
		"ClaimSession": z.ClaimSession("agent-a", "s1"),
	} {
		if !errors.Is(err, store.err) {
			t.Errorf("%s with a failing store = %v, want the store's error", name, err)
		}
	}
}

// racingOwners is memOwners whose Owner runs between, once, after it has read the owner
// and before it answers: what the session log does meanwhile.
type racingOwners struct {
	*memOwners
	once    sync.Once
	between func()
}

func (r *racingOwners) Owner(ctx context.Context, id string) (auth.SessionOwner, bool, error) {
	o, ok, err := r.memOwners.Owner(ctx, id)
	r.once.Do(r.between)
	return o, ok, err
}

// A read looks up an owner the cache lacks (here after a restart). Before its answer
// is cached, retention deletes the session with its owner and another identity claims
// the id. The read's stale answer must not replace the new owner in the cache: the
// former owner would go on reading the new owner's session, and the new owner would be
// refused its own.
func TestStaleOwnerLookupDoesNotOverrideAClaim(t *testing.T) {
	store := newMemOwners()
	store.owners["s1"] = auth.SessionOwner{Identity: "agent-a", Scope: "sandbox/x", ScopeKnown: true}
	racing := &racingOwners{memOwners: store}
	z := newAuthorizer(t, auth.WithOwnerStore(racing))
	a, b := asIdentity("agent-a"), asIdentity("agent-b")
	racing.between = func() {
		store.mu.Lock()
		delete(store.owners, "s1") // retention
		store.mu.Unlock()
		if err := z.Authorize(b, auth.Execute, "sandbox/y", "s1"); err != nil {
			t.Errorf("Execute(agent-b, s1) after retention deleted it = %v, want nil (the id is free)", err)
		}
	}
	if err := z.Authorize(a, auth.ReadSession, "", "s1"); err != nil {
		t.Fatalf("ReadSession(agent-a, own s1) = %v, want nil (read before the deletion)", err)
	}
	if err := z.Authorize(a, auth.ReadSession, "", "s1"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ReadSession(agent-a, s1) now agent-b's = %v, want ErrPermissionDenied", err)
	}
	if err := z.Authorize(b, auth.ReadSession, "", "s1"); err != nil {
		t.Errorf("ReadSession(agent-b, own s1) = %v, want nil", err)
	}
}

// Retention deletes a session's owner record with the session, and the id is free
// again: the next identity to execute a batch in it claims it. The cache kept the
// former owner until then, so another identity was refused ResolveToolSet on the free
// id, though its batch there would have claimed it. A cached owner that would refuse
// is checked against the store.
func TestCachedOwnerOfADeletedSessionDoesNotRefuse(t *testing.T) {
	store := newMemOwners()
	z := newAuthorizer(t, auth.WithOwnerStore(store))
	a, b := asIdentity("agent-a"), asIdentity("agent-b")
	if err := z.Authorize(a, auth.Execute, "sandbox/x", "s1"); err != nil {
		t.Fatalf("Execute(agent-a, s1) = %v", err)
	}
	if err := z.Authorize(b, auth.ReadTools, "sandbox/y", "s1"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Fatalf("ReadTools(agent-b, agent-a's s1) = %v, want ErrPermissionDenied", err)
	}
	store.mu.Lock()
	delete(store.owners, "s1") // retention
	store.mu.Unlock()
	if err := z.Authorize(b, auth.ReadTools, "sandbox/y", "s1"); err != nil {
		t.Errorf("ReadTools(agent-b, s1) after retention deleted it = %v, want nil (the id is free)", err)
	}
	if err := z.Authorize(b, auth.Execute, "sandbox/y", "s1"); err != nil {
		t.Fatalf("Execute(agent-b, free s1) = %v, want nil", err)
	}
	if err := z.Authorize(b, auth.ReadSession, "", "s1"); err != nil {
		t.Errorf("ReadSession(agent-b, own s1) = %v, want nil", err)
	}
	for name, err := range map[string]error{
		"ReadTools":   z.Authorize(a, auth.ReadTools, "sandbox/x", "s1"),
		"ReadSession": z.Authorize(a, auth.ReadSession, "", "s1"),
	} {
		if !errors.Is(err, auth.ErrPermissionDenied) {
			t.Errorf("%s(agent-a, s1 now agent-b's) = %v, want ErrPermissionDenied", name, err)
		}
	}
}

// A read looks up an owner the cache lacks (here after a restart) and, before its
// answer is cached, the session is deleted with its owner and ForgetSession runs. The
// read's stale answer must not bring the forgotten owner back into the cache: its
// former owner would go on reading the free id, which no other identity may.
func TestStaleOwnerLookupDoesNotUndoAForget(t *testing.T) {
	store := newMemOwners()
	store.owners["s1"] = auth.SessionOwner{Identity: "agent-a", Scope: "sandbox/x", ScopeKnown: true}
	racing := &racingOwners{memOwners: store}
	z := newAuthorizer(t, auth.WithOwnerStore(racing))
	a := asIdentity("agent-a")
	racing.between = func() {
		store.mu.Lock()
		delete(store.owners, "s1") // DeleteSession
		store.mu.Unlock()
		z.ForgetSession("s1")
	}
	if err := z.Authorize(a, auth.ReadSession, "", "s1"); err != nil {
		t.Fatalf("ReadSession(agent-a, own s1) = %v, want nil (read before the deletion)", err)
	}
	if err := z.Authorize(a, auth.ReadSession, "", "s1"); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("ReadSession(agent-a, s1) once deleted and forgotten = %v, want ErrPermissionDenied", err)
	}
}
