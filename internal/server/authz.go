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
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, Action, string, string) error { return nil }
