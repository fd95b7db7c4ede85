package policy

import (
	"cmp"

	"github.com/toolsd/toolsd/internal/glob"
	"github.com/toolsd/toolsd/internal/registry"
)

// Rules without a scope or tool pattern match everything.
var (
	anyScope, _ = glob.Scope("**", 0)
	anyTool, _  = glob.Tool("*")
)

// A pattern that can never match is refused: a rule the operator wrote to deny or ask
// that silently matches nothing fails open. Only calls of tools that resolved in a
// valid scope reach the rules, so a scope or name the registry refuses never does.

// scopeGlob compiles a rule's scope pattern, refusing one that no scope can match. ""
// matches every scope, as a lone "*" and "**" do, and as a hook subscription's or a
// hooks.required entry's "" does.
func scopeGlob(p string) (glob.Pattern, error) {
	g, err := glob.Scope(cmp.Or(p, "**"), 0)
	if err != nil {
		return g, err
	}
	return g, registry.ScopePatternProblem(p)
}

// toolGlob compiles a rule's tool pattern, refusing one that no tool name can match.
func toolGlob(p string) (glob.Pattern, error) {
	g, err := glob.Tool(p)
	if err != nil {
		return g, err
	}
	return g, registry.ToolPatternProblem(p)
}
