package auth

import "strconv"

// Action is what a caller wants to do. The first five mirror the server's actions in
// order; Subscribe and Admin serve the hook layer and operator-only RPCs.
type Action int

// The actions [Authorizer.Authorize] checks.
const (
	// ReadTools: Schemas and ResolveToolSet of a scope (agent, operator).
	ReadTools Action = iota
	// Execute: ExecuteBatch in a scope; claims the session (agent, operator).
	Execute
	// ReadSession: ReadSession and WatchSession of an owned session (agent), any (operator).
	ReadSession
	// Register: register or unregister a provider's tools in a scope (provider, operator).
	Register
	// Restrict: place, lift or override masks and registrations (operator).
	Restrict
	// Subscribe: a hook receiving the calls of a scope (hook, operator).
	Subscribe
	// Admin: everything else an operator does (operator).
	Admin
)

// String returns the action's name for logs.
func (a Action) String() string {
	switch a {
	case ReadTools:
		return "read_tools"
	case Execute:
		return "execute"
	case ReadSession:
		return "read_session"
	case Register:
		return "register"
	case Restrict:
		return "restrict"
	case Subscribe:
		return "subscribe"
	case Admin:
		return "admin"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// verb phrases the action for denial messages: "may not <verb> scope ...".
func (a Action) verb() string {
	switch a {
	case ReadTools:
		return "read tools in"
	case Execute:
		return "execute in"
	case ReadSession:
		return "read"
	case Register:
		return "register tools in"
	case Restrict:
		return "restrict"
	case Subscribe:
		return "subscribe to"
	case Admin:
		return "administer"
	}
	return a.String() + " in"
}
