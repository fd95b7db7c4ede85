package auth

import (
	"fmt"
	"path"
)

// grant is a compiled [Grant].
type grant struct {
	identity string // exact name or path.Match glob
	role     string
	scopes   []scopeGlob
}

func compileGrants(in []Grant) ([]grant, error) {
	out := make([]grant, 0, len(in))
	for i, g := range in {
		where := fmt.Sprintf("grants[%d]", i)
		if g.At != "" {
			where = g.At + ": auth." + where
		}
		if err := checkIdentityName(g.Identity); err != nil {
			return nil, configError("%s: %v", where, err)
		}
		if _, err := path.Match(g.Identity, ""); err != nil {
			return nil, configError("%s: identity glob %q: %v", where, g.Identity, err)
		}
		switch g.Role {
		case RoleAgent, RoleProvider, RoleHook:
			if len(g.Scopes) == 0 {
				return nil, configError("%s: role %s needs scopes (\"tenant-a/**\" for a subtree, \"**\" for all)", where, g.Role)
			}
		case RoleOperator:
		default:
			return nil, configError("%s: unknown role %q (agent, provider, hook or operator)", where, g.Role)
		}
		c := grant{identity: g.Identity, role: g.Role}
		scopes := g.Scopes
		if len(scopes) == 0 {
			scopes = []string{"**"} // an operator without scopes operates everywhere
		}
		for _, s := range scopes {
			sg, err := parseScopeGlob(s)
			if err != nil {
				return nil, configError("%s: %v", where, err)
			}
			c.scopes = append(c.scopes, sg)
		}
		out = append(out, c)
	}
	return out, nil
}

func (g *grant) names(identity string) bool {
	ok, _ := path.Match(g.identity, identity)
	return ok
}

// permits reports whether the grant's role may perform action at all.
func (g *grant) permits(action Action) bool {
	switch g.role {
	case RoleOperator:
		return action >= ReadTools && action <= Admin
	case RoleAgent:
		return action == ReadTools || action == Execute
	case RoleProvider:
		return action == Register
	case RoleHook:
		return action == Subscribe
	}
	return false
}

// coversAll reports whether the grant lets its role perform action in every scope: one
// of its scope globs is "**" (an operator grant without scopes has it).
func (g *grant) coversAll(action Action) bool {
	if !g.permits(action) {
		return false
	}
	for _, s := range g.scopes {
		if len(s.segs) == 0 && s.descendants {
			return true
		}
	}
	return false
}

// covers reports whether the grant lets its role perform action in scope. The global
// scope "" is special for providers and hooks: a tool registered there is visible to
// every tenant, and a hook there sees every tenant's calls, so only a grant naming ""
// itself covers it; "**" does not.
func (g *grant) covers(action Action, scope string) bool {
	if !g.permits(action) {
		return false
	}
	explicitGlobal := scope == "" && g.role != RoleOperator && (action == Register || action == Subscribe)
	for _, s := range g.scopes {
		if s.match(scope) && (!explicitGlobal || s.namesGlobal()) {
			return true
		}
	}
	return false
}
