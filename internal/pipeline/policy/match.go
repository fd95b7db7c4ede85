package policy

import "github.com/toolsd/toolsd/internal/glob"

// Rules without a scope or tool pattern match everything.
var (
	anyScope, _ = glob.Scope("**", 0)
	anyTool, _  = glob.Tool("*")
)

// scopeGlob compiles a rule's scope pattern.
func scopeGlob(p string) (glob.Pattern, error) { return glob.Scope(p, 0) }
