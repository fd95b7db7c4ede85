package server

import "context"

// Action is what a caller wants to do, for authorization.
type Action int

// The actions the ToolService checks.
const (
	ActionReadTools Action = iota
	ActionExecute
	ActionReadSession
	ActionRegister
	ActionRestrict
)

// Authorizer decides whether the caller in ctx may perform action on scope (and, for
// session reads, on sessionID). It returns a PERMISSION_DENIED-mapped error or nil.
type Authorizer interface {
	Authorize(ctx context.Context, action Action, scope, sessionID string) error
	// ScopeFilter returns the scopes in which the caller may perform action, as a
	// predicate that logs nothing (for filtering a listing), or a PERMISSION_DENIED-mapped
	// error when it may do so nowhere.
	ScopeFilter(ctx context.Context, action Action) (func(scope string) bool, error)
	// Unconfined reports whether the caller in ctx acts for the operator rather than
	// for a tenant (see auth.Authorizer.Unconfined): its batches and watches are bound
	// by Limits.MaxBatches and MaxWatches alone, a tenant's by MaxBatchesPerIdentity and
	// MaxWatchesPerIdentity too.
	Unconfined(ctx context.Context, action Action) bool
	// ForgetSession drops what the authorizer remembers of sessionID's owner, once
	// DeleteSession has deleted the session with its recorded owner: the id is free,
	// and its former owner may read, watch or delete it no more than any identity that
	// does not own it (see auth.Authorizer.ForgetSession). An authorizer that keeps
	// nothing beside a shared owner store has nothing to do.
	ForgetSession(sessionID string)
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, Action, string, string) error { return nil }

func (allowAll) ScopeFilter(context.Context, Action) (func(string) bool, error) {
	return func(string) bool { return true }, nil
}

func (allowAll) Unconfined(context.Context, Action) bool { return true }

func (allowAll) ForgetSession(string) {}
